"""Hypothesis over random windows, arrival orders, timestamps, clock steps, caps and
failing windows, on the real WindowedBoltExecutor with a collector that settles tuples
as the runtime's does and a context whose clock the test moves:

- every input is acked exactly once or failed once (never both, never twice) or still
  held by the window: none is lost;
- a window only ever holds tuples not yet settled, its emits are anchored to all of
  them, and it keeps within its bounds (a duration
  window: timestamps in (end - length, end]; a count window: at most its length; a
  session: no gap of ``gap`` or more inside, end = newest + gap);
- a failed input was in a window whose execute raised, or refused at the cap;
- a late input is acked at once and is in no window;
- the events held never exceed the cap (nor a count window's own bound)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tupletree.config import Config
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource
from tupletree.windowing import Count, Duration, WindowedBolt
from tupletree.windowing.executor import WindowedBoltExecutor
from tupletree.windowing.sessions import SessionManager

FIELDS = Fields(["id", "ts"])
SOURCES = [TupleSource("a", "default", 1, FIELDS), TupleSource("b", "default", 2, FIELDS)]


class Context:
    def __init__(self, streams: int) -> None:
        self.now_ms = 0
        self.component_id = "win"
        self.hooks: list[Any] = []
        self.metrics: dict[str, Any] = {}
        self._streams = streams

    def now(self) -> float:
        return self.now_ms / 1000

    def sources(self) -> dict[tuple[str, str], Any]:
        return {(s.component, s.stream): None for s in SOURCES[: self._streams]}

    def call_each_round(self, fn: Any) -> None:
        self.hooks.append(fn)

    def register_metric(self, name: str, fn: Any) -> None:
        self.metrics[name] = fn


class Collector:
    """Settles as the runtime's OutputCollector does (a second settle of a tuple is
    ignored), and records every call, so double acks and ack-after-fail show."""

    def __init__(self) -> None:
        self.state: dict[int, str] = {}
        self.violations: list[str] = []
        self.errors: list[BaseException] = []
        self.late: list[Any] = []
        self.last_anchors: list[Any] = []

    def emit(self, values: Any, anchors: Any = None, stream: str = "default") -> list[int]:
        anchors = [anchors] if isinstance(anchors, Tuple) else list(anchors or [])
        self.last_anchors = anchors
        for a in anchors:
            if a.is_settled():
                self.violations.append(f"emit anchored to settled tuple {a.values}")
        if stream == "late":
            self.late.append(values[0].values[0])
        return []

    def _settle(self, tup: Tuple, how: str) -> None:
        tid = tup.values[0]
        was = self.state.get(tid)
        if was == "acked":
            self.violations.append(f"{how} after ack of {tid}")
        if was == "failed" and how == "failed":
            self.violations.append(f"failed twice: {tid}")
        if was is None:
            self.state[tid] = how
            tup._ack_val = -1

    def ack(self, tup: Tuple) -> None:
        self._settle(tup, "acked")

    def fail(self, tup: Tuple) -> None:
        self._settle(tup, "failed")

    def report_error(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def reset_timeout(self, tup: Tuple) -> None:
        pass


class Probe(WindowedBolt):
    def __init__(self, poison: frozenset[int]) -> None:
        self.poison = poison

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen: list[Any] = []
        self.raised: list[set[int]] = []

    def execute(self, window: Any) -> None:
        self.seen.append(window)
        self.collector.emit([len(window.get())])
        assert self.out.last_anchors == window.get(), "an emit is anchored to the window"
        ids = {t.values[0] for t in window.get()}
        if ids & self.poison:
            self.raised.append(ids)
            raise ValueError("poisoned")


length_or_slide = st.one_of(
    st.builds(Count, st.integers(1, 6)), st.builds(Duration, st.integers(1, 60))
)


@st.composite
def windows(draw: Any) -> dict[str, Any]:
    session = draw(st.booleans())
    return {
        "session": session,
        "length": draw(length_or_slide),
        "slide": draw(length_or_slide),
        "gap": draw(st.integers(1, 40)),
        "keyed": draw(st.booleans()),
        "event_time": draw(st.booleans()),
        "lag": draw(st.integers(0, 20)),
        "interval": draw(st.integers(1, 30)),
        "streams": draw(st.integers(1, 2)),
        "cap": draw(st.integers(1, 25)),
        "late_stream": draw(st.booleans()),
    }


# ("tuple", stream, timestamp): a tuple arrives now; ("time", ms, 0): the clock moves
# and the worker runs a round.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("tuple"), st.integers(0, 1), st.integers(0, 150)),
        st.tuples(st.just("time"), st.integers(1, 40), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows(), operations, st.frozensets(st.integers(0, 60), max_size=4))
def test_every_input_is_settled_once_or_held_and_windows_keep_their_bounds(spec, ops, poison):
    bolt = Probe(poison)
    if spec["session"]:
        # Keyed: by timestamp parity, two interleaved session streams.
        bolt.with_session_window(Duration(spec["gap"]), key=_parity if spec["keyed"] else None)
    else:
        bolt.with_window(spec["length"], spec["slide"])
    if spec["event_time"]:
        bolt.with_timestamp_field("ts").with_lag(Duration(spec["lag"]))
        bolt.with_watermark_interval(Duration(spec["interval"]))
        if spec["late_stream"]:
            bolt.with_late_tuple_stream("late")
    ex = WindowedBoltExecutor(bolt)
    context = Context(spec["streams"])
    out = Collector()
    cap = spec["cap"]
    ex.prepare({Config.TOPOLOGY_WINDOW_MAX_EVENTS: cap}, context, out)
    bolt.out = out
    bound = bolt.window_spec.count_bound()
    arrival: dict[int, int] = {}
    event_ts: dict[int, int] = {}
    late: set[int] = set()
    refused: set[int] = set()
    tuples: list[Tuple] = []

    def round_() -> None:
        for hook in context.hooks:
            hook()

    for n, (op, stream, value) in enumerate(ops):
        if op == "time":
            context.now_ms += stream
            round_()
        else:
            round_()
            tup = Tuple([n, value], SOURCES[stream % spec["streams"]])
            tuples.append(tup)
            arrival[n], event_ts[n] = context.now_ms, value
            full = len(ex._manager) >= cap
            last_wm = ex._watermarks.last if ex._watermarks is not None else None
            is_late = last_wm is not None and value < last_wm
            ex.execute(tup)
            if is_late:
                late.add(n)
                assert out.state.get(n) == "acked", "a late tuple is acked at once"
            elif full:
                refused.add(n)
                assert out.state.get(n) == "failed", "input at the cap is failed at once"
        held = len(ex._manager)
        assert held <= cap
        if bound is not None:
            assert held <= bound
    # Drain: time far ahead (processing-time windows and sessions all close).
    for _ in range(3):
        context.now_ms += 1000
        round_()

    assert out.violations == []
    held_ids = _held(ex._manager)
    for tup in tuples:
        tid = tup.values[0]
        state = out.state.get(tid)
        assert (state is None) == (tid in held_ids), (
            f"tuple {tid}: {state}, held: {tid in held_ids}"
        )
    raised_ids = set().union(*bolt.raised) if bolt.raised else set()
    failed = {t for t, s in out.state.items() if s == "failed"}
    assert failed <= raised_ids | refused
    in_windows = {t.values[0] for w in bolt.seen for t in w.get()}
    assert not (late & in_windows)
    assert sorted(out.late) == (sorted(late) if spec["late_stream"] else [])
    for w in bolt.seen:
        _check_bounds(w, spec, arrival, event_ts)


def _parity(tup: Tuple) -> int:
    return tup.values[1] % 2


def _held(manager: Any) -> set[int]:
    if isinstance(manager, SessionManager):
        return {
            item.values[0]
            for mine in manager.sessions.values()
            for s in mine
            for _, _, item in s.events
        }
    return {e.item.values[0] for e in manager.queue}


def _check_bounds(window: Any, spec: dict[str, Any], arrival: dict, event_ts: dict) -> None:
    items = [t.values[0] for t in window.get()]
    assert items, "no empty window is executed"
    assert {t.values[0] for t in window.get_new()} <= set(items)
    stamp = event_ts if spec["event_time"] else arrival
    ts = [stamp[i] for i in items]
    end = window.get_end_timestamp()
    if spec["session"]:
        ordered = sorted(ts)
        assert all(b - a < spec["gap"] for a, b in itertools.pairwise(ordered))
        assert end == ordered[-1] + spec["gap"] and window.get_start_timestamp() == ordered[0]
        return
    length = spec["length"]
    if isinstance(length, Count):
        assert len(items) <= length.value
    else:
        assert all(end - length.value < t <= end for t in ts), (ts, end, length)
        assert window.get_start_timestamp() == end - length.value
