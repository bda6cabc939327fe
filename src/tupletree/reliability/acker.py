"""The acker ledger: Storm's XOR tracking of tuple trees, as a pure state machine.

One record (``_Tree``) per tuple tree root: its XOR value, the spout task to tell (not
yet known: -1) and whether it failed.

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

UNKNOWN = -1  # the spout task of a tree whose init has not arrived yet


class _Tree:
    """A pending tree. A small class rather than a 3-item list: the compiled build
    reads and writes its fields directly, and it is smaller (word count 87,499 ->
    85,403 instructions per sentence; acker 4.10M -> 4.57M tree updates/s; 122 -> 106
    bytes per pending tree; bench/instructions.sh, bench/run.py --only acker)."""

    __slots__ = ("failed", "spout_task", "val")

    def __init__(self, val: Id, spout_task: int, failed: bool) -> None:
        self.val = val
        self.spout_task = spout_task
        self.failed = failed


class AckerLedger:
    __slots__ = ("_pending", "high_water")

    def __init__(self, high_water: int = 2**20, num_buckets: int = ACKER_BUCKETS) -> None:
        self._pending: RotatingMap[Id, _Tree] = RotatingMap(num_buckets)
        self.high_water = high_water

    def init(self, root: Id, val: Id, spout_task: int) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            if len(self._pending) >= self.high_water:
                return (FAILED, root, spout_task)
            rec = _Tree(val, spout_task, False)
        else:
            rec.val ^= val
            rec.spout_task = spout_task
        return self._settle(root, rec)

    def ack(self, root: Id, val: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            if len(self._pending) >= self.high_water:
                return None
            self._pending.put_new(root, _Tree(val, UNKNOWN, False))
            return None
        rec.val ^= val
        return self._settle(root, rec)

    def fail(self, root: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            # The fail beat the init: remember it, the init will settle the tree.
            if len(self._pending) >= self.high_water:
                return None
            rec = _Tree(0, UNKNOWN, True)
        else:
            rec.failed = True
        return self._settle(root, rec)

    def reset(self, root: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            return None
        self._pending.put_new(root, rec)
        if rec.spout_task == UNKNOWN:
            return None
        return (RESET_TIMEOUT, root, rec.spout_task)

    def _settle(self, root: Id, rec: _Tree) -> Outcome | None:
        spout_task = rec.spout_task
        if spout_task != UNKNOWN:
            if rec.failed:
                return (FAILED, root, spout_task)
            if rec.val == 0:
                return (ACKED, root, spout_task)
        self._pending.put_new(root, rec)
        return None

    def rotate(self) -> list[Outcome]:
        """Expire the oldest cohort; report the trees whose spout task is known."""
        return [
            (TIMED_OUT, root, rec.spout_task)
            for root, rec in self._pending.rotate().items()
            if rec.spout_task != UNKNOWN
        ]

    def value(self, root: Id) -> Id | None:
        """The tree's current XOR value (None if not held): for tests and debugging."""
        rec = self._pending.get(root)
        return None if rec is None else rec.val

    def __contains__(self, root: object) -> bool:
        return root in self._pending

    def __len__(self) -> int:
        return len(self._pending)
