"""Random, non-zero 64-bit ids for tuple edges and tuple tree roots.

Zero is excluded because ``x ^ 0 == x``: a zero id would be invisible to the XOR
checksum, so a tree could complete with that tuple still unacked. With 64 random bits
the chance that a checksum hits zero early is about 2**-64 per step (Storm's
"50,000,000 years at 10K acks/s").
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from typing import Any, TypeAlias

# A random 64-bit tuple id (a root or an edge), as a Python int. Annotated as Any, not
# int, for the compiled build: mypyc keeps an ``int`` as a 63-bit tagged value when it
# fits, and three random 64-bit ids in four do not, so ``int`` would cost a failed
# conversion at every use (measured: notes/performance.md).
Id: TypeAlias = Any

_BATCH = 1024
_UNPACK = struct.Struct(f"<{_BATCH}Q").unpack


class IdGenerator:
    """Per-task id source. Ids are drawn in bulk (8 KiB of random bytes per 1024 ids)
    because a call per id is measurable on the hot path.

    ``seed`` makes the sequence reproducible (tests, Mersenne Twister). Unseeded, the
    bytes come from ``os.urandom``: cheaper per id than the twister's big-int draw
    (no 65,536-bit integer made and converted), and it cannot repeat a sequence in
    processes forked from one parent, whose ids must never collide.
    """

    __slots__ = ("_buf", "_random_bytes", "pop")

    def __init__(self, seed: int | None = None) -> None:
        self._random_bytes: Callable[[int], bytes] = (
            os.urandom if seed is None else random.Random(seed).randbytes
        )
        self._buf: list[Id] = []
        # Hot paths call ``pop()`` (a C method) and fall back to ``next_id()`` on
        # IndexError, which refills: no Python frame per id.
        self.pop: Callable[[], Id] = self._buf.pop

    def next_id(self) -> Id:
        buf = self._buf
        if not buf:
            self._refill()
        return buf.pop()

    def _refill(self) -> None:
        # One draw split by struct (C speed); zeros (2**-64 each) dropped.
        ids = _UNPACK(self._random_bytes(8 * _BATCH))
        self._buf.extend(ids)
        if not all(ids):  # half the cost of ``0 in ids``
            self._buf[:] = [v for v in self._buf if v]
