"""Edges of the at-least-once machinery an adversarial review found (stop 40): simulated
time with sub-second periods and float steps, a ReliableSpout whose emit raises,
complete_topology over a BatchBolt, a component's override of the message timeout, and
wait_idle after an empty tracked batch. Each test failed before its fix; the docstrings
say what a user saw."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, BatchBolt, Bolt, Config, LocalCluster, TopologyBuilder
from tupletree.errors import InvalidTopologyError
from tupletree.testing import (
    AckFailTracker,
    FeederSpout,
    MockedSources,
    complete_topology,
    read_tuples,
)
from tupletree.topology.groupings import CustomStreamGrouping
from tupletree.topology.reliable_spout import ReliableSpout
from tupletree.windowing import Duration, WindowedBolt

from ..registry import Box


class NeverAcks(Bolt):
    def execute(self, tup: Any) -> None:
        pass


def test_subsecond_message_timeout_is_honoured_by_advance_time():
    """topology.message.timeout.secs accepts any positive number (0.5 passes config
    validation). docs/testing.md promises that ``advance_time`` fires "timeouts and ticks
    exactly" and that a tree "times out between one and two message timeouts after its
    emit". With a 0.5 s timeout, a tree a bolt never acks must have failed by t = 1.0.

    What the user sees: after ``advance_time(1.0)`` nothing failed; the fail only comes
    at t = 2.0 (four timeouts). advance_time moves the clock in 1 s steps and
    Worker.fire_timers fires each timer at most once per step (the real-time "fell
    behind: don't fire a burst" rule), so every periodic duty shorter than a second (the
    spout's and the acker's rotations) runs at most once per simulated second.
    """
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("s", feeder)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology(
            "t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 0.5}, b.create_topology()
        )
        feeder.feed([1], msg_id=1)
        assert cluster.wait_idle()
        cluster.advance_time(1.0)  # two message timeouts
        assert tracker.failed == {1}


class CountTicks(Bolt):
    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.box.get()["ticks"] = 0

    def execute(self, tup: Any) -> None:
        if tup.is_tick():
            self.box.get()["ticks"] += 1


def test_subsecond_tick_frequency_is_honoured_by_advance_time():
    """topology.tick.tuple.freq.secs accepts 0.25. ``advance_time(10)`` must deliver
    40 ticks ("firing timeouts and ticks exactly", docs/testing.md), as 40 calls of
    ``advance_time(0.25)`` do. What the user sees: 10 ticks, one per simulated second
    (same cause as the sub-second timeout: fire_timers fires each timer once per
    1 s step of advance_time)."""
    box = Box()
    b = TopologyBuilder()
    b.set_spout("s", FeederSpout(["n"]))
    b.set_bolt("ticks", CountTicks(box)).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology(
            "t", {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 0.25}, b.create_topology()
        )
        cluster.advance_time(10)
        assert box.get()["ticks"] == 40


# -- ReliableSpout: a message whose emit raises is neither replayed nor dead-lettered --


class FlakyGrouping(CustomStreamGrouping):
    """A custom grouping whose first choice fails (a routing table briefly unavailable),
    every later one succeeds. Each emitting task prepares its own copy."""

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.targets = target_tasks
        self.calls = 0

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("routing table briefly unavailable")
        return [self.targets[0]]


class OneMessage(ReliableSpout):
    def __init__(self, box: Box) -> None:
        self.box = box

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.sent = False
        self.box.get()["spout"] = self

    def next_message(self) -> tuple[Any, list[Any]] | None:
        if self.sent:
            return None
        self.sent = True
        return ("m1", [1])

    def on_ack(self, msg_id: Any) -> None:
        self.box.get().setdefault("acked", []).append(msg_id)


class AckAll(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_reliable_spout_message_whose_emit_raises_is_never_lost():
    """ReliableSpout promises (topology/reliable_spout.py, docs/topologies.md) to keep a
    message until it is acked, replay it on fail up to ``max_retries`` and then hand it to
    ``dead_letter`` "instead of dropping it silently".

    What the user sees: when the emit of a message raises (here a custom grouping's
    transient error), the error is reported for next_tuple and then nothing more happens
    to the message, ever: it is not re-emitted, never acked, never dead-lettered, and
    ``in_flight`` counts it forever. ReliableSpout.next_tuple puts the message into
    ``_in_flight`` before ``collector.emit`` and does nothing when emit raises (and the
    replay path has already popped it from ``_replay``), so no tree and no timeout exist
    to ever bring it back.
    """
    box = Box()
    b = TopologyBuilder()
    b.set_spout("s", OneMessage(box))
    b.set_bolt("sink", AckAll()).custom_grouping("s", FlakyGrouping())
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5}, b.create_topology())
        assert cluster.wait_idle()
        cluster.advance_time(60)  # many message timeouts
        spout = box.get()["spout"]
        settled = box.get().get("acked", []) + [m for m, _, _ in spout.dead_letters]
        assert settled == ["m1"], (spout.in_flight, cluster.errors("t")[:1])


# -- complete_topology cannot run a BatchBolt: every tree is failed ------------------


class Upper(BatchBolt):
    outputs = ["w"]

    def execute_batch(self, batch: Any, collector: Any) -> None:
        for i, s in enumerate(batch.column("n")):
            collector.emit([s.upper()], row=i)


def test_complete_topology_with_a_batch_bolt_acks_its_tuples():
    """complete_topology (tupletree.testing) is the documented way to check which mocked
    tuples were acked and which failed (docs/testing.md). A BatchBolt acks every row when
    ``execute_batch`` returns (docs/batch-bolts.md), so both tuples must be acked and the
    uppercased words captured.

    What the user sees: ``results.failed == {'s': {0, 1}}``, nothing captured for 'up',
    and an AttributeError ("'Upper' object has no attribute 'execute'") per tuple:
    testing/complete.py ``_capturing`` wraps every non-spout, non-BasicBolt component in
    ``_CapturingBolt``, which has no ``execute_batch`` and is no BatchBolt, so the
    BatchBolt is run as a plain Bolt whose execute raises, failing every tree.
    """
    b = TopologyBuilder()
    b.set_spout("s", FeederSpout(["n"]))
    b.set_bolt("up", Upper()).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        results = complete_topology(
            cluster, b.create_topology(), MockedSources({"s": [["a"], ["b"]]})
        )
    assert results.failed == {"s": set()}
    assert results.acked == {"s": {0, 1}}
    assert sorted(read_tuples(results, "up")) == [["A"], ["B"]]


def test_advance_time_in_tenths_reaches_the_timeout():
    """With a 0.5 s message timeout, a tree a bolt never acks fails "between one and two
    message timeouts after its emit" (docs/testing.md). Advancing the simulated clock ten
    times by 0.1 s is advancing it 1 s (two timeouts), so the tree must have failed.

    What the user sees: no fail. SimulatedClock.advance adds floats (0.1 ten times is
    0.9999999999999999), so the spout's rotation due at exactly 1.0 does not fire; the
    same drift skips a tick due at 1.0 (tick frequency 1 s, ten advances of 0.1 s: no
    tick). Time in simulated mode must not depend on how the test slices it.
    """
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("s", feeder)
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology(
            "t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 0.5}, b.create_topology()
        )
        feeder.feed([1], msg_id=1)
        assert cluster.wait_idle()
        for _ in range(10):
            cluster.advance_time(0.1)
        assert tracker.failed == {1}


# -- a component-level message timeout passes the checks but is not the one enforced --


class WindowSink(WindowedBolt):
    outputs = ["sum"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        pass


def test_a_components_message_timeout_is_refused_naming_the_topologys_setting():
    """A windowed bolt whose window holds tuples longer than the message timeout is
    refused at submit; a user who set ``topology.message.timeout.secs`` = 120 on the bolt
    alone (``add_configuration``) got it through, since the check read the component's
    config, while the spout and acker time trees out by the topology's 30 s: the tuple
    was replayed while still in its window. Storm drops the override silently; now it
    is refused at build, naming the key and where to set it."""
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["n"]))
    b.set_bolt("w", WindowSink().with_tumbling_window(Duration.seconds(60))).shuffle_grouping(
        "src"
    ).add_configuration(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 120)
    with pytest.raises(
        InvalidTopologyError,
        match=r"component 'w': config key 'topology.message.timeout.secs' is the "
        r"topology's, not a component's .*set it in the topology's config",
    ):
        b.create_topology()


# -- an empty tracked batch makes wait_idle return with work queued --------------------


class AckEverything(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_wait_idle_after_an_empty_tracked_batch_settles_everything():
    """``emit_batch([], msg_id)`` is one tree with no tuples: its INIT (value 0) goes to
    the acker, which acks it at once (as Storm acks a spout tuple with no targets).
    ``wait_idle`` promises to "return once nothing is queued or executing and the spouts
    emitted nothing in their last round" (LocalCluster.wait_idle).

    What the user sees: after feeding an empty batch and one tuple, ``wait_idle()``
    returns True with nothing acked, the INIT still queued at the acker and the fed
    tuple never emitted; a second ``wait_idle()`` finishes the job. SpoutExecutor.poll
    decides whether a ``next_tuple`` call did anything by ``metrics.emitted`` alone, which
    an empty batch does not move (emit_batch adds ``len(rows)``), so the call counts as
    unproductive, poll stops, and Worker.run_round reports no progress although the
    spout has just queued an INIT and a pending tree.
    """
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("s", feeder)
    b.set_bolt("sink", AckEverything()).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        feeder.feed_batch([], msg_id="empty")
        feeder.feed([1], msg_id=1)
        assert cluster.wait_idle()
        assert tracker.acked == {"empty", 1}
