"""Where trees stall: what a worker knows about a tuple tree when it times out.

Storm's acker keeps a 64-bit XOR per tree, not who holds its tuples, so a timeout says
only "failed". Here, when a spout task times a tree out, its worker looks for the
tree's tuples in its own tasks at that moment:

- ``queued``: waiting in a bolt task's inbox (``queue_position``: how many tuples are
  ahead of the first one; how long it has waited is not known, nothing on the hot
  path stamps a tuple's arrival);
- ``executing``: handed to a ``Bolt``'s ``execute``, which returned without acking or
  failing it (the bolt keeps it to ack later, or forgot it); ``held_secs`` says since
  when. A ``BasicBolt`` never holds a tuple past ``execute``.

Cost on the per-tuple path: a ``Bolt``'s executor compares each input's ack state once
after ``execute`` and hands only the tuples still unsettled to ``HeldTuples.add``;
nothing else. The search runs when trees time out, at most once per message timeout
per spout task, over this worker's inboxes and held tuples.

Bounds: ``TimedOutLog`` keeps the newest ``RECENT_LIMIT`` trees; each names at most
``HOLDERS_LIMIT`` (component, task, state) holders; ``HeldTuples`` watches at most
``HELD_LIMIT`` unsettled tuples per Bolt task (past that, new ones go unwatched and
are counted in ``unwatched``).

Across workers (SparkCluster): a worker sees only its own tasks. It keeps its log like
LocalCluster's worker; ``TimedOutLog.since(count)`` gives the records added since a
report as plain dicts for the worker's metrics report, and ``TimedOutTree.from_dict``
rebuilds them on the driver. Holders on other workers need the driver to ask them for
the expired roots (``find_holders`` answers such a question).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

# The records are plain data a cluster answers with (cluster.timed_out): they live
# below every layer, so the web view can read them without the runtime.
from tupletree.records.stalls import EXECUTING, QUEUED, Holder, TimedOutTree
from tupletree.topology.batch import Batch

RECENT_LIMIT = 100
HOLDERS_LIMIT = 20
HELD_LIMIT = 4096


class HeldTuples:
    """Tuples a Bolt task still holds after ``execute`` returned, with when it got them.

    It holds at most ``limit`` entries. When it is full, the settled ones (acked or failed
    since) at its old end leave first; settled ones behind an unsettled oldest are swept
    out in one pass, but at most once per ``limit // 4`` tuples turned away, so that a
    table full of unsettled tuples costs a few steps per ``add``, not a pass over all of
    them. A sweep that frees less than a quarter of the table doubles the wait before the
    next (up to ``64 * limit`` tuples turned away); one that frees more sets it back. A
    bolt that holds its inputs on purpose (a stateful bolt until its checkpoint commits,
    a window until it slides) fills the table with tuples that settle together, and
    sweeping it every quarter found nothing, at the price of a pass per ``limit // 4``
    tuples. A tuple that finds no room goes unwatched, and is counted.
    """

    __slots__ = ("_items", "_misses", "_now", "_sweep_after", "limit", "unwatched")

    def __init__(self, now: Callable[[], float], limit: int = HELD_LIMIT) -> None:
        self._now = now
        self._items: deque[tuple[float, Any]] = deque()
        self.limit = limit
        self.unwatched = 0
        self._sweep_after = max(1, limit // 4)
        self._misses = self._sweep_after  # tuples turned away since the last sweep

    def add(self, tup: Any) -> None:
        items = self._items
        if len(items) >= self.limit:
            # Trees mostly settle in the order their tuples arrived: one step each.
            while items and items[0][1].is_settled():
                items.popleft()
            if len(items) >= self.limit and self._misses >= self._sweep_after:
                self._items = items = deque(item for item in items if not item[1].is_settled())
                self._misses = 0
                quarter = max(1, self.limit // 4)
                if self.limit - len(items) < quarter:
                    self._sweep_after = min(self._sweep_after * 2, 64 * self.limit)
                else:
                    self._sweep_after = quarter
            if len(items) >= self.limit:
                self.unwatched += 1
                self._misses += 1
                return
        items.append((self._now(), tup))

    def unsettled(self) -> Iterable[tuple[float, Any]]:
        """``(since, tuple)`` for each watched tuple not yet acked or failed."""
        return [item for item in self._items if not item[1].is_settled()]

    def __len__(self) -> int:
        return len(self._items)


def _trees_of(tup: Any) -> Iterable[int]:
    root = tup._root
    if root:
        return (root,)
    return tup._roots or ()


def find_holders(bolts: Iterable[Any], roots: Iterable[int], now: float) -> dict[int, list[Holder]]:
    """For each root, the bolt tasks among ``bolts`` that hold one of its tuples.

    A bolt is anything with ``component_id``, ``task_id``, ``inbox`` (Tuples, Batches) and
    ``held`` (a HeldTuples or None). Costs one pass over every inbox and held table.
    """
    wanted = set(roots)
    # (root, component, task, state) -> [tuples, held_secs, queue_position]
    found: dict[tuple[int, str, int, str], list[Any]] = {}
    for ex in bolts:
        for position, item in enumerate(ex.inbox):
            # A BatchBolt's inbox holds Batches too: each counts its rows per tree.
            rows = (
                item._rows_per_tree() if type(item) is Batch else dict.fromkeys(_trees_of(item), 1)
            )
            for root, n in rows.items():
                if root in wanted:
                    key = (root, ex.component_id, ex.task_id, QUEUED)
                    entry = found.setdefault(key, [0, None, position])
                    entry[0] += n
        held = ex.held
        if held is None:
            continue
        for since, tup in held.unsettled():
            for root in _trees_of(tup):
                if root in wanted:
                    key = (root, ex.component_id, ex.task_id, EXECUTING)
                    entry = found.setdefault(key, [0, 0.0, None])
                    entry[0] += 1
                    entry[1] = max(entry[1], now - since)
    out: dict[int, list[Holder]] = {}
    for (root, component, task, state), (count, held_secs, position) in found.items():
        holders = out.setdefault(root, [])
        if len(holders) < HOLDERS_LIMIT:
            holders.append(Holder(component, task, state, count, held_secs, position))
    return out


class TimedOutLog:
    """The newest ``limit`` timed-out trees of one worker, oldest first."""

    __slots__ = ("_bolts", "_now", "_records", "count")

    def __init__(
        self, now: Callable[[], float], bolts: Iterable[Any], limit: int = RECENT_LIMIT
    ) -> None:
        self._now = now
        self._bolts = list(bolts)
        self._records: deque[TimedOutTree] = deque(maxlen=limit)
        self.count = 0  # ever recorded (the deque keeps only the newest)

    def record(self, spout: Any, expired: list[tuple[int, Any, float]]) -> None:
        """``spout`` (an executor) timed out ``expired``: ``(root, msg_id, emitted_at)``
        each. Only the newest ``limit`` are searched for."""
        if not expired:
            return
        self.count += len(expired)
        expired = expired[-(self._records.maxlen or len(expired)) :]
        now = self._now()
        holders = find_holders(self._bolts, (root for root, _, _ in expired), now)
        for root, msg_id, emitted_at in expired:
            self._records.append(
                TimedOutTree(
                    spout.component_id,
                    spout.task_id,
                    msg_id,
                    root,
                    now,
                    now - emitted_at,
                    tuple(holders.get(root, ())),
                )
            )

    def records(self) -> list[TimedOutTree]:
        """The newest timed-out trees, newest last (safe from any thread)."""
        return list(self._records.copy())

    def since(self, count: int) -> list[dict[str, Any]]:
        """Records added after the first ``count`` (as many as are kept), as dicts: what
        a worker's report carries to the driver."""
        new = self.count - count
        records = self.records()
        return [r.to_dict() for r in records[-new:]] if new > 0 else []
