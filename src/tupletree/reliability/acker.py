"""The acker ledger: Storm's XOR tracking of tuple trees, as a pure state machine.

One record per tuple tree root: ``[val, spout_task, failed]``.

- init(root, val, spout_task): XOR ``val`` in and learn whom to tell. An init may
  arrive after acks of the same tree (messages take different paths); those acks
  created the record without a spout task, and the tree cannot complete until the init
  names one.
- ack(root, val): XOR ``val`` in (an acked tuple's edge id XOR the edges of the children
  anchored to it, so the tree can never read zero while a child is unacked).
- fail(root): mark failed.
- reset(root): restart the record's countdown and pass the reset on to the spout.
- rotate(): advance every record towards expiry; expired records with a known spout
  task are reported TIMED_OUT.

After every message the record is re-put in the nursery (its countdown restarts, as
reference/000 describes) and, when its spout task is known: val == 0 -> ACKED, failed
-> FAILED, and the record is removed.

Capacity guard (reference/001): while ``high_water`` trees are held, an init for a new
tree is answered FAILED at once and not stored, and an ack that would create a record is
dropped (its tree then times out and is replayed), so memory stays bounded even when
bolts never ack.

Every method returns either None or an outcome ``(outcome, root, spout_task)`` with an
outcome from ``protocol``; the caller delivers it. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from tupletree.reliability.ids import Id
from tupletree.reliability.protocol import (
    ACKED,
    ACKER_BUCKETS,
    FAILED,
    RESET_TIMEOUT,
    TIMED_OUT,
)
from tupletree.reliability.rotating_map import RotatingMap

Outcome = tuple[int, Id, int]  # (outcome, root, spout_task)

VAL, SPOUT_TASK, FAILED_FLAG = 0, 1, 2


class AckerLedger:
    __slots__ = ("_pending", "high_water")

    def __init__(self, high_water: int = 2**20, num_buckets: int = ACKER_BUCKETS) -> None:
        self._pending: RotatingMap[Id, list] = RotatingMap(num_buckets)
        self.high_water = high_water

    def init(self, root: Id, val: Id, spout_task: int) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            if len(self._pending) >= self.high_water:
                return (FAILED, root, spout_task)
            rec = [val, spout_task, False]
        else:
            rec[VAL] ^= val
            rec[SPOUT_TASK] = spout_task
        return self._settle(root, rec)

    def ack(self, root: Id, val: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            if len(self._pending) >= self.high_water:
                return None
            self._pending.put_new(root, [val, None, False])
            return None
        rec[VAL] ^= val
        return self._settle(root, rec)

    def fail(self, root: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            # The fail beat the init: remember it, the init will settle the tree.
            if len(self._pending) >= self.high_water:
                return None
            rec = [0, None, True]
        else:
            rec[FAILED_FLAG] = True
        return self._settle(root, rec)

    def reset(self, root: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            return None
        self._pending.put_new(root, rec)
        if rec[SPOUT_TASK] is None:
            return None
        return (RESET_TIMEOUT, root, rec[SPOUT_TASK])

    def _settle(self, root: Id, rec: list) -> Outcome | None:
        spout_task = rec[SPOUT_TASK]
        if spout_task is not None:
            if rec[FAILED_FLAG]:
                return (FAILED, root, spout_task)
            if rec[VAL] == 0:
                return (ACKED, root, spout_task)
        self._pending.put_new(root, rec)
        return None

    def rotate(self) -> list[Outcome]:
        """Expire the oldest cohort; report the trees whose spout task is known."""
        return [
            (TIMED_OUT, root, rec[SPOUT_TASK])
            for root, rec in self._pending.rotate().items()
            if rec[SPOUT_TASK] is not None
        ]

    def value(self, root: Id) -> Id | None:
        """The tree's current XOR value (None if not held): for tests and debugging."""
        rec = self._pending.get(root)
        return None if rec is None else rec[VAL]

    def __contains__(self, root: object) -> bool:
        return root in self._pending

    def __len__(self) -> int:
        return len(self._pending)
