"""Session windows (beyond Storm) on the pure SessionManager: per key, a gap of
``gap`` ms or more splits sessions, a bridging event merges them, a session closes
once time reaches its newest timestamp plus the gap, then its events expire."""

from __future__ import annotations

from typing import Any

from tupletree.windowing.manager import Expired, Fired
from tupletree.windowing.sessions import SessionManager


def closed(outcomes: Any) -> list[tuple[Any, list[Any], int, int]]:
    """(key, items, start, end) of each fired session; checks each is followed by the
    expiry of exactly its items."""
    out = list(outcomes)
    fired = [o for o in out if isinstance(o, Fired)]
    assert [o.items for o in out if isinstance(o, Expired)] == [f.items for f in fired]
    for f in fired:
        assert f.new == f.items and f.expired == []
    return [(f.key, f.items, f.start_ts, f.end_ts) for f in fired]


def test_a_session_closes_gap_after_its_last_event():
    m = SessionManager(10)
    for item, ts in (("a", 100), ("b", 105), ("c", 114)):
        assert list(m.add(item, ts)) == []
    assert closed(m.advance(123)) == []
    assert closed(m.advance(124)) == [(None, ["a", "b", "c"], 100, 124)]
    assert len(m) == 0 and m.open_sessions() == 0


def test_a_gap_of_exactly_gap_starts_a_new_session():
    m = SessionManager(10)
    m.add("a", 100)
    m.add("b", 110)
    assert closed(m.on_watermark(1000)) == [(None, ["a"], 100, 110), (None, ["b"], 110, 120)]


def test_sessions_are_per_key_and_close_in_order_of_their_close_times():
    m = SessionManager(10)
    m.add("a1", 100, "u1")
    m.add("b1", 101, "u2")
    m.add("a2", 108, "u1")
    assert m.open_sessions() == 2 and len(m) == 3
    assert closed(m.on_watermark(200)) == [
        ("u2", ["b1"], 101, 111),
        ("u1", ["a1", "a2"], 100, 118),
    ]


def test_an_extended_session_is_not_closed_at_its_old_time():
    """The heap entry made when the session began comes due first: the session, since
    extended, is rescheduled, not closed."""
    m = SessionManager(10)
    m.add("a", 0)
    m.add("b", 9)
    assert m.next_due() == 10
    assert closed(m.advance(10)) == []
    assert m.next_due() == 19
    assert closed(m.advance(19)) == [(None, ["a", "b"], 0, 19)]


def test_an_out_of_order_event_bridging_two_sessions_merges_them():
    """Event time: 100 and 115 are two sessions (gap 10); 107 is within the gap of
    both, so they become one, its events in arrival order."""
    m = SessionManager(10)
    m.add("a", 100, "k")
    m.add("c", 115, "k")
    assert m.open_sessions() == 2
    m.add("b", 107, "k")
    assert m.open_sessions() == 1
    assert closed(m.on_watermark(125)) == [("k", ["a", "c", "b"], 100, 125)]


def test_an_out_of_order_event_before_a_session_extends_its_start():
    m = SessionManager(10)
    m.add("b", 105)
    m.add("a", 97)
    assert closed(m.on_watermark(115)) == [(None, ["b", "a"], 97, 115)]


def test_state_round_trips_into_a_new_manager():
    """What a persistent session window checkpoints: the same sessions close the same
    way after a restore."""
    m = SessionManager(10)
    for item, ts, key in (("a", 100, "u1"), ("b", 103, "u2"), ("c", 107, "u1")):
        m.add(item, ts, key)
    state = m.state(encode=str.upper)
    again = SessionManager(10)
    again.restore(state, decode=str.lower)
    assert len(again) == 3 and again.open_sessions() == 2
    assert closed(again.on_watermark(500)) == closed(m.on_watermark(500))
