"""WorkerAcks: the acks of all of a worker's bolt tasks, XOR-combined per tree for a
whole round of the worker's loop, then sent: one ACK message per tree per round.

Why: a collector already combines one task's acks of a turn per tree (collectors.py),
but a tree that reaches N tasks still cost N ACK messages a round, one from each. With
a spout's batch as one tree (``emit_batch``) and a fields grouping at parallelism 16,
a tree of 100 sentences reached all 16 count tasks of a worker and its acker handled
~33 ACKs for it (notes/performance.md, stop 43). Sharing one dict between the tasks
makes those one message, and one acker step.

Why this is exact: each task's contribution is what its own flush would have sent, and
XOR is associative and commutative, so the acker's record ends at the same value. A
tree cannot read zero early: a task's ack of a tuple carries the edges of the children
it anchored, so the sum stays non-zero until every child is acked, whatever was
combined with what. A combined value of 0 is not sent, as a collector's is not.

What changes: an ACK reaches the acker at the end of the round rather than the end of
the task's turn. The worker runs its ackers first in a round (component ``__acker``
sorts first), so for most topologies an ack was read in the next round either way. A
fail is still sent at once; an ACK of a tree that a fail settled first is swallowed by
the acker (reliability/acker.py keeps settled roots), as a late ack always was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tupletree.reliability.ids import Id
from tupletree.reliability.protocol import ACK


class WorkerAcks:
    """``acks`` (root -> XOR of what was acked in it since the last ``flush``), and
    ``flush()``, which sends it, one ACK message a tree, to each tree's acker
    (``acker_tasks[root % len(acker_tasks)]``, through ``deliver``: task -> its inbox's
    ``append``). A worker's bolt collectors share one, which the worker flushes once a
    round; a collector wired without one has its own, flushed at the end of each turn
    (collectors.py)."""

    __slots__ = ("_ackers", "_deliver", "_n", "acks")

    def __init__(self, deliver: dict[int, Callable[[Any], None]], acker_tasks: list[int]) -> None:
        self.acks: dict[Id, Id] = {}
        self._deliver = deliver
        self._ackers = acker_tasks
        self._n = len(acker_tasks)

    def flush(self) -> None:
        acks = self.acks
        if acks:
            deliver, ackers, n = self._deliver, self._ackers, self._n
            for root, val in acks.items():
                if val:
                    deliver[ackers[root % n]]((ACK, root, val, 0))
            acks.clear()
