"""Windowed bolts on a real topology, in simulated time (LocalCluster(simulate_time=
True)): Storm's window vectors through a bolt, acking and anchoring, late tuples, a
failing execute, the cap on held events, processing-time durations and sessions."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Bolt, Config, LocalCluster, TopologyBuilder
from tupletree.windowing import Count, DetachedTuple, Duration

from .support import Collect, LateSink, feeder, new_journal, settled, windows

CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}


def build(bolt: Any, journal: Any, fields: list[str], late: LateSink | None = None) -> Any:
    spout = feeder(journal, fields)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", bolt).shuffle_grouping("src")
    if late is not None:
        b.set_bolt("late", late).shuffle_grouping("win", "late")
    return spout, b.create_topology()


@pytest.fixture
def sim():
    with LocalCluster(simulate_time=True) as cluster:
        yield cluster


def metric(cluster: Any) -> dict[str, Any]:
    """The windowed bolt's one task's ``window`` metric."""
    (only,) = cluster.metrics("w")["win"]["custom"]["window"].values()
    return only


def ids(journal: Any) -> list[list[Any]]:
    return [w["ids"] for w in windows(journal)]


def test_count_window_5_sliding_2_gives_storms_windows_and_acks_on_expiry(sim):
    """1..8 through Count(5) sliding Count(2): [1,2], [1..4], [2..6] (expired [1]),
    [4..8] (expired [2,3]); the spout hears of tuple 1's ack only after the window that
    expired it ran, and of 2 and 3 only after [4..8]."""
    j = new_journal()
    spout, topology = build(Collect(j).with_window(Count(5), Count(2)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    for i in range(1, 6):
        spout.feed([i], msg_id=i)
        sim.wait_idle()
    assert settled(j, "ack") == []  # [1,2] and [1..4] ran; nothing left the window
    spout.feed([6], msg_id=6)
    sim.wait_idle()
    assert settled(j, "ack") == [1]
    for i in (7, 8):
        spout.feed([i], msg_id=i)
        sim.wait_idle()
    got = windows(j)
    assert [w["ids"] for w in got] == [[1, 2], [1, 2, 3, 4], [2, 3, 4, 5, 6], [4, 5, 6, 7, 8]]
    assert [w["expired"] for w in got] == [[], [], [1], [2, 3]]
    assert [w["new"] for w in got] == [[1, 2], [3, 4], [5, 6], [7, 8]]
    assert [w["start"] for w in got] == [None] * 4  # count windows have no start
    journal = j.items()
    ran = journal.index(got[2])
    assert journal.index(("ack", 1)) > ran
    assert journal.index(("ack", 2)) > journal.index(got[3]) > ran
    assert settled(j, "fail") == []


class FailAll(Bolt):
    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.fail(tup)


def test_every_emit_of_a_window_is_anchored_to_all_its_tuples(sim):
    """The window's output fails downstream: every tuple of the window is in its tree,
    so all of them fail at their spout, none is acked."""
    j = new_journal()
    spout, _ = build(Collect(j).with_tumbling_window(Count(3)), j, ["id"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", Collect(j).with_tumbling_window(Count(3))).shuffle_grouping("src")
    b.set_bolt("down", FailAll()).shuffle_grouping("win")
    sim.submit_topology("w", CONF, b.create_topology())
    for i in range(1, 7):
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    assert sorted(settled(j, "fail")) == [1, 2, 3, 4, 5, 6]
    assert settled(j, "ack") == []


def test_tumbling_count_3(sim):
    """Count 3 tumbling over 1..6: [1,2,3] then [4,5,6]; 1..3 acked as [4,5,6] runs."""
    j = new_journal()
    spout, topology = build(Collect(j).with_tumbling_window(Count(3)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    for i in range(1, 7):
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    assert ids(j) == [[1, 2, 3], [4, 5, 6]]
    assert sorted(settled(j, "ack")) == [1, 2, 3]


EVENTS = [(1, 603), (2, 605), (3, 607), (4, 618), (5, 626), (6, 636)]


def event_time_bolt(j: Any) -> Any:
    return (
        Collect(j)
        .with_window(Duration.of(20), Duration.of(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.of(5))
    )


def test_event_time_length_20_slide_10(sim):
    """Storm's WindowedBoltExecutorTest: 603..636 with lag 5 (watermark 631 at the next
    watermark interval): [1,2,3], [1,2,3,4], [4,5], ending at 610, 620, 630."""
    j = new_journal()
    spout, topology = build(event_time_bolt(j), j, ["id", "ts"])
    sim.submit_topology("w", CONF, topology)
    for i, ts in EVENTS:
        spout.feed([i, ts], msg_id=i)
    sim.wait_idle()
    assert windows(j) == []  # no watermark yet: the interval has not passed
    sim.advance_time(1)
    got = windows(j)
    assert [w["ids"] for w in got] == [[1, 2, 3], [1, 2, 3, 4], [4, 5]]
    assert [(w["start"], w["end"]) for w in got] == [(590, 610), (600, 620), (610, 630)]
    assert sorted(settled(j, "ack")) == [1, 2, 3]
    assert metric(sim)["watermark_ms"] == 631


def seconds_field(tup: Any) -> int:
    """A timestamp extractor: the tuple carries seconds, windows want ms."""
    return tup.get("secs") * 1000


def test_event_time_from_a_timestamp_extractor(sim):
    """with_timestamp_extractor(fn), copied to the task with the bolt: the same windows
    as a field, from a function of the tuple."""
    j = new_journal()
    bolt = (
        Collect(j)
        .with_window(Duration.seconds(20), Duration.seconds(10))
        .with_timestamp_extractor(seconds_field)
        .with_lag(Duration.seconds(5))
    )
    spout, topology = build(bolt, j, ["id", "secs"])
    sim.submit_topology("w", CONF, topology)
    for i, ts in EVENTS:
        spout.feed([i, ts], msg_id=i)
    sim.wait_idle()
    sim.advance_time(1)
    got = windows(j)
    assert [w["ids"] for w in got] == [[1, 2, 3], [1, 2, 3, 4], [4, 5]]
    assert [w["end"] for w in got] == [610_000, 620_000, 630_000]


def test_event_time_lag_takes_an_out_of_order_tuple(sim):
    """Storm's testEventTimeLag through a bolt: 7@629 arrives after 6@632 and is still
    in the window ending at 630: [1,2,3], [1,2,3,4], [4,5,7]."""
    j = new_journal()
    spout, topology = build(event_time_bolt(j), j, ["id", "ts"])
    sim.submit_topology("w", CONF, topology)
    stamps = [(1, 603), (2, 605), (3, 607), (4, 618), (5, 626), (6, 632), (7, 629), (8, 636)]
    for i, ts in stamps:
        spout.feed([i, ts], msg_id=i)
    sim.wait_idle()
    sim.advance_time(1)
    assert ids(j) == [[1, 2, 3], [1, 2, 3, 4], [4, 5, 7]]


def _late_topology(sim: Any, sink: LateSink | None, j: Any) -> Any:
    bolt = event_time_bolt(j)
    if sink is not None:
        bolt.with_late_tuple_stream("late")
    spout, topology = build(bolt, j, ["id", "ts"], late=sink)
    sim.submit_topology("w", CONF, topology)
    for i, ts in EVENTS:
        spout.feed([i, ts], msg_id=i)
    sim.wait_idle()
    sim.advance_time(1)  # watermark 631
    spout.feed([7, 600], msg_id=7)
    sim.wait_idle()
    return spout


def test_a_late_tuple_goes_to_the_late_stream_once_and_in_no_window(sim):
    """A tuple at 600 after the watermark passed 631: emitted once on the late stream
    (field late_tuple, a DetachedTuple of its values), in no window, ever."""
    j, late = new_journal(), new_journal()
    spout = _late_topology(sim, LateSink(late), j)
    sim.advance_time(1)
    spout.feed([8, 700], msg_id=8)
    sim.wait_idle()
    sim.advance_time(2)
    assert late.items() == [{"late": [7, 600], "type": "DetachedTuple"}]
    assert all(7 not in w["ids"] for w in windows(j))
    assert 7 in settled(j, "ack")  # the sink acked the late tuple: the tree completed
    assert metric(sim)["late"] == 1


def test_a_late_tuple_is_anchored_so_its_sink_failing_it_fails_the_spout_tuple(sim):
    """The late-stream tuple is anchored to the input: the sink's fail reaches the spout."""
    j, late = new_journal(), new_journal()
    _late_topology(sim, LateSink(late, fail=True), j)
    assert settled(j, "fail") == [7]


