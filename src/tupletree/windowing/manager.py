"""WindowManager: the events a windowed bolt holds, and which windows fire and expire.

Storm's WindowManager (storm-client windowing/WindowManager.java) as a pure object: it
holds a queue of events (an item, its timestamp in ms, a sequence number), and is
driven by plain values: ``add(item, ts)``, ``on_watermark(ts)`` (event time),
``advance(now)`` (processing-time triggers). Each returns the outcomes it caused, in
order, as an iterable that computes them one at a time:

- ``Expired(items)``: these left the window for good (the bolt acks them);
- ``Fired(items, new, expired, start_ts, end_ts, seqs)``: a window to evaluate, Storm's
  ``onActivation``: ``items`` in the window, ``new`` since the previous window,
  ``expired`` since the previous window.

The caller must run an outcome iterable to its end before calling the manager again;
between two outcomes it may call ``remove(seqs)`` (a failed window's events leave the
queue, so later windows never hold them).

Rules, as Storm's:

- A window with no events is not fired (its expiries are still reported).
- Expired events are found by scanning the queue at each evaluation, and every
  ``EXPIRE_EVENTS_THRESHOLD`` added events in between (compaction: only a prefix of
  the queue, stopping at the first event that does not expire). Watermark policies
  expire nothing before their first window.
- An evaluation scans the whole queue (out-of-order events), unless the eviction
  policy says STOP.

Bounds and costs: an evaluation is O(events held); ``add`` is O(1) apart from the
evaluations and compactions it triggers. What the queue holds is bounded by the caller
(the bolt refuses input at its cap, see executor.py); the expired events kept to report
in the next window's ``expired`` are at most ``expired_cap`` (the newest; older ones
were already acked, only their mention is dropped).

State (for persistent windows): ``state(encode)`` returns plain values (the queue as
``[seq, ts, encode(item)]`` lists, the previous window's sequence numbers, the pending
expired items, the compaction counter and each policy's state); ``restore(state,
decode)`` on a manager built with the same window puts it back. Nothing else is kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, NamedTuple

from tupletree.windowing.lengths import Count, Duration
from tupletree.windowing.policies import (
    EXPIRE,
    PROCESS,
    STOP,
    CountEviction,
    CountTrigger,
    TimeEviction,
    TimeTrigger,
    WatermarkCountEviction,
    WatermarkCountTrigger,
    WatermarkTimeEviction,
    WatermarkTimeTrigger,
)

# Storm's: compaction scans the queue every this many added events.
EXPIRE_EVENTS_THRESHOLD = 100
# What "nothing happened" returns: empty, and shared (no allocation per event).
NOTHING: tuple[()] = ()


class Event:
    """One event in the queue: the item, its timestamp (ms) and its sequence number
    (the order of arrival, unique per manager)."""

    __slots__ = ("item", "seq", "ts")

    def __init__(self, item: Any, ts: int, seq: int) -> None:
        self.item = item
        self.ts = ts
        self.seq = seq

    def __repr__(self) -> str:
        return f"Event({self.item!r}, ts={self.ts}, seq={self.seq})"


class Expired(NamedTuple):
    """Items that left the window (acked by a windowed bolt)."""

    items: list[Any]


class Fired(NamedTuple):
    """A window to evaluate. ``start_ts`` is ``end_ts - length`` for a duration window
    (None for a count window); ``end_ts`` is the window's reference time (ms); ``seqs``
    are its events' sequence numbers (for ``remove``)."""

    items: list[Any]
    new: list[Any]
    expired: list[Any]
    start_ts: int | None
    end_ts: int | None
    seqs: list[int]
    key: Any = None


Outcome = Expired | Fired


