"""Eviction and trigger policies: Storm's eight, as plain objects driven by plain values.

An eviction policy answers, for one event timestamp, what a scan of the window's queue
does with it (``EXPIRE``: drop it, it left the window; ``PROCESS``: it is in the window
being evaluated; ``KEEP``: not in this window, maybe in a later one; ``STOP``: nothing
further in the queue can be in this window, end the scan). A trigger policy decides
when a window is evaluated and with which reference time (the window's end), and sets
that on the eviction policy before it asks the manager to evaluate
(``manager.evaluate()``).

Which pair a windowed bolt uses (as Storm's WindowedBoltExecutor chooses):

=====================  ==========================  ===========================
window                 processing time             event time (a timestamp)
=====================  ==========================  ===========================
length ``Count``       CountEviction               WatermarkCountEviction
length ``Duration``    TimeEviction                WatermarkTimeEviction
slide ``Count``        CountTrigger                WatermarkCountTrigger
slide ``Duration``     TimeTrigger                 WatermarkTimeTrigger
=====================  ==========================  ===========================

Timestamps are integer milliseconds: an event's (its own for event time, its arrival
on the cluster's clock for processing time), a watermark's, ``now``'s. Nothing here
reads a clock, sleeps or does I/O; every method that may evaluate windows is a
generator of outcomes (``manager.Expired``/``manager.Fired``), so a caller takes one
window at a time and may change the manager between two (a failed window's tuples
leave the queue before the next window is computed).

Where these differ from Storm's classes, on purpose:

- ``TimeTrigger`` evaluates each window at its exact due time (``start + k * slide``,
  with Storm's reference time "now - 1 ms" taken from the due time, not from a timer
  thread's late wake-up), and catches up missed ones one by one (skipping stretches
  with no events, as WatermarkTimeTrigger does). So Storm's TimeEvictionPolicy drift
  correction (``delta``, and "the first window keeps every event") has nothing to
  correct and is left out: every window is exactly ``(end - length, end]``.
- Watermark triggers and the watermark count trigger start from "no window yet"
  instead of Storm's end timestamp 0, so events at or before 0 ms are not skipped.

State: each policy's ``state()`` is a small dict of plain values and ``restore(state)``
puts it back (what a persistent window checkpoints; see manager.WindowManager.state).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from tupletree.windowing.manager import Outcome, WindowManager

EXPIRE = 0
PROCESS = 1
KEEP = 2
STOP = 3


class EvictionContext(NamedTuple):
    """What a trigger tells the eviction policy before an evaluation (Storm's
    DefaultEvictionContext): the reference time (the window's end, ms), and for the
    watermark count policy how many events the window may count."""

    reference_time: int
    current_count: int | None = None
    sliding_count: int | None = None
    sliding_interval: int | None = None


def _context(state: Any) -> EvictionContext | None:
    return None if state is None else EvictionContext(*state)


# -- eviction -----------------------------------------------------------------------


class CountEviction:
    """Keep the last ``threshold`` events: while more are held, the oldest expire."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.current = 0  # events held, as this policy counts them
        self.context: EvictionContext | None = None

    def track(self, ts: int) -> None:
        self.current += 1

    def evict(self, ts: int) -> int:
        if self.current > self.threshold:
            self.current -= 1
            return EXPIRE
        return PROCESS

    def set_context(self, context: EvictionContext) -> None:
        self.context = context

    def removed(self, n: int) -> None:
        """``n`` events left the queue other than by expiring (a failed window's)."""
        self.current -= n

    def state(self) -> dict[str, Any]:
        return {"current": self.current, "context": self.context}

    def restore(self, state: dict[str, Any]) -> None:
        self.current = state["current"]
        self.context = _context(state["context"])


class TimeEviction:
    """Events older than ``length`` ms before the reference time expire; events after it
    are kept for later windows. Before any trigger the reference is the newest event's
    time (the arrival of the latest tuple: "now" for processing time)."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.context: EvictionContext | None = None
        self.latest: int | None = None

    def track(self, ts: int) -> None:
        if self.latest is None or ts > self.latest:
            self.latest = ts

    def evict(self, ts: int) -> int:
        context = self.context
        ref = context.reference_time if context is not None else self.latest
        assert ref is not None  # an event was tracked before any scan
        diff = ref - ts
        if diff >= self.length:
            return EXPIRE
        if diff < 0:
            return KEEP
        return PROCESS

    def set_context(self, context: EvictionContext) -> None:
        self.context = context

    def removed(self, n: int) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"context": self.context, "latest": self.latest}

    def restore(self, state: dict[str, Any]) -> None:
        self.context = _context(state["context"])
        self.latest = state["latest"]


class WatermarkTimeEviction(TimeEviction):
    """TimeEviction against the watermark trigger's window end. Nothing expires before
    the first window (no context yet: STOP); events up to ``lag`` ms after the window's
    end are kept; the scan stops at one further ahead (Storm's testScanStop: events
    beyond end + lag are not even looked at)."""

    def __init__(self, length: int, lag: int) -> None:
        super().__init__(length)
        self.lag = lag

    def evict(self, ts: int) -> int:
        context = self.context
        if context is None:
            return STOP
        diff = context.reference_time - ts
        if diff < -self.lag:
            return STOP
        if diff < 0:
            return KEEP
        if diff >= self.length:
            return EXPIRE
        return PROCESS


class WatermarkCountEviction:
    """The last ``threshold`` events at or before the window's end (Storm's
    WatermarkCountEvictionPolicy, step for step): the trigger says how many events the
    window may count (``current_count``, or the ones processed last time plus the
    sliding count); events after the end are kept; nothing expires before the first
    window."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.current = 0
        self.processed = 0
        self.context: EvictionContext | None = None

    def track(self, ts: int) -> None:
        pass

    def evict(self, ts: int) -> int:
        context = self.context
        if context is None:
            return STOP
        if ts <= context.reference_time and self.processed < self.current:
            if self.current > self.threshold:
                self.current -= 1
                return EXPIRE
            self.processed += 1
            return PROCESS
        return KEEP

    def set_context(self, context: EvictionContext) -> None:
        self.context = context
        if context.current_count is not None:
            self.current = context.current_count
        else:
            assert context.sliding_count is not None
            self.current = self.processed + context.sliding_count
        self.processed = 0

    def removed(self, n: int) -> None:
        """``n`` events of the window just evaluated left the queue (a failed window's):
        they no longer count among the ones processed, which the next context adds to."""
        self.processed = max(0, self.processed - n)

    def state(self) -> dict[str, Any]:
        return {"current": self.current, "processed": self.processed, "context": self.context}

    def restore(self, state: dict[str, Any]) -> None:
        self.current = state["current"]
        self.processed = state["processed"]
        self.context = _context(state["context"])


