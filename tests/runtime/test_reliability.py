"""Reliability behaviour of the runtime beyond Storm's scenarios: acker affinity,
the capacity guard, double acks, anchoring to a settled tuple."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree import BasicBolt, Bolt, Config, Spout, TopologyBuilder
from tupletree.reliability.ids import IdGenerator
from tupletree.runtime.collectors import SpoutOutputCollector, TaskWiring
from tupletree.testing import AckFailTracker, FeederSpout

from ..registry import Box


def steering_collector(n_ackers: int, local: list[int]) -> SpoutOutputCollector:
    wiring = TaskWiring(
        "spout",
        1,
        {},
        {},
        acker_tasks=list(range(100, 100 + n_ackers)),
        ids=IdGenerator(1),
        local_ackers=local,
    )
    return SpoutOutputCollector(wiring, None)


@given(
    root=st.integers(1, 2**64 - 1),
    n=st.integers(2, 9),
    data=st.data(),
)
def test_steered_roots_stay_random_64_bit_and_pick_a_local_acker(root, n, data):
    """A steered root is non-zero, fits 64 bits, keeps all but the low residue of the
    random id, and maps (root mod ackers) to one of this worker's ackers."""
    local = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n - 1)))
    collector = steering_collector(n, local)
    steered = collector._steer(root, local)
    assert 0 < steered < 2**64
    assert steered % n in local
    assert abs(steered - root) < 2 * n


def test_no_steering_when_every_acker_is_local():
    """With all ackers on this worker the random root is used as drawn."""
    assert steering_collector(3, [0, 1, 2])._local_ackers is None


class NeverAcks(Bolt):
    def execute(self, tup: Any) -> None:
        pass


def test_capacity_guard_fails_new_trees_at_once(sim_cluster):
    """Past topology.acker.high.water pending trees, new trees fail immediately
    (no timeout wait), so an acker's memory stays bounded when bolts never ack."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("feed")
    conf = {Config.TOPOLOGY_ACKER_HIGH_WATER: 5, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}
    sim_cluster.submit_topology("guard", conf, b.create_topology())
    for i in range(8):
        feeder.feed([i], msg_id=i)
    assert sim_cluster.wait_idle()
    assert tracker.failed == {5, 6, 7}
    assert tracker.acked == set()


class DoubleAcker(Bolt):
    """Acks every input twice, then tries to anchor to it: the second ack is ignored and
    the late anchor is reported as an error."""

    def __init__(self, box: Box) -> None:
        self.box = box

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)
        self.collector.ack(tup)
        try:
            self.collector.emit([tup[0]], anchors=tup)
        except Exception as exc:
            self.box.get().setdefault("errors", []).append(str(exc))


def test_double_ack_is_harmless_and_late_anchor_is_an_error(sim_cluster):
    """A second ack of the same tuple does not corrupt the tree (it still completes), and
    anchoring to an already acked tuple raises an error naming the component."""
    box = Box()
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("double", DoubleAcker(box)).shuffle_grouping("feed")
    sim_cluster.submit_topology("dbl", {}, b.create_topology())
    feeder.feed([1], msg_id="a")
    assert sim_cluster.wait_idle()
    assert tracker.acked == {"a"}
    (error,) = box.get()["errors"]
    assert "'double'" in error and "already acked" in error


def test_feeding_a_spout_wakes_its_worker(sim_cluster):
    """FeederSpout.feed calls its tasks' context.wakeup, which reaches the worker's wake
    hook (the real-time runner's event), so an idle worker does not sleep out its pause."""
    feeder = FeederSpout(["n"])
    b = TopologyBuilder()
    b.set_spout("feed", feeder, parallelism=2)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("feed")
    sim_cluster.submit_topology("wake", {}, b.create_topology())
    woken: list[int] = []
    sim_cluster._workers["wake"].wake = lambda: woken.append(1)
    feeder.feed([1])
    assert len(woken) == 2  # one per spout task
    sim_cluster.kill_topology("wake")
    feeder.feed([2])
    assert len(woken) == 2  # closed tasks unregister


class FailsOnFirstTask(Bolt):
    """Fails inputs marked "storm" on the component's first task, acks everything else:
    a tree sent to every task fails by one branch while its other branches ack."""

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.first = context.task_id == context.this_component_tasks()[0]

    def execute(self, tup: Any) -> None:
        if self.first and tup[0] == "storm":
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_failure_storm_does_not_fail_healthy_trees(sim_cluster):
    """Issue 13 (3) end to end: 1000 trees each failed by one branch (the other two
    branches' acks reach the acker after the fail), then 600 healthy trees, with
    topology.acker.high.water 1000: every healthy tree is acked."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["kind"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("branches", FailsOnFirstTask(), parallelism=3).all_grouping("feed")
    conf = {Config.TOPOLOGY_ACKER_HIGH_WATER: 1000}
    sim_cluster.submit_topology("storm", conf, b.create_topology())
    for i in range(1000):
        feeder.feed(["storm"], msg_id=("storm", i))
    assert sim_cluster.wait_idle()
    for i in range(600):
        feeder.feed(["fine"], msg_id=("fine", i))
    assert sim_cluster.wait_idle()
    assert tracker.failed == {("storm", i) for i in range(1000)}
    assert tracker.acked == {("fine", i) for i in range(600)}


class OwnMessagesSpout(Spout):
    """Emits ``count`` tracked tuples with msg ids ``(its task id, i)`` and files every
    ack and fail it hears under its own task id."""

    outputs = ["n"]

    def __init__(self, box: Box, count: int) -> None:
        self.box, self.count = box, count

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.task, self.collector, self.sent = context.task_id, collector, 0
        self.heard = self.box.get().setdefault(self.task, {"acked": [], "failed": []})

    def next_tuple(self) -> None:
        if self.sent < self.count:
            self.collector.emit([self.sent], msg_id=(self.task, self.sent))
            self.sent += 1

    def ack(self, msg_id: Any) -> None:
        self.heard["acked"].append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.heard["failed"].append(msg_id)


class PassOn(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


@pytest.mark.parametrize("ackers", [1, 2])
def test_each_spout_task_hears_the_acks_of_its_own_messages(sim_cluster, ackers):
    """docs/topologies.md's promise, "ack/fail delivered to the very spout task that emitted the
    tuple": with three spout tasks, each hears an ack for every message it emitted and
    for nothing else, before any timeout could fail them."""
    box = Box()
    b = TopologyBuilder()
    b.set_spout("numbers", OwnMessagesSpout(box, 20), parallelism=3)
    b.set_bolt("pass", PassOn(), parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("sink", PassOn()).shuffle_grouping("pass")
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: ackers}
    sim_cluster.submit_topology("own", conf, b.create_topology())
    assert sim_cluster.wait_idle()
    heard = box.get()
    assert len(heard) == 3
    for task, got in heard.items():
        assert sorted(got["acked"]) == [(task, i) for i in range(20)], f"spout task {task}"
        assert got["failed"] == []
