"""CoordinatedBolt's per-request state: it expires with the message timeout (simulated
time), calling TimeoutCallback and failing what it holds; TickExpiry's bound."""

from __future__ import annotations

from typing import Any

from tupletree import Bolt, Config, TopologyBuilder
from tupletree.drpc import CoordinatedBolt
from tupletree.drpc.coordinated_bolt import COORD_STREAM, TRACKED_METRIC
from tupletree.drpc.expiry import TickExpiry
from tupletree.testing import AckFailTracker, FeederSpout

from ..registry import new_journal
from .support import IdBolt, TimeoutRecorder, entries

TICK = Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS  # what drives the expiry


class HoldAndEmit(Bolt):
    """Emits its input on (anchored) but never acks it: the first bolt never finishes."""

    outputs = ["request", "args"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.collector.emit([tup[0], tup[1]], tup)
        self.held.append(tup)


def tracked(cluster: Any, name: str, component: str) -> int:
    per_task = cluster.metrics(name)[component]["custom"][TRACKED_METRIC]
    return sum(per_task.values())


def build(first: Bolt, key: str) -> tuple[Any, FeederSpout, AckFailTracker]:
    tracker = AckFailTracker()
    feeder = FeederSpout(["request", "args"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("b0", CoordinatedBolt(first), 2).shuffle_grouping("src").add_configuration(TICK, 1)
    b.set_bolt("b1", CoordinatedBolt(TimeoutRecorder(key), {"b0": "single"}), 2).shuffle_grouping(
        "b0"
    ).direct_grouping("b0", COORD_STREAM).add_configuration(TICK, 1)
    return b.create_topology(), feeder, tracker


def test_unfinished_request_state_expires_with_message_timeout(sim_cluster):
    """Unfinished requests' state is dropped after the message timeout; timeout_id is called."""
    key = new_journal()
    topology, feeder, tracker = build(HoldAndEmit(), key)
    sim_cluster.submit_topology("c", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topology)
    feeder.feed(["r1", "a"], msg_id=1)
    feeder.feed(["r2", "b"], msg_id=2)
    assert sim_cluster.wait_idle()
    assert tracked(sim_cluster, "c", "b0") == 2
    assert tracked(sim_cluster, "c", "b1") == 2
    sim_cluster.advance_time(5)
    assert tracked(sim_cluster, "c", "b1") == 2
    assert entries(key) == []
    sim_cluster.advance_time(7)
    assert tracked(sim_cluster, "c", "b0") == 0
    assert tracked(sim_cluster, "c", "b1") == 0
    assert sorted(entries(key)) == ["r1", "r2"]
    sim_cluster.advance_time(20)
    assert tracker.failed == {1, 2}


def test_finished_requests_leave_no_state(sim_cluster):
    """Once a request finished on a task, that task holds nothing for it."""
    key = new_journal()
    topology, feeder, _ = build(IdBolt(), key)
    sim_cluster.submit_topology("c", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topology)
    for i in range(20):
        feeder.feed([f"r{i}", "x"], msg_id=i)
    assert sim_cluster.wait_idle()
    assert tracked(sim_cluster, "c", "b0") == 0
    # b1 (TimeoutRecorder, not a FinishedCallback) finished too: one report, counts match.
    assert tracked(sim_cluster, "c", "b1") == 0
    assert sim_cluster.metrics("c")["b1"]["executed"] >= 20 + 2 * 20  # data + coord reports


def test_tick_expiry_bound():
    """An entry expires at the first tick at or after timeout_secs of its life."""
    m: TickExpiry[str] = TickExpiry(3)
    m.put("a", "A")
    assert m.tick(1) == []
    m.put("b", "B")
    assert m.tick(1) == []
    assert m.tick(1) == [("a", "A")]
    assert m.pop("b") == "B"
    assert m.tick(5) == []
    m.put("c", "C")
    m.tick(2)
    m.put("c", "C2")  # replacing restarts the countdown
    assert m.tick(2) == []
    assert m.tick(1) == [("c", "C2")]
    assert len(m) == 0
