"""The form a task's output takes to each target task: one Tuple per row, or a Batch.

Shared by the collectors that can send Batches: a BatchBolt's (runtime/batch_collector.py
says why each form) and a spout's ``emit_batch`` (runtime/collectors.py).

- ``TUPLES``: a task of this worker that takes Tuples: one Tuple per row, delivered at
  once, as from any collector.
- ``PEER``: a task of another worker that takes Tuples: the rows go as one Batch with an
  edge per row (frames are columnar anyway; the receiver rebuilds a Tuple per row, and
  each is acked on its own).
- ``BATCH``: a BatchBolt's task, on any worker: one Batch, acked whole, so a run of one
  tree's rows needs one edge between them.
"""

from __future__ import annotations

from typing import Final

TUPLES: Final = 0
PEER: Final = 1
BATCH: Final = 2


def target_kinds(tasks: list[int], batch_tasks: set[int], remote: set[int]) -> list[int]:
    """Task id -> TUPLES, PEER or BATCH, as a list indexed by task id."""
    kinds = [TUPLES] * (max(tasks, default=0) + 1)
    for t in tasks:
        if t in batch_tasks:
            kinds[t] = BATCH
        elif t in remote:
            kinds[t] = PEER
    return kinds
