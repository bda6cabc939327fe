"""Random, non-zero 64-bit ids for tuple edges and tuple tree roots.

Zero is excluded because ``x ^ 0 == x``: a zero id would be invisible to the XOR
checksum, so a tree could complete with that tuple still unacked. With 64 random bits
the chance that a checksum hits zero early is about 2**-64 per step (Storm's
"50,000,000 years at 10K acks/s").
"""

from __future__ import annotations

import os
import random

_BATCH = 1024


class IdGenerator:
    """Per-task id source. Ids are drawn in bulk (one big ``getrandbits`` per 1024 ids)
    because a call per id is measurable on the hot path.

    ``seed`` makes the sequence reproducible (tests); None seeds from the OS.
    """

    __slots__ = ("_buf", "_rand")

    def __init__(self, seed: int | None = None) -> None:
        self._rand = random.Random(seed if seed is not None else os.urandom(16))
        self._buf: list[int] = []

    def next_id(self) -> int:
        buf = self._buf
        if not buf:
            self._refill()
        return buf.pop()

    __call__ = next_id

    def _refill(self) -> None:
        big = self._rand.getrandbits(64 * _BATCH)
        ids = big.to_bytes(8 * _BATCH, "little")
        out = [
            v
            for v in (int.from_bytes(ids[i : i + 8], "little") for i in range(0, 8 * _BATCH, 8))
            if v
        ]
        self._buf.extend(out)
