"""Promises of the runtime that a mutation check found untested (issue 16): each test
here fails when the promise is broken by a one-line change.

- a plain Bolt whose execute raises fails its input at once and reports the error (it
  does not leave the tree to time out);
- shuffle grouping gives every target task an equal share;
- receive-buffer backpressure stops the spouts while a bolt's inbox is over
  ``topology.executor.receive.buffer.size``.
"""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, Bolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.runtime.worker import Worker
from tupletree.testing import AckFailTracker, FeederSpout


class PlainBoltRaises(Bolt):
    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup[0] == "bad":
            raise ValueError("cannot handle 'bad'")
        self.collector.ack(tup)


def test_a_plain_bolt_raising_fails_its_input_at_once_and_reports_it(sim_cluster):
    tracker = AckFailTracker()
    feeder = FeederSpout(["w"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("plain", PlainBoltRaises()).shuffle_grouping("feed")
    sim_cluster.submit_topology(
        "t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}, b.create_topology()
    )
    feeder.feed(["bad"], msg_id="bad")
    feeder.feed(["good"], msg_id="good")
    assert sim_cluster.wait_idle() is True  # no simulated time passes
    assert tracker.failed == {"bad"} and tracker.acked == {"good"}
    metrics = sim_cluster.metrics("t")
    assert metrics["feed"]["timed_out"] == 0
    assert metrics["plain"]["failed"] == 1 and metrics["plain"]["errors"] == 1
    (error,) = sim_cluster.errors("t")
    assert "plain[task" in error and "execute: ValueError: cannot handle 'bad'" in error


class Numbers(Spout):
    outputs = ["n"]

    def __init__(self, total: int, per_call: int = 1) -> None:
        self.total = total
        self.per_call = per_call

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0
        self.calls = 0

    def next_tuple(self) -> None:
        self.calls += 1
        for _ in range(self.per_call):
            if self.n < self.total:
                self.n += 1
                self.collector.emit([self.n], msg_id=self.n)


class Nothing(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_shuffle_grouping_gives_every_task_an_equal_share(sim_cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(1000))
    b.set_bolt("sink", Nothing(), parallelism=5).shuffle_grouping("numbers")
    sim_cluster.submit_topology("t", {}, b.create_topology())
    assert sim_cluster.wait_idle() is True
    metrics = sim_cluster.metrics("t")
    assert metrics["numbers"]["acked"] == 1000
    shares = [task["executed"] for task in metrics["sink"]["tasks"].values()]
    assert shares == [200] * 5


def test_a_bolt_inbox_over_the_receive_buffer_stops_the_spouts():
    """Each next_tuple emits 100 tuples; the bolt takes 1 per round. With a buffer of
    10 the spout must not be polled again until the bolt's inbox is back under it."""
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(10_000, per_call=100))
    b.set_bolt("slow", Nothing()).shuffle_grouping("numbers")
    conf = validate(
        {
            Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: 10,
            Config.TOPOLOGY_EXECUTOR_BATCH_SIZE: 1,
        }
    )
    worker = Worker("w", b.create_topology(), conf, lambda: 0.0)
    worker.start()
    (spout,) = worker.spouts
    numbers = spout.spout
    fullest_at_poll: list[int] = []
    next_tuple = numbers.next_tuple

    def watched() -> None:
        fullest_at_poll.append(max(len(ex.inbox) for ex in worker.bolts))
        next_tuple()

    numbers.next_tuple = watched
    for _ in range(1000):
        worker.run_round()
    assert len(fullest_at_poll) >= 3  # polled again each time the inboxes drained
    assert max(fullest_at_poll) <= 10, fullest_at_poll
