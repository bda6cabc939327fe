"""ConnectionTable, the pure rules behind both HTTP services' connection bounds: worked
examples with plain values, then hypothesis over random event sequences."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.connection_table import BUSY, IDLE, READING, ConnectionTable


def table(cap: int = 4, per_peer: int | None = None, header: float = 5.0, idle: float = 60.0):
    return ConnectionTable(cap, cap if per_peer is None else per_peer, header, idle)


def test_a_newcomer_displaces_the_oldest_idle_or_half_sent_connection():
    """At the cap, a new connection closes the connection that made progress longest
    ago and is not busy; busy connections keep their place."""
    t = table(cap=3)
    assert t.admit("busy", "a", 0.0).admitted
    t.started("busy", 0.5)
    t.busy("busy")
    assert t.admit("silent", "b", 1.0).admitted
    assert t.admit("half", "c", 2.0).admitted
    t.started("half", 2.0)
    verdict = t.admit("new", "d", 3.0)
    assert verdict.admitted and verdict.close == ("silent",)
    assert "silent" not in t and len(t) == 3
    verdict = t.admit("newer", "d", 4.0)
    assert verdict.close == ("half",)
    assert t.state("busy") == BUSY


def test_with_every_connection_busy_a_newcomer_is_refused_and_nothing_closes():
    t = table(cap=2)
    for conn in ("x", "y"):
        t.admit(conn, conn, 0.0)
        t.busy(conn)
    verdict = t.admit("z", "z", 1.0)
    assert not verdict.admitted and verdict.close == ()
    assert "2 connections open, all busy (at most 2)" in verdict.reason
    assert len(t) == 2 and "z" not in t


def test_one_address_displaces_only_its_own_connections():
    """A peer at its cap loses its own oldest waiting connection, not another's; with
    all of its own busy it is refused, while another address still gets in."""
    t = table(cap=6, per_peer=2)
    t.admit("other", "10.0.0.9", 0.0)
    t.admit("p1", "10.0.0.1", 1.0)
    t.admit("p2", "10.0.0.1", 2.0)
    verdict = t.admit("p3", "10.0.0.1", 3.0)
    assert verdict.admitted and verdict.close == ("p1",)
    t.busy("p2")
    t.busy("p3")
    verdict = t.admit("p4", "10.0.0.1", 4.0)
    assert not verdict.admitted and "10.0.0.1 holds 2 connections, all busy" in verdict.reason
    assert t.admit("q", "10.0.0.2", 5.0).admitted
    assert t.peer_count("10.0.0.1") == 2 and "other" in t


def test_deadlines_idle_from_acceptance_and_header_from_the_first_byte():
    """Idle: idle_timeout after acceptance or the last response; reading: header_timeout
    after the first byte of a head, whatever arrives later; busy: no deadline."""
    t = table(header=5.0, idle=60.0)
    t.admit("silent", "a", 0.0)
    t.admit("trickle", "a", 0.0)
    t.started("trickle", 10.0)
    t.started("trickle", 14.0)  # more bytes: the deadline stays at 15
    t.admit("busy", "a", 0.0)
    t.busy("busy")
    assert t.next_deadline() == 15.0
    assert t.expired(14.9) == []
    assert t.expired(15.0) == ["trickle"]
    assert t.expired(59.9) == []
    assert t.expired(60.0) == ["silent"]
    assert t.expired(10**6) == [] and t.state("busy") == BUSY
    t.idle("busy", 100.0)
    assert t.state("busy") == IDLE and t.expired(159.9) == [] and t.expired(160.0) == ["busy"]


def test_a_response_makes_a_reading_connection_idle_again():
    t = table()
    t.admit("c", "a", 0.0)
    t.started("c", 1.0)
    assert t.state("c") == READING
    t.busy("c")
    t.idle("c", 2.0)
    assert t.state("c") == IDLE
    assert t.expired(6.5) == []  # no header deadline any more


def test_removing_twice_and_events_for_unknown_connections_are_ignored():
    t = table()
    t.admit("c", "a", 0.0)
    t.remove("c")
    t.remove("c")
    for event in (lambda: t.started("c", 1.0), lambda: t.busy("c"), lambda: t.idle("c", 1.0)):
        event()
    assert len(t) == 0 and t.peer_count("a") == 0
    t.admit("d", "a", 0.0)
    with pytest.raises(ValueError, match="admitted already"):
        t.admit("d", "a", 0.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1, 1.0, 1.0), "max_connections must be from 1"),
        ((4, 5, 1.0, 1.0), "max_connections_per_peer must be from 1 to 4"),
        ((4, 2.0, 1.0, 1.0), "max_connections_per_peer must be an integer"),
        ((True, 1, 1.0, 1.0), "max_connections must be an integer"),
        ((4, 2, math.nan, 1.0), "header_timeout must be a number of seconds > 0"),
        ((4, 2, 1.0, math.inf), "idle_timeout must be a number of seconds > 0"),
        ((4, 2, 1.0, -1), "idle_timeout"),
        ((4, 2, "5", 1.0), "header_timeout must be a number of seconds, got str"),
    ],
)
def test_bad_bounds_are_refused_naming_them(args, message):
    with pytest.raises(ValueError, match=message):
        ConnectionTable(*args)


# -- hypothesis: random events against the promises -----------------------------------

PEERS = ["a", "b", "c"]
events = st.lists(
    st.tuples(
        st.sampled_from(["admit", "started", "busy", "idle", "remove", "tick"]),
        st.integers(0, 11),  # connection
        st.sampled_from(PEERS),
        st.floats(0.0, 3.0),  # time passing before the event
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(events, st.integers(1, 6), st.integers(1, 6))
def test_bounds_hold_and_busy_connections_are_never_closed(steps, cap, per_peer):
    """Whatever happens: at most cap connections, at most per_peer per address; a busy
    connection is never displaced nor expired; a refusal happens only when every
    connection it could displace is busy; expiry closes exactly the overdue ones."""
    per_peer = min(per_peer, cap)
    t = ConnectionTable(cap, per_peer, 2.0, 5.0)
    model: dict[int, tuple[str, str, float]] = {}  # conn -> (peer, state, since)
    now = 0.0
    for kind, conn, peer, dt in steps:
        now += dt
        if kind == "admit":
            if conn in model:
                continue
            verdict = t.admit(conn, peer, now)
            for closed in verdict.close:
                assert model[closed][1] != BUSY
                del model[closed]
            if verdict.admitted:
                model[conn] = (peer, IDLE, now)
            else:
                same = [c for c, m in model.items() if m[0] == peer]
                pool = same if len(same) >= per_peer else list(model)
                assert all(model[c][1] == BUSY for c in pool)
        elif kind == "started" and conn in model and model[conn][1] == IDLE:
            t.started(conn, now)
            model[conn] = (model[conn][0], READING, now)
        elif kind == "busy" and conn in model:
            t.busy(conn)
            model[conn] = (model[conn][0], BUSY, model[conn][2])
        elif kind == "idle" and conn in model:
            t.idle(conn, now)
            model[conn] = (model[conn][0], IDLE, now)
        elif kind == "remove":
            t.remove(conn)
            model.pop(conn, None)
        elif kind == "tick":
            for closed in t.expired(now):
                p, state, since = model.pop(closed)
                assert state != BUSY
                assert now - since >= (2.0 if state == READING else 5.0)
            for _, state, since in model.values():
                if state != BUSY:
                    assert now - since < (2.0 if state == READING else 5.0)
        assert len(t) == len(model) <= cap
        for p in PEERS:
            assert t.peer_count(p) == sum(1 for m in model.values() if m[0] == p) <= per_peer
        for c, (_, state, _) in model.items():
            assert t.state(c) == state
