"""A windowed bolt at its edges: a tuple stamped exactly at the watermark, and a session
key that cannot be hashed. Each once lost input or wedged the bolt."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, LocalCluster, TopologyBuilder
from tupletree.windowing import Duration

from .support import Collect, LateSink, feeder, new_journal, settled, windows

CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}


def _topology(spout: Any, bolt: Any, late: Any = None) -> Any:
    """src -> win, and win's late stream -> a LateSink journaling into ``late``."""
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", bolt).shuffle_grouping("src")
    if late is not None:
        b.set_bolt("late", LateSink(late)).shuffle_grouping("win", "late")
    return b.create_topology()


@pytest.mark.parametrize("lag", [0, 5])
def test_a_tuple_stamped_at_the_watermark_lands_in_its_window(lag: int) -> None:
    """Event time, tumbling 10 ms windows (end - 10, end], lag ``lag``. Tuples 1 (ts 5)
    and 2 (ts 10 + lag) make the watermark 10: no tuple before 10 will come, but one
    stamped 10 may (it is not late), so the window (0, 10] waits. Tuple 3 comes, stamped
    10, and is in it when the next watermark fires it. (Storm fires the window at
    watermark 10; tuple 3 then joins no window, is expired by the next and acked, in
    no window and not counted late.)"""
    j, late = new_journal(), new_journal()
    bolt = (
        Collect(j)
        .with_tumbling_window(Duration.of(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.of(lag))
        .with_late_tuple_stream("late")
    )
    spout = feeder(j, ["id", "ts"])
    with LocalCluster(simulate_time=True) as sim:
        sim.submit_topology("w", CONF, _topology(spout, bolt, late))
        spout.feed([1, 5], msg_id=1)
        spout.feed([2, 10 + lag], msg_id=2)
        sim.wait_idle()
        sim.advance_time(1)  # watermark 10
        assert windows(j) == []  # (0, 10] waits: a tuple stamped 10 may still come
        spout.feed([3, 10], msg_id=3)  # stamped at the watermark: not late
        spout.feed([4, 40 + lag], msg_id=4)
        sim.wait_idle()
        sim.advance_time(1)  # watermark 40: windows up to (20, 30]
        sim.wait_idle()
        fired = {w["end"]: sorted(w["ids"]) for w in windows(j)}
        assert fired == ({10: [1, 2, 3]} if lag == 0 else {10: [1, 3], 20: [2]})
        assert late.items() == []
        (m,) = sim.metrics("w")["win"]["custom"]["window"].values()
        assert m["late"] == 0
        assert 4 not in settled(j, "ack")  # its window (30 + lag, 40 + lag] waits


def test_a_session_key_that_is_not_hashable_fails_its_tuple_only() -> None:
    """Session windows keyed by field "k", a cap of 3 held tuples. Tuples whose key is a
    list (not hashable) fail. Each used to count as held before the lookup raised:
    after 3 of them the bolt held nothing yet refused every tuple for good
    (WindowFullError). Now a valid tuple after them is windowed."""
    j = new_journal()
    bolt = Collect(j).with_session_window(Duration.of(50), key="k")
    spout = feeder(j, ["id", "k"])
    conf = {**CONF, Config.TOPOLOGY_WINDOW_MAX_EVENTS: 3}
    with LocalCluster(simulate_time=True) as sim:
        sim.submit_topology("w", conf, _topology(spout, bolt))
        for i in range(3):
            spout.feed([i, [i]], msg_id=i)  # unhashable keys: failed
        sim.wait_idle()
        assert sorted(settled(j, "fail")) == [0, 1, 2]
        spout.feed([10, "a"], msg_id=10)
        sim.wait_idle()
        sim.advance_time(1)  # the session closes (gap 50 ms)
        sim.wait_idle()
        (m,) = sim.metrics("w")["win"]["custom"]["window"].values()
        assert (m["held"], m["refused"]) == (0, 0)
        assert 10 not in settled(j, "fail")
        assert [w["ids"] for w in windows(j)] == [[10]]


def test_an_unhashable_session_key_does_not_move_the_watermark() -> None:
    """Event-time sessions: a tuple stamped 100 whose key cannot be hashed fails, and
    leaves the watermark where it was, so a tuple stamped 50 after it is not late."""
    j, late = new_journal(), new_journal()
    bolt = (
        Collect(j)
        .with_session_window(Duration.of(10), key="k")
        .with_timestamp_field("ts")
        .with_late_tuple_stream("late")
    )
    spout = feeder(j, ["id", "k", "ts"])
    with LocalCluster(simulate_time=True) as sim:
        sim.submit_topology("w", CONF, _topology(spout, bolt, late))
        spout.feed([1, "a", 5], msg_id=1)
        spout.feed([2, ["bad"], 100], msg_id=2)  # fails: its key cannot be hashed
        sim.wait_idle()
        sim.advance_time(1)  # a watermark from what was accepted: 5
        spout.feed([3, "a", 50], msg_id=3)
        spout.feed([4, "a", 200], msg_id=4)
        sim.wait_idle()
        sim.advance_time(1)  # watermark 200: the sessions before it close
        sim.wait_idle()
        assert settled(j, "fail") == [2]
        assert late.items() == []
        assert sorted(w["ids"] for w in windows(j)) == [[1], [3]]