class WindowManager:
    """The queue and the two policies of one window (see the module docstring)."""

    def __init__(
        self,
        eviction: Any,
        trigger: Any,
        length_ms: int | None = None,
        expired_cap: int = 1_000_000,
    ) -> None:
        self.eviction = eviction
        self.trigger = trigger
        self.length_ms = length_ms  # for a window's start timestamp (duration windows)
        self.queue: deque[Event] = deque()
        self._seq = 0
        self._since_expiry = 0
        # Expired since the last window, for its ``expired`` (bounded: the newest).
        self._expired: deque[Any] = deque(maxlen=expired_cap)
        self._prev: set[int] = set()  # sequence numbers of the previous window's events

    def __len__(self) -> int:
        """Events held in the queue."""
        return len(self.queue)

    # -- driving ----------------------------------------------------------------------

    def add(self, item: Any, ts: int) -> Iterable[Outcome]:
        """Add an event; the outcomes it causes (usually none)."""
        self.queue.append(Event(item, ts, self._seq))
        self._seq += 1
        self.eviction.track(ts)
        fired = self.trigger.on_event(self, ts)
        if fired is not None:
            # Its evaluation scans the queue, which restarts the compaction count (as
            # Storm's, the event then counts as the first since that scan).
            return fired
        self._since_expiry += 1
        if self._since_expiry >= EXPIRE_EVENTS_THRESHOLD:
            expired = self._scan(full=False)[1]
            if expired:
                return (Expired(expired),)
        return NOTHING

    def on_watermark(self, watermark: int) -> Iterable[Outcome]:
        """A new watermark (event time): the windows it completes."""
        handler = getattr(self.trigger, "on_watermark", None)
        if handler is None:
            return NOTHING
        return handler(self, watermark)

    def advance(self, now: int) -> Iterable[Outcome]:
        """The clock reached ``now`` (processing time): the windows due by then."""
        advance = getattr(self.trigger, "advance", None)
        if advance is None or self.trigger.next_due > now:
            return NOTHING
        return advance(self, now)

    def next_due(self) -> int | None:
        """When ``advance`` next has something to do (None: never by itself)."""
        due = getattr(self.trigger, "next_due", None)
        return due

    def remove(self, seqs: Iterable[int]) -> int:
        """Take these events out of the queue (a failed window's): later windows will
        not hold them and they are never reported expired. Returns how many left."""
        gone = set(seqs)
        if not gone:
            return 0
        kept = deque(e for e in self.queue if e.seq not in gone)
        n = len(self.queue) - len(kept)
        self.queue = kept
        self._prev -= gone
        self.eviction.removed(n)
        return n

    # -- the evaluation (Storm's onTrigger) ---------------------------------------------

    def evaluate(self, on_add: bool = False) -> Iterator[Outcome]:
        """Scan with the context the trigger just set; yield the expiries, then the
        window if it holds anything. Returns (as a generator's value) whether it did.
        ``on_add``: an added event triggered it, and counts toward the next compaction."""
        window, just_expired = self._scan(full=True)
        if on_add:
            self._since_expiry = 1
        if just_expired:
            yield Expired(just_expired)
        expired = list(self._expired)
        self._expired.clear()
        prev = self._prev
        items = [e.item for e in window]
        new = [e.item for e in window if e.seq not in prev]
        seqs = [e.seq for e in window]
        self._prev = set(seqs)
        self.trigger.reset()
        if not items:
            return False
        end = self.eviction.context.reference_time
        start = None if self.length_ms is None or end is None else end - self.length_ms
        yield Fired(items, new, expired, start, end, seqs)
        return True

    def _scan(self, full: bool) -> tuple[list[Event], list[Any]]:
        """Ask the eviction policy about the queue in order: expired events leave it;
        with ``full``, the events to process are returned too (else the scan stops at
        the first event that does not expire: compaction)."""
        evict = self.eviction.evict
        queue = self.queue
        gone: list[Event] = []
        window: list[Event] = []
        if type(self.eviction) is CountEviction:
            # Its answers do not depend on timestamps: the oldest (held - threshold)
            # expire, the rest are in the window. The same, without a call per event.
            eviction = self.eviction
            n = min(len(queue), eviction.current - eviction.threshold)
            if n > 0:
                eviction.current -= n
                gone = [queue.popleft() for _ in range(n)]
            if full:
                window = list(queue)
        elif not full:
            while queue and evict(queue[0].ts) == EXPIRE:
                gone.append(queue.popleft())
        else:
            kept = 0  # events scanned and not expired
            scanned = 0
            holes = False  # an expired event came after a kept one (out of order)
            for ev in queue:
                action = evict(ev.ts)
                if action == STOP:
                    break
                scanned += 1
                if action == EXPIRE:
                    gone.append(ev)
                    holes = holes or kept > 0
                    continue
                kept += 1
                if action == PROCESS:
                    window.append(ev)
            if not holes:
                # The usual case: the expired events are a prefix of the queue.
                for _ in range(len(gone)):
                    queue.popleft()
            else:
                ids = {id(ev) for ev in gone}
                rest = deque(ev for ev in islice(queue, scanned) if id(ev) not in ids)
                rest.extend(islice(queue, scanned, None))
                self.queue = rest
        self._since_expiry = 0
        expired = [ev.item for ev in gone]
        if expired:
            self._expired.extend(expired)
        return window, expired

    # -- queries the triggers make ------------------------------------------------------

    def earliest_ts(self, after: int | None, upto: int) -> int | None:
        """The smallest event timestamp in ``(after, upto]`` (None: no such event)."""
        best = None
        for e in self.queue:
            ts = e.ts
            if (after is None or ts > after) and ts <= upto and (best is None or ts < best):
                best = ts
        return best

    def event_count(self, reference: int) -> int:
        """Events with a timestamp at or before ``reference``."""
        return sum(1 for e in self.queue if e.ts <= reference)

    def sliding_count_timestamps(self, start: int | None, end: int, count: int) -> list[int]:
        """Taking the events in ``(start, end]`` in queue order, the newest timestamp
        seen at every ``count``-th of them (Storm's getSlidingCountTimestamps)."""
        out: list[int] = []
        if start is not None and end <= start:
            return out
        n = 0
        newest: int | None = None
        for e in self.queue:
            ts = e.ts
            if (start is None or ts > start) and ts <= end:
                if newest is None or ts > newest:
                    newest = ts
                n += 1
                if n % count == 0:
                    out.append(newest)
        return out

    # -- state ----------------------------------------------------------------------------

    def state(self, encode: Callable[[Any], Any] = lambda item: item) -> dict[str, Any]:
        """Everything this manager holds, as plain values (see the module docstring)."""
        return {
            "seq": self._seq,
            "since_expiry": self._since_expiry,
            "queue": [[e.seq, e.ts, encode(e.item)] for e in self.queue],
            "prev": sorted(self._prev),
            "expired": [encode(item) for item in self._expired],
            "eviction": self.eviction.state(),
            "trigger": self.trigger.state(),
        }

    def restore(
        self, state: dict[str, Any], decode: Callable[[Any], Any] = lambda item: item
    ) -> None:
        """Put back what ``state`` returned (on a manager made for the same window)."""
        self._seq = state["seq"]
        self._since_expiry = state["since_expiry"]
        self.queue = deque(Event(decode(item), ts, seq) for seq, ts, item in state["queue"])
        self._prev = set(state["prev"])
        self._expired.clear()
        self._expired.extend(decode(item) for item in state["expired"])
        self.eviction.restore(state["eviction"])
        self.trigger.restore(state["trigger"])


def make_manager(
    length: Count | Duration,
    slide: Count | Duration,
    *,
    event_time: bool,
    lag_ms: int = 0,
    start_ms: int = 0,
    expired_cap: int = 1_000_000,
) -> WindowManager:
    """The manager for a window, with the policies Storm's WindowedBoltExecutor picks
    (policies.py has the table). ``start_ms``: when a processing-time duration slide
    starts counting (the bolt's prepare time): its windows end at ``start + k * slide``.
    """
    eviction: Any
    trigger: Any
    if isinstance(length, Count):
        eviction = (
            WatermarkCountEviction(length.value) if event_time else CountEviction(length.value)
        )
    elif event_time:
        eviction = WatermarkTimeEviction(length.value, lag_ms)
    else:
        eviction = TimeEviction(length.value)
    if isinstance(slide, Count):
        trigger = WatermarkCountTrigger(slide.value) if event_time else CountTrigger(slide.value)
    elif event_time:
        trigger = WatermarkTimeTrigger(slide.value)
    else:
        trigger = TimeTrigger(slide.value, start_ms)
    length_ms = length.value if isinstance(length, Duration) else None
    return WindowManager(eviction, trigger, length_ms, expired_cap)
