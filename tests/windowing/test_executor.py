"""The executor's own rules, with the property tests' context and collector: what
input it ignores or refuses, what the bolt may not do, and its state."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from tupletree.config import Config
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource
from tupletree.windowing import Count, Duration, WindowedBolt
from tupletree.windowing.executor import WindowedBoltExecutor

from .test_properties import SOURCES, Collector, Context


class Keep(WindowedBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.windows: list[list[Any]] = []
        self.action: Any = None

    def execute(self, window: Any) -> None:
        self.windows.append([t.values[0] for t in window.get()])
        if self.action is not None:
            self.action(self.collector, window)


def running(bolt: Keep, conf: dict[str, Any] | None = None, streams: int = 1) -> Any:
    ex = WindowedBoltExecutor(bolt)
    context, out = Context(streams), Collector()
    ex.prepare(conf or {}, context, out)
    return ex, context, out


def tup(n: int, ts: int = 0, stream: int = 0) -> Tuple:
    return Tuple([n, ts], SOURCES[stream])


def test_ticks_are_ignored():
    bolt = Keep().with_tumbling_window(Count(2))
    ex, _, _ = running(bolt)
    tick = Tuple([1], TupleSource("__system", "__tick", -1, Fields(["freq"])))
    ex.execute(tick)
    ex.execute(tup(1))
    assert bolt.windows == [] and len(ex._manager) == 1


def test_the_bolt_may_not_ack_or_fail_window_tuples():
    """Acking a window tuple would leave it in later windows, settled: the collector
    refuses, naming the rule; execute raising fails the window instead."""
    bolt = Keep().with_tumbling_window(Count(2))
    ex, _, out = running(bolt)
    bolt.action = lambda collector, window: collector.ack(window.get()[0])
    ex.execute(tup(1))
    ex.execute(tup(2))
    (error,) = out.errors
    assert "do not ack window tuples" in str(error.__cause__)
    assert out.state == {1: "failed", 2: "failed"}


def test_explicit_anchors_are_respected():
    bolt = Keep().with_tumbling_window(Count(2))
    ex, _, out = running(bolt)
    bolt.action = lambda collector, window: collector.emit(["x"], anchors=window.get()[1])
    ex.execute(tup(1))
    ex.execute(tup(2))
    assert [a.values[0] for a in out.last_anchors] == [2]


def test_a_refused_tuple_does_not_move_the_watermark():
    """At the cap a tuple is failed before its timestamp counts: replayed later, it is
    not late because of itself."""
    bolt = Keep().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex, context, out = running(bolt, {Config.TOPOLOGY_WINDOW_MAX_EVENTS: 1})
    ex.execute(tup(1, 100))
    ex.execute(tup(2, 500))
    assert out.state == {2: "failed"}
    context.now_ms += 1000
    for hook in context.hooks:
        hook()
    assert ex._watermarks.last == 100


def test_the_watermark_waits_for_every_input_stream():
    bolt = Keep().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex, context, _ = running(bolt, streams=2)
    ex.execute(tup(1, 100, stream=0))
    context.now_ms += 1000
    for hook in context.hooks:
        hook()
    assert ex._watermarks.last is None
    assert context.metrics["window"]()["watermark_ms"] is None
    ex.execute(tup(2, 50, stream=1))
    context.now_ms += 1000
    for hook in context.hooks:
        hook()
    assert ex._watermarks.last == 50


def test_a_timestamp_that_is_not_a_number_is_a_clear_error():
    bolt = Keep().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex, _, _ = running(bolt)
    with pytest.raises(ValueError, match="is str '12', not a number of milliseconds"):
        ex.execute(Tuple([1, "12"], SOURCES[0]))


def test_a_timestamp_of_any_real_number_type_is_taken_in_whole_milliseconds():
    """A Decimal (what a database driver gives for a numeric column) or a Fraction is a
    number: it was refused as "not a number of milliseconds"."""
    bolt = Keep().with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    ex, context, _ = running(bolt)
    ex.execute(Tuple([1, Decimal("103.7")], SOURCES[0]))
    ex.execute(Tuple([2, Fraction(209, 2)], SOURCES[0]))
    ex.execute(Tuple([3, 125], SOURCES[0]))
    context.now_ms += 1000
    for hook in context.hooks:
        hook()
    assert ex._watermarks.last == 125 and bolt.windows == [[1, 2]]  # the window (100, 110]
    for bad in (Decimal("NaN"), Decimal("Infinity"), 1j):
        with pytest.raises(ValueError, match="not a number of milliseconds"):
            ex.execute(Tuple([3, bad], SOURCES[0]))


def test_window_state_round_trips_into_a_new_task():
    """What a persistent window checkpoints and restores: the same windows follow."""

    def make() -> tuple[Keep, Any]:
        bolt = (
            Keep()
            .with_window(Duration.of(20), Duration.of(10))
            .with_timestamp_field("ts")
            .with_lag(Duration.of(5))
        )
        ex, context, _ = running(bolt)
        return bolt, (ex, context)

    first, (ex, context) = make()
    for n, ts in ((1, 603), (2, 605), (3, 607), (4, 618)):
        ex.execute(tup(n, ts))
    by_id: dict[int, Tuple] = {}
    state = ex.window_state(encode=lambda t: by_id.setdefault(t.values[0], t).values[0])
    second, (again, context2) = make()
    again.restore_window_state(state, decode=lambda n: by_id[n])
    for e, c in ((ex, context), (again, context2)):
        e.execute(tup(5, 640))
        c.now_ms += 1000
        for hook in c.hooks:
            hook()
    assert second.windows == first.windows == [[1, 2, 3], [1, 2, 3, 4], [4]]