# -- triggers -----------------------------------------------------------------------


class CountTrigger:
    """Evaluate after every ``count`` events, with the last one's arrival as the
    reference time."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.current = 0

    def on_event(self, manager: WindowManager, ts: int) -> Iterator[Outcome] | None:
        """None, or the evaluation this event triggers (a generator to run)."""
        self.current += 1
        if self.current >= self.count:
            manager.eviction.set_context(EvictionContext(ts))
            return manager.evaluate(on_add=True)
        return None

    def reset(self) -> None:
        self.current = 0

    def state(self) -> dict[str, Any]:
        return {"current": self.current}

    def restore(self, state: dict[str, Any]) -> None:
        self.current = state["current"]


class TimeTrigger:
    """Evaluate when the clock reaches ``start + k * interval`` (k = 1, 2, ...). As
    Storm's, the reference time is one ms before that ("now - 1"): the window at due
    time d holds the events that arrived in ``(d - 1 - length, d - 1]``, i.e. in
    ``[d - length, d)``: one arriving at d is in the next window. ``advance(now)``
    evaluates every due time up to ``now`` in order; after an empty window it jumps to
    the first due time whose window can hold an event (or past ``now``), so a long
    stall costs one evaluation per non-empty window, not one per interval."""

    def __init__(self, interval: int, start: int) -> None:
        self.interval = interval
        self.start = start
        self.next_due = start + interval

    def on_event(self, manager: WindowManager, ts: int) -> Iterator[Outcome] | None:
        return None

    def due(self) -> int:
        return self.next_due

    def due_after(self, ts: int) -> int:
        """The first due time strictly after ``ts`` (whose window holds an event at ts)."""
        return self.start + ((ts - self.start) // self.interval + 1) * self.interval

    def advance(self, manager: WindowManager, now: int) -> Iterator[Outcome]:
        interval = self.interval
        while self.next_due <= now:
            ref = self.next_due - 1
            manager.eviction.set_context(EvictionContext(ref, sliding_interval=interval))
            if (yield from manager.evaluate()):
                self.next_due += interval
                continue
            ts = manager.earliest_ts(ref, now)
            self.next_due = self.due_after(now if ts is None else ts)

    def reset(self) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"next_due": self.next_due}

    def restore(self, state: dict[str, Any]) -> None:
        self.next_due = state["next_due"]


class WatermarkTimeTrigger:
    """On each watermark, evaluate every window end (a multiple of ``slide``) up to it;
    an empty window makes it jump to the end of the next aligned window holding an event
    (gaps are skipped, never evaluated as empty windows)."""

    def __init__(self, slide: int) -> None:
        self.slide = slide
        self.next_end: int | None = None

    def on_event(self, manager: WindowManager, ts: int) -> Iterator[Outcome] | None:
        return None

    def align_up(self, ts: int) -> int:
        return -(-ts // self.slide) * self.slide

    def on_watermark(self, manager: WindowManager, watermark: int) -> Iterator[Outcome]:
        # Complete: what ends before the watermark. A tuple stamped at the watermark is
        # not late (only one before it is) and may still come; a window ending there
        # fired now would leave it in none (Storm fires it, and loses the tuple).
        upto = watermark - 1
        end = self.next_end
        if end is None:
            first = manager.earliest_ts(None, upto)
            if first is None:
                return
            end = self.align_up(first)
        while end <= upto:
            count = manager.event_count(end)
            manager.eviction.set_context(EvictionContext(end, current_count=count))
            if (yield from manager.evaluate()):
                end += self.slide
                continue
            ts = manager.earliest_ts(end, upto)
            if ts is None:
                break
            end = self.align_up(ts)
        self.next_end = end

    def reset(self) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"next_end": self.next_end}

    def restore(self, state: dict[str, Any]) -> None:
        self.next_end = state["next_end"]


class WatermarkCountTrigger:
    """On each watermark, evaluate once per ``count`` events at or before it that came
    after the last evaluated one, each window ending at the newest timestamp among
    them."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.last: int | None = None

    def on_event(self, manager: WindowManager, ts: int) -> Iterator[Outcome] | None:
        return None

    def on_watermark(self, manager: WindowManager, watermark: int) -> Iterator[Outcome]:
        ends = manager.sliding_count_timestamps(self.last, watermark, self.count)
        for ts in ends:
            manager.eviction.set_context(EvictionContext(ts, sliding_count=self.count))
            yield from manager.evaluate()
            self.last = ts

    def reset(self) -> None:
        pass

    def state(self) -> dict[str, Any]:
        return {"last": self.last}

    def restore(self, state: dict[str, Any]) -> None:
        self.last = state["last"]


__all__ = [
    "EXPIRE",
    "KEEP",
    "PROCESS",
    "STOP",
    "CountEviction",
    "CountTrigger",
    "EvictionContext",
    "TimeEviction",
    "TimeTrigger",
    "WatermarkCountEviction",
    "WatermarkCountTrigger",
    "WatermarkTimeEviction",
    "WatermarkTimeTrigger",
]
