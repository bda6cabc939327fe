"""The acker ledger: Storm's XOR tracking of tuple trees, as a pure state machine.

One record (``_Tree``) per tuple tree root: its XOR value, the spout task to tell (not
yet known: -1) and whether it failed.

- init(root, val, spout_task): XOR ``val`` in and learn whom to tell. One init per root.
- ack(root, val): XOR ``val`` in (an acked tuple's edge id XOR the edges of the children
  anchored to it, so the tree can never read zero while a child is unacked).
- fail(root): mark failed.
- reset(root): restart the record's countdown and pass the reset on to the spout.
- rotate(): advance every record towards expiry; expired trees are reported TIMED_OUT.

After every message the record is re-put in the nursery (its countdown restarts, as
Storm's acker does) and, when its spout task is known: val == 0 -> ACKED, failed ->
FAILED, and the record is removed.

Three tables, each bounded, so that messages about trees that are not live can never
crowd out trees that are:

- trees: records whose init arrived. The capacity guard counts only these: while
  ``high_water`` are held, an init is answered FAILED at once and not stored, so
  memory stays bounded even when bolts never ack.
- early records: acks and fails that beat their tree's init (messages take different
  paths between workers). They wait apart, at most ``early_limit`` of them, and join
  the trees when the init arrives (the guard applies then, as to any init). Past the
  limit the oldest are dropped (their trees time out and are replayed); untouched for
  ``num_buckets`` rotations they expire silently (there is no spout task to tell).
- settled roots: trees that failed, were refused by the guard, or timed out, kept for
  up to ``num_buckets`` rotations, at most ``settled_limit`` of them (the oldest go
  first). Their other branches' late acks and fails are swallowed instead of
  starting early records. Acked trees are not kept: once a tree reads zero no tuple
  of it is left to send anything.

Both side limits default to ``max(1024, high_water // 16)``. Memory: at most
``high_water + early_limit`` records and ``settled_limit`` roots.

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
from tupletree.reliability.rotating_map import CappedRotatingMap, RotatingMap

Outcome = tuple[int, Id, int]  # (outcome, root, spout_task)

UNKNOWN = -1  # the spout task of a tree whose init has not arrived yet
SIDE_LIMIT_MIN = 1024  # the least default early_limit and settled_limit


class _Tree:
    """A pending tree. A small class rather than a 3-item list: the compiled build
    reads and writes its fields directly, and it is smaller and faster (measured:
    notes/performance.md)."""

    __slots__ = ("failed", "spout_task", "val")

    def __init__(self, val: Id, spout_task: int, failed: bool) -> None:
        self.val = val
        self.spout_task = spout_task
        self.failed = failed


class AckerLedger:
    __slots__ = ("_early", "_pending", "_settled", "high_water")

    def __init__(
        self,
        high_water: int = 2**20,
        num_buckets: int = ACKER_BUCKETS,
        early_limit: int | None = None,
        settled_limit: int | None = None,
    ) -> None:
        side = max(SIDE_LIMIT_MIN, high_water // 16)
        self._pending: RotatingMap[Id, _Tree] = RotatingMap(num_buckets)
        self._early: CappedRotatingMap[Id, _Tree] = CappedRotatingMap(
            num_buckets, side if early_limit is None else early_limit
        )
        self._settled: CappedRotatingMap[Id, bool] = CappedRotatingMap(
            num_buckets, side if settled_limit is None else settled_limit
        )
        self.high_water = high_water

    def init(self, root: Id, val: Id, spout_task: int) -> Outcome | None:
        early = self._early
        rec = early.remove(root) if len(early) else None
        if len(self._pending) >= self.high_water:
            self._settled.put(root, True)
            return (FAILED, root, spout_task)
        if rec is None:
            rec = _Tree(val, spout_task, False)
        else:
            rec.val ^= val
            rec.spout_task = spout_task
        return self._settle(root, rec)

    def ack(self, root: Id, val: Id) -> Outcome | None:
        # In place: the record is moved to the nursery (what _settle's re-put does) and
        # taken out only when it settles. A pending record is never failed (fail and
        # _settle settle a failed one at once), so only its value can settle it here.
        # Most acks are not a tree's last: one dict lookup for them, not three.
        pending = self._pending
        rec = pending.touch(root)
        if rec is None:
            self._before_init(root, val, False)
            return None
        rec.val ^= val
        if rec.val == 0:
            pending.remove(root)
            return (ACKED, root, rec.spout_task)
        return None

    def fail(self, root: Id) -> Outcome | None:
        rec = self._pending.remove(root)
        if rec is None:
            # The fail beat the init (remember it: the init will settle the tree), or
            # the tree is already settled.
            self._before_init(root, 0, True)
            return None
        self._settled.put(root, True)
        return (FAILED, root, rec.spout_task)

    def reset(self, root: Id) -> Outcome | None:
        rec = self._pending.touch(root)
        if rec is None:
            self._early.touch(root)
            return None
        return (RESET_TIMEOUT, root, rec.spout_task)

    def _before_init(self, root: Id, val: Id, failed: bool) -> None:
        """An ack or fail for a tree with no record: a settled tree's late message
        (swallowed) or one that beat its init (kept apart, bounded)."""
        if root in self._settled:
            return
        early = self._early
        rec = early.remove(root)
        if rec is None:
            rec = _Tree(val, UNKNOWN, failed)
        else:
            rec.val ^= val
            if failed:
                rec.failed = True
        early.put_new(root, rec)

    def _settle(self, root: Id, rec: _Tree) -> Outcome | None:
        """A record whose spout task is known: report it if done, else keep it."""
        if rec.failed:
            self._settled.put(root, True)
            return (FAILED, root, rec.spout_task)
        if rec.val == 0:
            return (ACKED, root, rec.spout_task)
        self._pending.put_new(root, rec)
        return None

    def rotate(self) -> list[Outcome]:
        """Expire the oldest cohort of each table; report the trees that timed out."""
        self._early.rotate()
        settled = self._settled
        settled.rotate()
        out: list[Outcome] = []
        for root, rec in self._pending.rotate().items():
            out.append((TIMED_OUT, root, rec.spout_task))
            settled.put(root, True)
        return out

    def value(self, root: Id) -> Id | None:
        """The tree's current XOR value (None if not held): for tests and debugging."""
        rec = self._pending.get(root)
        if rec is None:
            rec = self._early.get(root)
        return None if rec is None else rec.val

    @property
    def early_limit(self) -> int:
        """The most early records held (rounded down to whole buckets)."""
        return self._early.capacity

    @property
    def settled_limit(self) -> int:
        """The most settled roots remembered (rounded down to whole buckets)."""
        return self._settled.capacity

    def early_count(self) -> int:
        """Early records held: acks and fails still waiting for their tree's init."""
        return len(self._early)

    def settled_count(self) -> int:
        """Settled roots remembered, whose late messages are swallowed."""
        return len(self._settled)

    def __contains__(self, root: object) -> bool:
        return root in self._pending or root in self._early

    def __len__(self) -> int:
        """Trees held (their init arrived): what the capacity guard counts."""
        return len(self._pending)
