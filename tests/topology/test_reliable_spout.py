"""ReliableSpout: replay on fail up to max_retries, then the dead-letter hook."""

from __future__ import annotations

from typing import Any

from tupletree import Bolt, Config, ReliableSpout, TopologyBuilder

from ..registry import Box


class Messages(ReliableSpout):
    outputs = ["n"]
    max_retries = 2

    def __init__(self, count: int, box: Box) -> None:
        self.count = count
        self.box = box

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.next = 0

    def next_message(self) -> tuple[Any, list[Any]] | None:
        if self.next >= self.count:
            return None
        self.next += 1
        return self.next, [self.next]

    def on_ack(self, msg_id: Any) -> None:
        self.box.get().setdefault("acked", []).append(msg_id)

    def dead_letter(self, msg_id: Any, values: list[Any], failures: int) -> None:
        self.box.get().setdefault("dead", []).append((msg_id, values, failures))


class FailsSome(Bolt):
    """Fails message 2 always, message 3 the first time only; acks the rest."""

    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen: dict[int, int] = {}

    def execute(self, tup: Any) -> None:
        n = tup[0]
        self.seen[n] = self.seen.get(n, 0) + 1
        self.box.get().setdefault("executions", []).append(n)
        if n == 2 or (n == 3 and self.seen[n] == 1):
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_replays_then_dead_letters(sim_cluster):
    """A failed message is replayed with the same values; after max_retries failures it
    reaches dead_letter instead of being dropped; the others are acked once."""
    box = Box()
    b = TopologyBuilder()
    b.set_spout("src", Messages(4, box))
    b.set_bolt("work", FailsSome(box)).shuffle_grouping("src")
    sim_cluster.submit_topology(
        "r", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, b.create_topology()
    )
    assert sim_cluster.wait_idle()
    state = box.get()
    assert sorted(state["acked"]) == [1, 3, 4]
    assert state["dead"] == [(2, [2], 3)]  # first try + 2 retries
    assert state["executions"].count(2) == 3
    assert state["executions"].count(3) == 2


def test_timeouts_are_replayed_too(sim_cluster):
    """A message whose tree times out is replayed like an explicit failure."""
    box = Box()

    b = TopologyBuilder()
    b.set_spout("src", Messages(1, box))
    b.set_bolt("sink", NeverAcks(box)).shuffle_grouping("src")
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}
    sim_cluster.submit_topology("t", conf, b.create_topology())
    sim_cluster.advance_time(25)
    assert box.get()["executions"].count(1) >= 2
    assert "dead" not in box.get()
    sim_cluster.advance_time(60)
    assert box.get()["dead"] == [(1, [1], 3)]


class NeverAcks(Bolt):
    def __init__(self, box: Box) -> None:
        self.box = box

    def execute(self, tup: Any) -> None:
        self.box.get().setdefault("executions", []).append(tup[0])


class ChangesValuesThenFailsOnce(Bolt):
    """Appends to the tuple's values (its own business) and fails the first delivery."""

    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.first = True

    def execute(self, tup: Any) -> None:
        self.box.get().setdefault("received", []).append(list(tup.values))
        tup.values.append("scribbled")
        if self.first:
            self.first = False
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_replay_sends_the_values_as_first_emitted(sim_cluster):
    """A bolt that changes a tuple's values list does not change what the spout keeps
    for replay: inside a worker tuples are not copied, so the spout emits a copy."""
    box = Box()
    b = TopologyBuilder()
    b.set_spout("src", Messages(1, box))
    b.set_bolt("work", ChangesValuesThenFailsOnce(box)).shuffle_grouping("src")
    sim_cluster.submit_topology("v", {}, b.create_topology())
    assert sim_cluster.wait_idle()
    assert box.get()["received"] == [[1], [1]]
    assert box.get()["acked"] == [1]
