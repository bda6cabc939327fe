"""What an adversarial review of windowed acking and DRPC coordination (CoordinatedBolt,
JoinResult) found (stop 40). Each test failed before its fix; the docstrings say what a
user saw."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, Bolt, Config, TopologyBuilder
from tupletree.drpc import CoordinatedBolt, FinishedCallback, TimeoutCallback
from tupletree.drpc.bolts import JoinResult
from tupletree.drpc.coordinated_bolt import COORD_STREAM, TRACKED_METRIC
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.windowing import Count, Duration

from ..registry import entries, record
from ..windowing.support import Collect, feeder, new_journal, settled, windows

CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}


def _window_topology(bolt: Any, j: Any, fields: list[str]) -> Any:
    spout = feeder(j, fields)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", bolt).shuffle_grouping("src")
    return spout, b.create_topology()


def test_an_event_time_count_window_after_a_failed_window_fires_the_next_one(
    sim_cluster,
):
    """Event-time tumbling Count(3) window; execute raises for the first window [1,2,3].

    Promised (executor.py docstring, docs/windowing.md): the failed window's tuples are
    failed and leave the window, "later windows never hold it"; every other tuple is
    acked only once it left a window it was in (Storm's rule). The user sees instead:
    tuples 4, 5, 6 are acked (the spout forgets them) without ever being in a window:
    the next window is never evaluated. WatermarkCountEviction.removed ignores the
    removed events, so the next context counts them again (current = processed +
    sliding_count = 6) and the scan expires 4, 5, 6 as "over the threshold".
    """
    sim = sim_cluster
    j = new_journal()
    bolt = (
        Collect(j, poison=(2,))
        .with_tumbling_window(Count(3))
        .with_timestamp_field("ts")
        .with_watermark_interval(Duration.of(100))
    )
    spout, topology = _window_topology(bolt, j, ["id", "ts"])
    sim.submit_topology("w", CONF, topology)
    for i in range(1, 8):  # ts 10..70; 7 moves the watermark past 6
        spout.feed([i, i * 10], msg_id=i)
    sim.wait_idle()
    sim.advance_time(1)
    sim.wait_idle()
    assert sorted(settled(j, "fail")) == [1, 2, 3]
    assert settled(j, "ack") == []  # 4..6 are in the window still to come; 7 waits
    assert [w["ids"] for w in windows(j)] == [[1, 2, 3], [4, 5, 6]]


class _AckAll(Bolt):
    """A sink acking everything (stands for return-results)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


def test_a_second_result_after_pairing_is_acked_not_held_until_it_fails(sim_cluster):
    """The last bolt of a linear DRPC topology emits two results for one request, and
    the request's return info reached join-result first (the usual order: it comes
    straight from prepare-request, the results through the chain).

    Promised (drpc/bolts.py JoinResult): "A second result for one request: the first
    one wins. Ack it so it does not hold the tree open." The user sees instead: the
    second result is held for the whole message timeout and then FAILED, so the
    request's tuple tree (already answered) fails at its spout. Cause: once the first
    result paired, both halves were popped, so the second result is not recognised as
    a second one and is stored as an unpaired half until expiry fails it.
    """
    sim = sim_cluster
    rets, results = AckFailTracker(), AckFailTracker()
    prep = FeederSpout(["request", "return-info"], tracker=rets)
    last = FeederSpout(["request", "result"], tracker=results)
    b = TopologyBuilder()
    b.set_spout("prep", prep)
    b.set_spout("last", last)
    b.set_bolt("join", JoinResult("prep")).fields_grouping("prep", ["request"]).fields_grouping(
        "last", ["request"]
    ).add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    b.set_bolt("ret", _AckAll()).shuffle_grouping("join")
    sim.submit_topology("j", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, b.create_topology())
    prep.feed([7, "info"], msg_id="ret")
    sim.wait_idle()
    last.feed([7, "first"], msg_id="r1")
    sim.wait_idle()
    last.feed([7, "second"], msg_id="r2")
    sim.wait_idle()
    assert rets.acked == {"ret"} and results.acked >= {"r1"}
    sim.advance_time(15)  # past the message timeout: what JoinResult still holds expires
    sim.wait_idle()
    assert results.failed == set()
    assert results.acked == {"r1", "r2"}


class _Fanout(BasicBolt):
    """[request, args] -> [request, "good"] and [request, "bad"]."""

    outputs = ["request", "val"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], "good"])
        collector.emit([tup[0], "bad"])


