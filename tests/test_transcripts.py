"""The reliability transcripts (tests/transcripts.py) on the pure ledger, in many message
orders, and end to end on every cluster: one table of expected outcomes for all."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Bolt, Config, TopologyBuilder
from tupletree.testing import AckFailTracker, FeederSpout

from .transcripts import ACK, FAIL, TRANSCRIPTS, play_on_ledger


@pytest.mark.parametrize("name", sorted(TRANSCRIPTS))
def test_transcript_on_the_ledger_in_any_message_order(name):
    """Every shuffle of a tree's messages (init included) reaches the expected outcome."""
    plan, expected = TRANSCRIPTS[name]
    outcomes = {play_on_ledger(plan, seed) for seed in range(200)}
    assert outcomes == {expected}


class ScriptBolt(Bolt):
    """Executes the plan a tuple carries: emits its children, then acks, fails or holds."""

    outputs = ["name", "plan"]

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held: list[Any] = []  # a held tuple stays referenced, as a real bolt's would

    def execute(self, tup):
        name, plan = tup.values
        anchors = [tup, tup] if len(plan) > 2 else tup
        for child in plan[1]:
            self.collector.emit([name, child], anchors=anchors)
        if plan[0] == ACK:
            self.collector.ack(tup)
        elif plan[0] == FAIL:
            self.collector.fail(tup)
        else:
            self.held.append(tup)


@pytest.mark.standalone
def test_transcripts_on_every_cluster(any_cluster):
    """All transcripts at once on a topology of ScriptBolts (two tasks per level, so on
    Spark the trees cross workers): acked, failed and timed-out trees as the table says,
    each reported to the spout that emitted it."""
    cluster = any_cluster
    tracker = AckFailTracker()
    feeder = FeederSpout(["name", "plan"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("plans", feeder)
    b.set_bolt("level1", ScriptBolt(), parallelism=2).shuffle_grouping("plans")
    b.set_bolt("level2", ScriptBolt(), parallelism=2).shuffle_grouping("level1")
    b.set_bolt("level3", ScriptBolt(), parallelism=2).shuffle_grouping("level2")
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10, Config.TOPOLOGY_ACKER_EXECUTORS: 2}
    cluster.submit_topology("transcripts", conf, b.create_topology())
    for name, (plan, _) in TRANSCRIPTS.items():
        feeder.feed([name, plan], msg_id=name)
    expect = {
        outcome: {name for name, (_, want) in TRANSCRIPTS.items() if want == outcome}
        for outcome in ("acked", "failed", "timed_out")
    }
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == expect["acked"]), tracker.acked
    assert cluster.until(lambda: tracker.failed == expect["failed"]), tracker.failed
    cluster.advance_time(35)  # past every timeout
    assert cluster.until(lambda: tracker.failed == expect["failed"] | expect["timed_out"])
    assert tracker.acked == expect["acked"]

    def timed_out() -> int:
        return cluster.metrics("transcripts")["plans"]["timed_out"]

    assert cluster.until(lambda: timed_out() == len(expect["timed_out"])), timed_out()