def test_without_a_late_stream_a_late_tuple_is_acked_at_once(sim):
    """No late stream: the late input is acked at once (never held, never replayed:
    Storm's STORM-1859 fix), and counted."""
    j = new_journal()
    _late_topology(sim, None, j)
    assert 7 in settled(j, "ack")
    m = metric(sim)
    assert m["late"] == 1 and m["held"] == 3  # 4, 5, 6 wait for later windows


def test_a_tuple_without_the_timestamp_field_is_failed_with_a_clear_error(sim):
    """with_timestamp_field("ts") on a stream without it: the tuple is failed and the
    error names the bolt, the stream, the field and the fields there are."""
    j = new_journal()
    bolt = Collect(j).with_tumbling_window(Duration.of(10)).with_timestamp_field("ts")
    spout, topology = build(bolt, j, ["id"])
    sim.submit_topology("w", CONF, topology)
    spout.feed([1], msg_id=1)
    sim.wait_idle()
    assert settled(j, "fail") == [1]
    (error,) = sim.errors("w")
    assert "TimestampError" in error and "no timestamp field 'ts'" in error
    assert "'src' stream 'default'" in error and "['id']" in error


def test_processing_time_tumbling_duration_follows_the_simulated_clock(sim):
    """Duration 10 s tumbling from submit (t = 0): tuples arriving at 0 s and 5 s are in
    the window due at 10 s (holding [0 s, 10 s), end timestamp 9,999 ms, Storm's
    "now - 1"), one at 10 s in the next; each fires as the clock gets there."""
    j = new_journal()
    spout, topology = build(Collect(j).with_tumbling_window(Duration.seconds(10)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    spout.feed(["a"], msg_id="a")
    sim.wait_idle()
    sim.advance_time(5)
    spout.feed(["b"], msg_id="b")
    sim.wait_idle()
    sim.advance_time(4)  # t = 9
    assert windows(j) == []
    sim.advance_time(1)  # t = 10: the window fires before c (fed now) arrives
    spout.feed(["c"], msg_id="c")
    sim.wait_idle()
    assert [(w["ids"], w["start"], w["end"]) for w in windows(j)] == [(["a", "b"], -1, 9_999)]
    assert settled(j, "ack") == []
    sim.advance_time(10)  # t = 20
    got = windows(j)
    assert [(w["ids"], w["expired"], w["end"]) for w in got[1:]] == [(["c"], ["a", "b"], 19_999)]
    assert settled(j, "ack") == ["a", "b"]


def test_processing_time_sliding_duration(sim):
    """Duration 10 s sliding 5 s: windows end at 5, 10, 15 s...; a tuple is in two
    windows and acked when it leaves the second."""
    j = new_journal()
    bolt = Collect(j).with_window(Duration.seconds(10), Duration.seconds(5))
    spout, topology = build(bolt, j, ["id"])
    sim.submit_topology("w", CONF, topology)
    sim.advance_time(2)
    spout.feed(["a"], msg_id="a")
    sim.wait_idle()
    sim.advance_time(5)  # t = 7
    spout.feed(["b"], msg_id="b")
    sim.wait_idle()
    sim.advance_time(13)  # t = 20
    assert [(w["ids"], w["end"]) for w in windows(j)] == [
        (["a"], 4999),
        (["a", "b"], 9999),
        (["b"], 14_999),
    ]
    assert settled(j, "ack") == ["a", "b"]


def test_count_length_with_a_duration_slide(sim):
    """Count 2 sliding every 5 s: the last two tuples, every 5 s."""
    j = new_journal()
    spout, topology = build(Collect(j).with_window(Count(2), Duration.seconds(5)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    for i in (1, 2, 3):
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    sim.advance_time(5)
    assert ids(j) == [[2, 3]]
    assert settled(j, "ack") == [1]


def test_duration_length_with_a_count_slide(sim):
    """Duration 5 s sliding every 2 tuples: at each second tuple, those of the last 5 s."""
    j = new_journal()
    spout, topology = build(Collect(j).with_window(Duration.seconds(5), Count(2)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    for at, i in ((1, 1), (1, 2), (6, 3), (1, 4)):  # arrive at 1, 2, 8, 9 s
        sim.advance_time(at)
        spout.feed([i], msg_id=i)
        sim.wait_idle()
    assert [(w["ids"], w["end"]) for w in windows(j)] == [([1, 2], 2000), ([3, 4], 9000)]


def test_a_failing_execute_fails_the_windows_tuples_which_replay(sim):
    """execute raises for [1,2,3]: 1, 2, 3 are failed (the spout replays them), leave
    the window, and the error says so; their replay lands in a later window."""
    j = new_journal()
    spout, topology = build(Collect(j, poison=(2,)).with_tumbling_window(Count(3)), j, ["id"])
    sim.submit_topology("w", CONF, topology)
    for i in (1, 2, 3):
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    assert sorted(settled(j, "fail")) == [1, 2, 3]
    (error,) = sim.errors("w")
    assert "WindowFailedError" in error and "3 tuples not yet acked were failed" in error
    assert "ValueError: poisoned window [1, 2, 3]" in error  # the cause, with its traceback
    for i in (4, 1, 2, 3, 5, 6):  # the spout replays 1..3 among new input
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    assert ids(j) == [[1, 2, 3], [4, 1, 2], [3, 5, 6]]
    assert sorted(settled(j, "ack")) == [1, 2, 4]
    assert metric(sim)["failed_windows"] == 1


def test_at_the_cap_new_input_is_failed_and_reported_once(sim):
    """tupletree.window.max.events = 3: the 4th and 5th tuples are failed at once (not
    accepted), one WindowFullError names the cap and the key; the window keeps 1..3."""
    j = new_journal()
    spout, topology = build(Collect(j).with_tumbling_window(Duration.seconds(10)), j, ["id"])
    sim.submit_topology("w", {**CONF, Config.TOPOLOGY_WINDOW_MAX_EVENTS: 3}, topology)
    for i in range(1, 6):
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    assert settled(j, "fail") == [4, 5]
    (error,) = sim.errors("w")
    assert "WindowFullError" in error and "tupletree.window.max.events = 3" in error
    m = metric(sim)
    assert (m["held"], m["refused"], m["cap"]) == (3, 2, 3)
    sim.advance_time(10)
    assert ids(j) == [[1, 2, 3]]
    sim.advance_time(10)  # the next window's evaluation expires (acks) 1..3
    assert sorted(settled(j, "ack")) == [1, 2, 3]
    for i in (4, 5):  # replayed now that the window has room
        spout.feed([i], msg_id=i)
    sim.wait_idle()
    sim.advance_time(10)
    assert ids(j) == [[1, 2, 3], [4, 5]]


def test_processing_time_sessions_per_key(sim):
    """Sessions keyed by user, gap 5 s: u2's lone tuple (1 s) closes at 6 s, u1's two
    (0 s, 3 s) at 8 s; each runs once with its key, then its tuples are acked."""
    j = new_journal()
    bolt = Collect(j).with_session_window(Duration.seconds(5), key="user")
    spout, topology = build(bolt, j, ["id", "user"])
    sim.submit_topology("w", CONF, topology)
    spout.feed(["a", "u1"], msg_id="a")
    sim.wait_idle()
    sim.advance_time(1)
    spout.feed(["b", "u2"], msg_id="b")
    sim.wait_idle()
    sim.advance_time(2)
    spout.feed(["c", "u1"], msg_id="c")
    sim.wait_idle()
    sim.advance_time(2)  # t = 5
    assert windows(j) == []
    sim.advance_time(1)  # t = 6
    assert [(w["key"], w["ids"], w["start"], w["end"]) for w in windows(j)] == [
        ("u2", ["b"], 1000, 6000)
    ]
    assert settled(j, "ack") == ["b"]
    sim.advance_time(2)  # t = 8
    assert [(w["key"], w["ids"], w["start"], w["end"]) for w in windows(j)][1:] == [
        ("u1", ["a", "c"], 0, 8000)
    ]
    assert sorted(settled(j, "ack")) == ["a", "b", "c"]


def test_event_time_sessions_close_on_the_watermark(sim):
    """Event-time sessions, gap 10 ms, one per task: 100, 105 then 130 (watermark 130):
    the session [100, 105] closes (105 + 10 <= 130), [130] stays open."""
    j = new_journal()
    bolt = Collect(j).with_session_window(Duration.of(10)).with_timestamp_field("ts")
    spout, topology = build(bolt, j, ["id", "ts"])
    sim.submit_topology("w", CONF, topology)
    for i, ts in ((1, 100), (2, 105), (3, 130)):
        spout.feed([i, ts], msg_id=i)
    sim.wait_idle()
    sim.advance_time(1)
    assert [(w["ids"], w["start"], w["end"]) for w in windows(j)] == [([1, 2], 100, 115)]
    assert metric(sim)["sessions"] == 1


def test_detached_tuple_pickles_and_reads_like_a_tuple():
    """The late tuple's copy: values, fields, source; get by name; pickles as data."""
    import pickle

    from tupletree.topology.fields import Fields

    d = DetachedTuple([7, 600], Fields(["id", "ts"]), "src", "default", 3)
    again = pickle.loads(pickle.dumps(d))
    assert again == d and again.get("ts") == 600 and again[0] == 7 and len(again) == 2
    assert again.fields == ["id", "ts"] and again.source_task == 3
