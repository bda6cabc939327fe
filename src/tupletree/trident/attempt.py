"""Batch ids: which batch a Trident tuple belongs to, and which attempt at it.

Every Trident tuple travels as ``[batch id, *values]``. A batch of a spout managed by
the master batch coordinator is a ``TransactionAttempt(transaction_id, attempt_id)``:
the txid, which a replay keeps, and the attempt, which grows with every replay (so a
task that sees a higher attempt drops what it holds of a lower one). A DRPC request is
a batch of its own (``DRPCBatch``): its id, attempt 0, and where its result goes.

Both are tuples: ``bid[0]`` is the id a task tracks the batch by, ``bid[1]`` the
attempt. They pickle as plain tuples of their class, cheaply, between workers.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class TransactionAttempt(NamedTuple):
    """Storm's TransactionAttempt: ``transaction_id`` (the txid) and ``attempt_id``."""

    transaction_id: int
    attempt_id: int

    @property
    def txid(self) -> int:
        return self.transaction_id

    def __str__(self) -> str:
        return f"{self.transaction_id}:{self.attempt_id}"


class DRPCBatch(NamedTuple):
    """One DRPC request as a batch: ``request_id`` (random), attempt 0, and the
    request's return info (where ReturnResults sends the answer)."""

    request_id: int
    attempt_id: int
    return_info: Any

    def __str__(self) -> str:
        return f"drpc:{self.request_id}"
