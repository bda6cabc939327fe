"""What a persistent window checkpoints: a manager's and a watermark generator's state
are plain values (a JSON round trip keeps them), and a fresh one restored from them
goes on exactly as the original does."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.windowing import Count, Duration
from tupletree.windowing.manager import Expired, make_manager
from tupletree.windowing.sessions import SessionManager
from tupletree.windowing.watermarks import WatermarkGenerator

lengths = st.one_of(st.builds(Count, st.integers(1, 5)), st.builds(Duration, st.integers(1, 40)))
ops = st.lists(
    st.tuples(st.sampled_from(["add", "mark", "tick"]), st.integers(0, 120)), max_size=40
)


def _drive(manager: Any, op: str, value: int, clock: list[int], n: int) -> list[Any]:
    """One step; the outcomes as plain values (items are ints)."""
    if op == "add":
        clock[0] += 1
        out = list(manager.add(n, value if clock[1] else clock[0]))
    elif op == "mark":
        out = list(manager.on_watermark(value))
    else:
        clock[0] += value
        out = list(manager.advance(clock[0]))
    return [("expired", o.items) if isinstance(o, Expired) else tuple(o) for o in out]


@settings(max_examples=150, deadline=None)
@given(
    lengths,
    lengths,
    st.booleans(),
    st.integers(0, 10),
    st.booleans(),
    ops,
    st.integers(0, 40),
)
def test_a_restored_manager_goes_on_as_the_original(
    length, slide, event_time, lag, session, steps, cut
):
    def fresh() -> Any:
        if session:
            return SessionManager(7)
        return make_manager(length, slide, event_time=event_time, lag_ms=lag, start_ms=0)

    original = fresh()
    clock = [0, event_time or session]
    for n, (op, value) in enumerate(steps[:cut]):
        _drive(original, op, value, clock, n)
    state = json.loads(json.dumps(original.state()))
    restored = fresh()
    restored.restore(state)
    assert len(restored) == len(original)
    twin = list(clock)
    for n, (op, value) in enumerate(steps[cut:], start=cut):
        assert _drive(restored, op, value, twin, n) == _drive(original, op, value, clock, n)


def test_a_restored_watermark_generator_keeps_streams_and_the_last_watermark():
    g = WatermarkGenerator([("a", "default"), ("b", "s")], 5)
    g.track(("a", "default"), 100)
    g.track(("b", "s"), 90)
    assert g.compute() == 85
    g.track(("a", "default"), 120)
    again = WatermarkGenerator([("a", "default"), ("b", "s")], 5)
    again.restore(json.loads(json.dumps(g.state())))
    assert again.last == 85 and not again.track(("b", "s"), 80)
    for gen in (g, again):
        gen.track(("b", "s"), 130)
    assert again.compute() == g.compute() == 115