class _PerRequestState(Bolt, FinishedCallback, TimeoutCallback):
    """Keeps per-request state, dropped in finished_id or timeout_id (TimeoutCallback's
    purpose); fails the tuples whose value is "bad"."""

    outputs = ["request", "n"]

    def __init__(self, journal: Any) -> None:
        self.journal = journal

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.state: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.state[tup[0]] = self.state.get(tup[0], 0) + 1
        if tup[1] == "bad":
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        record(self.journal, ("finished", request_id))
        self.state.pop(request_id, None)

    def timeout_id(self, request_id: Any) -> None:
        record(self.journal, ("timeout", request_id))
        self.state.pop(request_id, None)


def test_a_failed_requests_state_expires_with_timeout_id(sim_cluster):
    """A request one of whose tuples the bolt fails never finishes on that task.

    Promised (coordinated_bolt.py TimeoutCallback): "hear timeout_id(request_id) when a
    request's state expired unfinished (after the message timeout)"; Storm's
    CoordinatedBolt calls timeoutId for every expiring entry that did not finish
    (``if(!val.finished)``; here Storm's entry, re-made by the count report that
    follows the failure, expires and gets it). The user sees instead: the
    request's state expires (tracked requests drop to 0) but timeout_id is never
    called, so a bolt that frees its per-request state in timeout_id (as it must for
    requests that never finish) leaks it for every failed request. Cause:
    CoordinatedBolt._expire skips tracks with ``failed`` set.
    """
    sim = sim_cluster
    j = new_journal()
    tracker = AckFailTracker()
    spout = FeederSpout(["request", "args"], tracker=tracker)
    tick = Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("b0", CoordinatedBolt(_Fanout())).shuffle_grouping("src").add_configuration(tick, 1)
    b.set_bolt("b1", CoordinatedBolt(_PerRequestState(j), {"b0": "single"})).shuffle_grouping(
        "b0"
    ).direct_grouping("b0", COORD_STREAM).add_configuration(tick, 1)
    sim.submit_topology("c", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, b.create_topology())
    spout.feed(["r1", "x"], msg_id=1)
    sim.wait_idle()
    assert tracker.failed == {1}
    sim.advance_time(15)  # past the message timeout: b1's state for r1 expires
    sim.wait_idle()
    assert sum(sim.metrics("c")["b1"]["custom"][TRACKED_METRIC].values()) == 0
    assert entries(j) == [("timeout", "r1")]


def test_a_sessions_tuples_do_not_time_out_while_it_is_open(sim_cluster):
    """A session window (gap 4 s) whose session stays open for 24 s (a tuple every 3 s),
    message timeout 10 s: the submit check passes (the gap is under the timeout).

    Promised (docs/windowing.md): a window acks its tuples as they leave it; "a tuple's
    tree times out while it is held ... the submit checks below exist to prevent that"
    and, for sessions, "a gap longer than the message timeout is refused". The user
    sees instead: tuples 1..4 are FAILED at their spout (replayed: duplicates) while
    still in the open session, which then fires holding them. Nothing can keep them
    alive: the bolt's execute runs only when the session closes, and the executor
    (windowing/executor.py) never resets the timeouts of the tuples a session holds,
    so a session longer than the message timeout always replays its first tuples.
    """
    sim = sim_cluster
    j = new_journal()
    spout, topology = _window_topology(
        Collect(j).with_session_window(Duration.seconds(4)), j, ["id"]
    )
    sim.submit_topology("s", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topology)
    for i in range(1, 9):
        spout.feed([i], msg_id=i)
        sim.wait_idle()
        sim.advance_time(3)
    sim.advance_time(10)  # the session closes (4 s after tuple 8) and fires
    sim.wait_idle()
    assert [w["ids"] for w in windows(j)] == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert settled(j, "fail") == []
    assert sorted(settled(j, "ack")) == [1, 2, 3, 4, 5, 6, 7, 8]
