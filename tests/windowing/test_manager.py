"""The window manager driven with plain values, as Storm's WindowManagerTest and
WaterMarkEventGeneratorTest drive theirs: Storm's own vectors, then tupletree's own
rules (processing-time triggers, removal after a failed window, state)."""

from __future__ import annotations

from typing import Any

from tupletree.windowing import Count, Duration
from tupletree.windowing.manager import (
    EXPIRE_EVENTS_THRESHOLD,
    Expired,
    Fired,
    WindowManager,
    make_manager,
)
from tupletree.windowing.policies import (
    CountEviction,
    CountTrigger,
    EvictionContext,
    TimeEviction,
    TimeTrigger,
    WatermarkCountEviction,
    WatermarkCountTrigger,
    WatermarkTimeEviction,
    WatermarkTimeTrigger,
)
from tupletree.windowing.watermarks import WatermarkGenerator

NO_LAG = 2**31 - 1  # Storm's one-argument WatermarkTimeEvictionPolicy: lag Integer.MAX_VALUE


def seq(start: int, stop: int | None = None) -> list[int]:
    return list(range(start, (start if stop is None else stop) + 1))


class Listener:
    """Storm's test Listener: the last and every expiry and activation since clear()."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.expiries: list[list[Any]] = []
        self.windows: list[Fired] = []

    def take(self, outcomes: Any) -> None:
        for o in outcomes:
            if isinstance(o, Expired):
                self.expiries.append(o.items)
            else:
                self.windows.append(o)

    @property
    def expired(self) -> list[Any]:
        return self.expiries[-1] if self.expiries else []

    @property
    def events(self) -> list[Any]:
        return self.windows[-1].items if self.windows else []

    @property
    def new(self) -> list[Any]:
        return self.windows[-1].new if self.windows else []

    @property
    def window_expired(self) -> list[Any]:
        return self.windows[-1].expired if self.windows else []

    def all_events(self) -> list[list[Any]]:
        return [w.items for w in self.windows]


def managed(eviction: Any, trigger: Any) -> tuple[WindowManager, Listener]:
    return WindowManager(eviction, trigger), Listener()


def test_count_based_window():
    """Storm testCountBasedWindow: count 5 sliding 2."""
    m, lis = managed(CountEviction(5), CountTrigger(2))
    for i in (1, 2):
        lis.take(m.add(i, 0))
    assert lis.expiries == []
    assert (lis.events, lis.new, lis.window_expired) == (seq(1, 2), seq(1, 2), [])
    for i in (3, 4):
        lis.take(m.add(i, 0))
    assert lis.expiries == []
    assert (lis.events, lis.new, lis.window_expired) == (seq(1, 4), seq(3, 4), [])
    for i in (5, 6):
        lis.take(m.add(i, 0))
    assert lis.expired == [1]
    assert (lis.events, lis.new, lis.window_expired) == (seq(2, 6), seq(5, 6), [1])
    lis.clear()
    lis.take(m.add(7, 0))
    assert lis.expiries == []  # nothing expires until a trigger or the threshold
    lis.take(m.add(8, 0))
    assert lis.expired == [2, 3]
    assert (lis.events, lis.new, lis.window_expired) == (seq(4, 8), seq(7, 8), [2, 3])


def test_expire_threshold():
    """Storm testExpireThreshold: count 5 with a one-hour time trigger; compaction every
    EXPIRE_EVENTS_THRESHOLD events expires all but the last 5."""
    m, lis = managed(CountEviction(5), TimeTrigger(3_600_000, 0))
    for i in seq(1, 5):
        lis.take(m.add(i, 0))
    assert lis.expiries == []
    for i in seq(6, EXPIRE_EVENTS_THRESHOLD):
        lis.take(m.add(i, 0))
    assert lis.expired == seq(1, EXPIRE_EVENTS_THRESHOLD - 5)


def _evict_nothing_before_the_first_watermark(eviction: Any, length: int) -> None:
    m, lis = managed(eviction, WatermarkCountTrigger(length))
    threshold = EXPIRE_EVENTS_THRESHOLD
    for i in seq(1, threshold):
        lis.take(m.add(i, i))
    assert lis.expiries == [], "watermark policies evict nothing before the first watermark"
    lis.take(m.on_watermark(threshold))
    assert lis.events == seq(1, threshold)
    for i in seq(threshold + 1, threshold * 2):
        lis.take(m.add(i, i))
    lis.take(m.on_watermark(threshold + length + 1))
    assert lis.expired == seq(1, threshold)


def test_expire_threshold_with_watermark_count_eviction():
    """Storm testExpireThresholdWithWatermarkCountEvictionPolicy."""
    n = EXPIRE_EVENTS_THRESHOLD
    _evict_nothing_before_the_first_watermark(WatermarkCountEviction(n), n)


def test_expire_threshold_with_watermark_time_eviction():
    """Storm testExpireThresholdWithWatermarkTimeEvictionPolicy."""
    n = EXPIRE_EVENTS_THRESHOLD
    _evict_nothing_before_the_first_watermark(WatermarkTimeEviction(n, NO_LAG), n)


def test_time_based_window():
    """Storm testTimeBasedWindow: 1 s windows evaluated by hand at set reference times;
    compaction expires old events, and an evaluation reports every expiry since the last
    window (those of compaction too)."""
    eviction = TimeEviction(1000)
    m, lis = managed(eviction, TimeTrigger(86_400_000, 0))
    now = 1_000_000
    for i in seq(1, 50):
        lis.take(m.add(i, now - 1000))
    for i in seq(51, EXPIRE_EVENTS_THRESHOLD):
        lis.take(m.add(i, now))
    assert len(lis.expired) == 50
    lis.clear()
    for i in seq(EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100):
        lis.take(m.add(i, now - 1000))
    eviction.set_context(EvictionContext(now + 100))
    lis.take(m.evaluate())
    assert lis.expired == seq(EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100)
    in_window = seq(51, EXPIRE_EVENTS_THRESHOLD)
    assert lis.events == in_window and lis.new == in_window
    assert lis.window_expired == seq(1, 50) + seq(
        EXPIRE_EVENTS_THRESHOLD + 1, EXPIRE_EVENTS_THRESHOLD + 100
    )
    lis.clear()
    new = seq(EXPIRE_EVENTS_THRESHOLD + 101, EXPIRE_EVENTS_THRESHOLD + 200)
    for i in new:
        lis.take(m.add(i, now))
    eviction.set_context(EvictionContext(now + 200))
    lis.take(m.evaluate())
    assert lis.expiries == []
    assert lis.events == in_window + new and lis.new == new


def test_time_based_window_expiry():
    """Storm testTimeBasedWindowExpiry: 100 ms windows; all in, then all out, then none."""
    eviction = TimeEviction(100)
    m, lis = managed(eviction, TimeTrigger(86_400_000, 0))
    now = 5000
    for i in seq(1, 10):
        lis.take(m.add(i, now))
    eviction.set_context(EvictionContext(now + 60))
    lis.take(m.evaluate())
    assert lis.events == seq(1, 10) and lis.window_expired == []
    lis.clear()
    eviction.set_context(EvictionContext(now + 120))
    lis.take(m.evaluate())
    assert lis.expired == seq(1, 10) and lis.windows == []
    lis.clear()
    eviction.set_context(EvictionContext(now + 180))
    lis.take(m.evaluate())
    assert lis.windows == [] and lis.expiries == []


def test_tumbling_window():
    """Storm testTumblingWindow: count 3 / count 3."""
    m, lis = managed(CountEviction(3), CountTrigger(3))
    for i in (1, 2, 3):
        lis.take(m.add(i, 0))
    assert lis.expiries == []
    assert (lis.events, lis.new, lis.window_expired) == (seq(1, 3), seq(1, 3), [])
    lis.clear()
    for i in (4, 5, 6):
        lis.take(m.add(i, 0))
    assert lis.expired == seq(1, 3)
    assert (lis.events, lis.new, lis.window_expired) == (seq(4, 6), seq(4, 6), seq(1, 3))


def test_event_time_based_window():
    """Storm testEventTimeBasedWindow: length 20 slide 10 ms; gaps skipped."""
    m, lis = managed(WatermarkTimeEviction(20, NO_LAG), WatermarkTimeTrigger(10))
    for i, ts in ((1, 603), (2, 605), (3, 607)):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(609))
    assert lis.windows == []
    for i, ts in ((4, 618), (5, 626), (6, 636)):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(631))
    assert lis.all_events() == [seq(1, 3), seq(1, 4), seq(4, 5)]
    assert [w.expired for w in lis.windows] == [[], [], seq(1, 3)]
    assert [w.new for w in lis.windows] == [seq(1, 3), [4], [5]]
    assert [w.end_ts for w in lis.windows] == [610, 620, 630]
    assert lis.expiries[0] == seq(1, 3)
    for i, ts in ((7, 825), (8, 826), (9, 827), (10, 839)):
        lis.take(m.add(i, ts))
    lis.clear()
    lis.take(m.on_watermark(834))
    assert lis.all_events() == [seq(5, 6), [6], seq(7, 9)]
    assert [w.expired for w in lis.windows] == [[4], [5], []]
    assert [w.new for w in lis.windows] == [[6], [], seq(7, 9)]
    assert [w.end_ts for w in lis.windows] == [640, 650, 830]
    assert lis.expiries == [[4], [5], [6]]


def test_count_based_window_with_event_ts():
    """Storm testCountBasedWindowWithEventTs: watermark count 3, time slide 10."""
    m, lis = managed(WatermarkCountEviction(3), WatermarkTimeTrigger(10))
    for i, ts in enumerate((603, 605, 607, 618, 626, 636), start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(631))
    assert lis.all_events() == [seq(1, 3), seq(2, 4), seq(3, 5)]
    for i, ts in ((7, 665), (8, 666), (9, 667), (10, 679)):
        lis.take(m.add(i, ts))
    lis.clear()
    lis.take(m.on_watermark(674))
    assert lis.all_events() == [seq(4, 6)] * 3 + [seq(7, 9)]


def test_count_based_trigger_with_event_ts():
    """Storm testCountBasedTriggerWithEventTs: watermark time 20, count trigger 3."""
    m, lis = managed(WatermarkTimeEviction(20, NO_LAG), WatermarkCountTrigger(3))
    for i, ts in enumerate((603, 605, 607, 618, 625, 626, 629, 636), start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(631))
    assert lis.all_events() == [seq(1, 3), seq(3, 6)]
    for i, ts in ((9, 665), (10, 666), (11, 667), (12, 669), (12, 679)):
        lis.take(m.add(i, ts))
    lis.clear()
    lis.take(m.on_watermark(674))
    assert lis.all_events() == [[9], seq(9, 12)]


SAME_TS = (10, 10, 11, 12, 12, 12, 12, 13, 14, 15)


def test_count_based_tumbling_with_same_event_ts():
    """Storm testCountBasedTumblingWithSameEventTs."""
    m, lis = managed(WatermarkCountEviction(2), WatermarkCountTrigger(2))
    for i, ts in enumerate(SAME_TS, start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(20))
    assert lis.all_events() == [seq(1, 2), seq(3, 4), seq(5, 6), seq(7, 8), seq(9, 10)]


def test_count_based_sliding_with_same_event_ts():
    """Storm testCountBasedSlidingWithSameEventTs."""
    m, lis = managed(WatermarkCountEviction(5), WatermarkCountTrigger(2))
    for i, ts in enumerate(SAME_TS, start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(20))
    assert lis.all_events() == [seq(1, 2), seq(1, 4), seq(2, 6), seq(4, 8), seq(6, 10)]


def test_event_time_lag():
    """Storm testEventTimeLag: out-of-order events within the lag are processed."""
    m, lis = managed(WatermarkTimeEviction(20, 5), WatermarkTimeTrigger(10))
    for i, ts in enumerate((603, 605, 607, 618, 626, 632, 629, 636), start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(631))
    assert lis.all_events() == [seq(1, 3), seq(1, 4), [4, 5, 7]]


def test_scan_stop():
    """Storm testScanStop: events beyond the window end plus the lag are never looked at."""
    scanned: set[int] = set()

    class Spy(WatermarkTimeEviction):
        def evict(self, ts: int) -> int:
            scanned.add(ts)
            return super().evict(ts)

    m, lis = managed(Spy(20, 5), WatermarkTimeTrigger(10))
    stamps = (603, 605, 607, 618, 626, 629, 636, 637, 638, 639)
    for i, ts in enumerate(stamps, start=1):
        lis.take(m.add(i, ts))
    lis.take(m.on_watermark(631))
    assert lis.all_events() == [seq(1, 3), seq(1, 4), [4, 5, 6]]
    assert scanned == set(stamps[:7])


# -- the watermark generator (Storm's WaterMarkEventGeneratorTest) ---------------------

S1, S2 = ("s1", "default"), ("s2", "default")


def test_watermark_single_stream():
    g = WatermarkGenerator([S1], 5)
    g.track(S1, 100)
    g.track(S1, 110)
    assert g.compute() == 105


def test_watermark_single_stream_out_of_order():
    g = WatermarkGenerator([S1], 5)
    for ts in (100, 110, 104):
        g.track(S1, ts)
    assert g.compute() == 105


def test_watermark_is_the_slowest_stream_less_the_lag():
    g = WatermarkGenerator([S1, S2], 5)
    g.track(S1, 100)
    g.track(S1, 110)
    assert g.compute() is None and g.missing() == [S2]
    g.track(S2, 95)
    g.track(S2, 98)
    assert g.compute() == 93


def test_no_watermark_without_events():
    assert WatermarkGenerator([S1], 5).compute() is None


def test_late_event():
    g = WatermarkGenerator([S1], 5)
    assert g.track(S1, 100) and g.track(S1, 110)
    assert g.compute() == 105
    assert g.track(S1, 105) and g.track(S1, 106) and g.track(S1, 115)
    assert not g.track(S1, 104)
    assert g.compute() == 110
    assert g.compute() is None  # only an advance is a new watermark


def test_a_window_ending_at_the_watermark_waits_for_its_last_tuples():
    """A watermark says no event before it will come; one stamped at it may. Windows
    ending at the watermark are evaluated once it passes them, with such an event in
    (beyond Storm, which evaluates them at the watermark: the event then joins none)."""
    m, lis = managed(WatermarkTimeEviction(10, NO_LAG), WatermarkTimeTrigger(10))
    lis.take(m.add("a", 5))
    lis.take(m.add("b", 10))
    lis.take(m.on_watermark(10))
    assert lis.events == []
    lis.take(m.add("c", 10))  # stamped at the watermark: not late
    lis.take(m.on_watermark(11))
    assert lis.events == ["a", "b", "c"]


# -- processing-time triggers (tupletree's exact due times) -----------------------------


def test_time_trigger_windows_end_at_start_plus_multiples_of_the_slide():
    """Duration 20 sliding 10, started at 5: windows are due at 15, 25, 35...; the one
    due at d holds the events of [d - 20, d) (Storm's reference time, d - 1, is its end
    timestamp): one arriving at 15 is in the next."""
    m = make_manager(Duration(20), Duration(10), event_time=False, start_ms=5)
    lis = Listener()
    assert m.next_due() == 15
    for i, ts in ((1, 6), (2, 15), (3, 16)):
        lis.take(m.advance(ts))
        lis.take(m.add(i, ts))
    lis.take(m.advance(25))
    assert [(w.items, w.start_ts, w.end_ts) for w in lis.windows] == [
        ([1], -6, 14),
        ([1, 2, 3], 4, 24),
    ]
    lis.clear()
    lis.take(m.advance(35))
    assert lis.expiries == [[1]]  # 6 is not in [15, 35); 15 is
    assert [(w.items, w.new, w.expired) for w in lis.windows] == [([2, 3], [], [1])]


def test_time_trigger_catches_up_and_skips_empty_stretches():
    """After a stall, every non-empty window due is evaluated in order; the empty
    stretch between events costs no evaluation and the next due is after now."""
    m = make_manager(Duration(10), Duration(10), event_time=False)
    lis = Listener()
    lis.take(m.add("a", 3))
    lis.take(m.add("b", 1_000_004))
    lis.take(m.advance(1_000_020))
    assert [(w.items, w.end_ts) for w in lis.windows] == [(["a"], 9), (["b"], 1_000_009)]
    assert m.next_due() == 1_000_030


def test_count_window_with_a_time_slide_repeats_the_last_count_events():
    """Count 3 sliding every 10 ms (Storm's CountEviction + TimeTrigger): each due time
    evaluates the last 3 events, even when none arrived since."""
    m = make_manager(Count(3), Duration(10), event_time=False)
    lis = Listener()
    for i in range(1, 6):
        lis.take(m.add(i, i))
    lis.take(m.advance(20))
    assert lis.all_events() == [[3, 4, 5], [3, 4, 5]]
    assert lis.expiries == [[1, 2]]
    assert [w.new for w in lis.windows] == [[3, 4, 5], []]


def test_removed_events_leave_every_later_window():
    """A failed window's events, removed between outcomes, are in no later window and
    are never reported expired; the count policy counts them out."""
    m = make_manager(Count(4), Count(2), event_time=False)
    lis = Listener()
    for i in (1, 2):
        lis.take(m.add(i, 0))
    out = list(m.add(3, 0)) + list(m.add(4, 0))
    (window,) = out
    assert window.items == [1, 2, 3, 4]
    assert m.remove(window.seqs) == 4 and len(m) == 0
    for i in (5, 6, 7, 8):
        lis.take(m.add(i, 0))
    assert lis.all_events() == [[1, 2], [5, 6], [5, 6, 7, 8]]
    assert lis.expiries == []


def test_a_removal_between_windows_of_one_watermark_shapes_the_next_ones():
    """Outcomes are computed one at a time: removing the first window's events before
    taking the next keeps them out of it."""
    m = make_manager(Duration(20), Duration(10), event_time=True)
    for i, ts in ((1, 603), (2, 605), (3, 618)):
        list(m.add(i, ts))
    outcomes = iter(m.on_watermark(631))
    first = next(outcomes)
    assert first.items == [1, 2]
    m.remove(first.seqs)
    assert [o.items for o in outcomes if isinstance(o, Fired)] == [[3], [3]]
