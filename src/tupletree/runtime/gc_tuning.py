"""The cyclic GC tuned for a worker's loop, on both clusters, restored afterwards.

Why: tuples in flight (decoded frames, inbox backlogs) and the records of trees held
open (an acker's ledger, a spout's pending map: for a checkpoint interval when a
stateful bolt holds its acks, for a window's length when a windowed bolt does) are
containers that outlive many collections of the youngest generation at its default
threshold of 700 allocations, so each collection walks them again to no avail
(callgrind showed a worker's instructions in gc_collect_main). So: freeze what existed
when the worker started and collect the young generation every ``GC_YOUNG_THRESHOLD``
allocations. Nothing here disables collection: cycles are still found.

Measured (notes/performance.md): two Spark workers measurably faster; one LocalCluster
running the plain word count no faster and no slower; the stateful word count
(bench/stateful.py, checkpoints every second) from 0.48 to 0.61 of the plain one's
sentences per CPU second. Spark workers tune for their loop (``worker_gc``); a
LocalCluster, which runs in the user's process, tunes while it exists (``SharedTuning``,
``LocalCluster(tune_gc=False)`` leaves the process alone), and restores the process's
own settings when the last cluster that tuned shuts down.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

GC_YOUNG_THRESHOLD = 10_000


@contextmanager
def worker_gc() -> Iterator[None]:
    """Tuned inside the block, restored after it (Spark may reuse the Python process for
    other tasks), even when the block raised."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


class SharedTuning:
    """The tuning shared by every LocalCluster of a process: the first ``acquire`` tunes,
    the last ``release`` restores what the process had (thread-safe; counted, so
    clusters may overlap in any order)."""

    _lock = threading.Lock()
    _users = 0
    _saved: tuple[int, ...] | None = None

    @classmethod
    def acquire(cls) -> None:
        with cls._lock:
            cls._users += 1
            if cls._users == 1:
                cls._saved = gc.get_threshold()
                gc.freeze()
                gc.set_threshold(GC_YOUNG_THRESHOLD, *cls._saved[1:])

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            if cls._users == 0:
                return
            cls._users -= 1
            if cls._users == 0 and cls._saved is not None:
                gc.set_threshold(*cls._saved)
                gc.unfreeze()
                cls._saved = None
