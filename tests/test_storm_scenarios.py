"""Storm's integration scenarios (storm-core's integration tests), ported to tupletree.

The scenarios, not the code: each one builds the same topology Storm's test builds and
checks the same facts, with a 10 s message timeout, on every cluster (the ``cluster``
fixture: LocalCluster in simulated time, where timeouts take milliseconds, LocalCluster
in real time and SparkCluster, with periods scaled down; tests/clusters.py).

Components are copied per task (pickled, and on Spark into other processes), so they
report what they see through journals (SharedLists) they carry, not through their own
attributes.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

import pytest

from tupletree import (
    BasicBolt,
    Bolt,
    Config,
    FailedException,
    Spout,
    TopologyBuilder,
)
from tupletree.testing import (
    AckFailTracker,
    FeederSpout,
    MockedSources,
    complete_topology,
    read_tuples,
)

from .registry import entries, new_journal, record

TIMEOUT_CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}


def is_tick(tup: Any) -> bool:
    return tup.source_component == "__system" and tup.source_stream == "__tick"


def multiset(rows: list[list[Any]]) -> Counter:
    return Counter(tuple(r) for r in rows)


@pytest.fixture
def cluster(any_cluster):
    return any_cluster


# -- components (module level, so they pickle) ----------------------------------------


class WordSpout(Spout):
    """Storm's TestWordSpout: emits words forever, untracked (mocked in these tests)."""

    WORDS = ("nathan", "mike", "jackson", "golda", "bertels")

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.i = 0

    def next_tuple(self):
        self.collector.emit([self.WORDS[self.i % len(self.WORDS)]])
        self.i += 1


class WordCounter(BasicBolt):
    """Storm's TestWordCounter: emits [word, times seen so far]."""

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context):
        self.counts: dict[str, int] = {}

    def execute(self, tup, collector):
        word = tup[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        collector.emit([word, self.counts[word]])


class GlobalCount(Bolt):
    """Storm's TestGlobalCount: emits the number of tuples seen so far."""

    outputs = ["count"]

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.count = 0

    def execute(self, tup):
        self.count += 1
        self.collector.emit([self.count], anchors=tup)
        self.collector.ack(tup)


class AggregatesCounter(Bolt):
    """Storm's TestAggregatesCounter: keeps word -> latest count, emits their sum."""

    outputs = ["agg-global"]

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts: dict[str, int] = {}

    def execute(self, tup):
        self.counts[tup[0]] = tup[1]
        self.collector.emit([sum(self.counts.values())], anchors=tup)
        self.collector.ack(tup)


class TaskWordBolt(BasicBolt):
    """Emits [its own task id, word]."""

    outputs = ["task", "word"]

    def prepare(self, conf, context):
        self.task = context.task_id

    def execute(self, tup, collector):
        collector.emit([self.task, tup[0]])


class AckEveryOther(Bolt):
    """Storm's ack-every-other: acks the 1st, 3rd, 5th ... tuple, never the others."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.state = -1

    def execute(self, tup):
        self.state = -self.state
        if self.state > 0:
            self.collector.ack(tup)


class ResetTimeoutBolt(Bolt):
    """Holds each tuple, resets its timeout on every tick, acks it after ``hold_ticks``."""

    def __init__(self, hold_ticks: int, journal: str) -> None:
        self.hold_ticks = hold_ticks
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held = None
        self.ticks = 0

    def execute(self, tup):
        if is_tick(tup):
            record(self.journal, "tick")
            if self.held is None:
                return
            self.ticks += 1
            if self.ticks >= self.hold_ticks:
                self.collector.ack(self.held)
                record(self.journal, "acked")
                self.held = None
            else:
                self.collector.reset_timeout(self.held)
            return
        record(self.journal, "held")
        self.held = tup
        self.ticks = 0


class BranchingBolt(Bolt):
    """Storm's branching-bolt: emits ``amt`` tuples anchored to the input, then acks it."""

    outputs = ["num"]

    def __init__(self, amt: int) -> None:
        self.amt = amt

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        for i in range(self.amt):
            self.collector.emit([i], anchors=tup)
        self.collector.ack(tup)


class AggBolt(Bolt):
    """Storm's agg-bolt: collects ``amt`` inputs, emits one tuple anchored to all of them,
    then acks them."""

    outputs = ["num"]

    def __init__(self, amt: int) -> None:
        self.amt = amt

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.seen: list[Any] = []

    def execute(self, tup):
        self.seen.append(tup)
        if len(self.seen) == self.amt:
            self.collector.emit([1], anchors=self.seen)
            for t in self.seen:
                self.collector.ack(t)
            self.seen = []


class AckBolt(Bolt):
    """Storm's ack-bolt: acks everything."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)


class IdentityBolt(Bolt):
    """Storm's identity-bolt: re-emits the input anchored to it, then acks it."""

    outputs = ["num"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit(list(tup.values), anchors=tup)
        self.collector.ack(tup)


class DupAnchorBolt(Bolt):
    """Storm's dup-anchor: emits anchored to [t, t], then acks t."""

    outputs = ["num"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit([1], anchors=[tup, tup])
        self.collector.ack(tup)


class NeverAckBolt(Bolt):
    """Records each input's values and never acks nor fails it."""

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def execute(self, tup):
        record(self.journal, list(tup.values))


class RecordingAckBolt(Bolt):
    """Records each input's values, acks it; records "cleanup" when cleaned up."""

    def __init__(self, journal: str, cleanup_journal: str | None = None) -> None:
        self.journal = journal
        self.cleanup_journal = cleanup_journal

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        record(self.journal, list(tup.values))
        self.collector.ack(tup)

    def cleanup(self):
        if self.cleanup_journal is not None:
            record(self.cleanup_journal, "cleanup")


class PickyBasicBolt(BasicBolt):
    """Passes words on; "reject" raises FailedException, "crash" raises ValueError."""

    outputs = ["word"]

    def execute(self, tup, collector):
        word = tup[0]
        if word == "reject":
            raise FailedException("rejected on purpose")
        if word == "crash":
            raise ValueError("boom on crash")
        collector.emit([word])


class TickRecorder(Bolt):
    """Records (source_component, source_stream) of every input and acks it."""

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        record(self.journal, (tup.source_component, tup.source_stream))
        self.collector.ack(tup)


class SplitTwo(BasicBolt):
    """Emits [word, 0] and [word, 1] for each input (auto-anchored, auto-acked)."""

    outputs = ["word", "i"]

    def execute(self, tup, collector):
        collector.emit([tup[0], 0])
        collector.emit([tup[0], 1])


class FailOneAckRest(Bolt):
    """Fails the tuple ["b", 0], acks every other tuple."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if list(tup.values) == ["b", 0]:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


class AckCounter:
    """Storm's ack-tracking-feeder checker: asserts how many *new* acks arrived."""

    def __init__(self, tracker: AckFailTracker) -> None:
        self.tracker = tracker
        self.seen = 0

    def __call__(self, expected: int) -> None:
        now = len(self.tracker.acked)
        new, self.seen = now - self.seen, now
        assert new == expected, f"expected {expected} new acks, got {new}"


def tracked_feeder(fields: list[str]) -> tuple[FeederSpout, AckFailTracker, AckCounter]:
    tracker = AckFailTracker()
    return FeederSpout(fields, tracker=tracker), tracker, AckCounter(tracker)


# -- Storm's scenarios ----------------------------------------------------------------


@pytest.mark.standalone
def test_basic_topology(cluster):
    """Storm's basic topology: fields, global and chained groupings give the expected counts."""
    b = TopologyBuilder()
    b.set_spout("1", WordSpout(), parallelism=3)
    b.set_bolt("2", WordCounter(), parallelism=4).fields_grouping("1", ["word"])
    b.set_bolt("3", GlobalCount()).global_grouping("1")
    b.set_bolt("4", AggregatesCounter()).global_grouping("2")
    inputs = [["nathan"], ["bob"], ["joey"], ["nathan"]]
    results = complete_topology(
        cluster,
        b.create_topology(),
        mocked_sources=MockedSources({"1": inputs}),
        conf=TIMEOUT_CONF,
    )
    assert multiset(read_tuples(results, "1")) == multiset(inputs)
    assert multiset(read_tuples(results, "2")) == multiset(
        [["nathan", 1], ["nathan", 2], ["bob", 1], ["joey", 1]]
    )
    assert read_tuples(results, "3") == [[1], [2], [3], [4]]
    assert read_tuples(results, "4") == [[1], [2], [3], [4]]


def test_all_grouping_every_task_sees_every_tuple(cluster):
    """All grouping: each of the bolt's 6 tasks receives every spout tuple."""
    b = TopologyBuilder()
    b.set_spout("1", WordSpout())
    b.set_bolt("2", TaskWordBolt(), parallelism=6).all_grouping("1")
    inputs = [["nathan"], ["bob"], ["joey"], ["nathan"]]
    results = complete_topology(
        cluster,
        b.create_topology(),
        mocked_sources=MockedSources({"1": inputs}),
        conf=TIMEOUT_CONF,
    )
    per_task: dict[int, list[list[Any]]] = defaultdict(list)
    for task, word in read_tuples(results, "2"):
        per_task[task].append([word])
    assert len(per_task) == 6
    for task, words in per_task.items():
        assert multiset(words) == multiset(inputs), f"task {task} saw {words}"


@pytest.mark.standalone
def test_timeout(cluster):
    """Storm's timeout scenario: only the unacked tuple fails, and only after the timeout."""
    feeder, tracker, _ = tracked_feeder(["field1"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", AckEveryOther()).global_grouping("1")
    cluster.submit_topology("timeout-tester", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    feeder.feed(["a"], msg_id=1)
    feeder.feed(["b"], msg_id=2)
    feeder.feed(["c"], msg_id=3)
    cluster.advance_time(9)
    assert cluster.until(lambda: tracker.acked == {1, 3})
    if cluster.exact_time:
        assert tracker.failed == set()
    cluster.advance_time(12)
    assert cluster.until(lambda: tracker.failed == {2})
    assert tracker.acked == {1, 3}


def test_reset_timeout_keeps_tuple_alive(cluster):
    """reset_timeout on each tick keeps a held tuple alive past the timeout until acked."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["field1"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    # Ticks every 2 s; the tuple is held for 15 ticks (~30 s, three timeouts).
    b.set_bolt("2", ResetTimeoutBolt(15, journal)).global_grouping("1").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 2
    )
    cluster.submit_topology("reset-timeout-tester", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    cluster.advance_time(21)
    assert "held" in entries(journal)
    assert cluster.until(lambda: entries(journal).count("tick") >= 5), "too few tick tuples"
    assert tracker.failed == set()
    if cluster.exact_time:
        assert tracker.acked == set()
    cluster.advance_time(15)
    assert cluster.until(lambda: "acked" in entries(journal))
    assert cluster.until(lambda: tracker.acked == {1})
    assert tracker.failed == set()
    cluster.advance_time(30)
    assert tracker.failed == set()


def test_acking(cluster):
    """Storm's acking scenario: branching, multi-anchored trees ack exactly when exhausted."""
    feeder1, tracker1, check1 = tracked_feeder(["num"])
    feeder2, tracker2, check2 = tracked_feeder(["num"])
    feeder3, tracker3, check3 = tracked_feeder(["num"])
    b = TopologyBuilder()
    b.set_spout("1", feeder1)
    b.set_spout("2", feeder2)
    b.set_spout("3", feeder3)
    b.set_bolt("4", BranchingBolt(2)).shuffle_grouping("1")
    b.set_bolt("5", BranchingBolt(4)).shuffle_grouping("2")
    b.set_bolt("6", BranchingBolt(1)).shuffle_grouping("3")
    b.set_bolt("7", AggBolt(3)).shuffle_grouping("4").shuffle_grouping("5").shuffle_grouping("6")
    b.set_bolt("8", BranchingBolt(2)).shuffle_grouping("7")
    b.set_bolt("9", AckBolt()).shuffle_grouping("8")
    cluster.submit_topology("acking-test1", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    ids = itertools.count(1)

    feeder1.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(0)
    feeder2.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(1)
    check2(1)
    feeder1.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(0)
    feeder1.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(1)
    feeder3.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(0)
    check3(0)
    feeder2.feed([1], msg_id=next(ids))
    assert cluster.wait_idle()
    check1(1)
    check2(1)
    check3(1)
    assert tracker1.failed == tracker2.failed == tracker3.failed == set()


def test_ack_branching(cluster):
    """A tuple split into two branches that rejoin is acked only when both are done."""
    feeder, tracker, check = tracked_feeder(["num"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", IdentityBolt()).shuffle_grouping("1")
    b.set_bolt("3", IdentityBolt()).shuffle_grouping("1")
    b.set_bolt("4", AggBolt(4)).shuffle_grouping("2").shuffle_grouping("3")
    cluster.submit_topology("test-acking2", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    feeder.feed([1], msg_id=1)
    assert cluster.wait_idle()
    check(0)
    feeder.feed([1], msg_id=2)
    assert cluster.wait_idle()
    check(2)
    assert tracker.acked == {1, 2}
    assert tracker.failed == set()


def test_acking_self_anchor(cluster):
    """A child anchored to [t, t] (the same tuple twice) still lets the tree complete."""
    feeder, tracker, check = tracked_feeder(["num"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", DupAnchorBolt()).shuffle_grouping("1")
    b.set_bolt("3", AckBolt()).shuffle_grouping("2")
    cluster.submit_topology("self-anchor", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    feeder.feed([1], msg_id=1)
    assert cluster.wait_idle()
    check(1)
    feeder.feed([1], msg_id=2)
    feeder.feed([1], msg_id=3)
    feeder.feed([1], msg_id=4)
    assert cluster.wait_idle()
    check(3)
    assert tracker.acked == {1, 2, 3, 4}
    assert tracker.failed == set()


def test_disabled_timeouts_never_fail(cluster):
    """With topology.enable.message.timeouts False an unacked tuple never times out."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", NeverAckBolt(journal)).global_grouping("1")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False}
    cluster.submit_topology("no-timeouts", conf, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    cluster.advance_time(35)  # past 3 timeouts: any tree the ackers held would be gone
    assert entries(journal) == [["a"]]
    assert tracker.failed == set()
    assert tracker.acked == set()


def test_submit_inactive_topology(cluster):
    """A topology submitted inactive emits nothing until activate, then it does."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["field1"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", RecordingAckBolt(journal)).global_grouping("1")
    cluster.submit_topology("test", TIMEOUT_CONF, b.create_topology(), inactive=True)
    feeder.feed(["a"], msg_id=1)
    cluster.advance_time(9)
    assert cluster.wait_idle()
    assert entries(journal) == []
    assert tracker.acked == set()
    assert tracker.failed == set()
    cluster.activate("test")
    cluster.advance_time(2)
    assert cluster.until(lambda: tracker.acked == {1})
    assert entries(journal) == [["a"]]
    assert tracker.failed == set()


@pytest.mark.standalone
def test_deactivate_then_activate(cluster):
    """A deactivated topology's spouts stop emitting; activating resumes them."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", RecordingAckBolt(journal)).global_grouping("1")
    cluster.submit_topology("toggle", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    assert cluster.wait_idle()
    assert tracker.acked == {1}
    cluster.deactivate("toggle")
    assert cluster.wait_idle()  # on Spark, deactivate reaches the workers by message
    feeder.feed(["b"], msg_id=2)
    cluster.advance_time(5)
    assert entries(journal) == [["a"]]
    assert tracker.acked == {1}
    cluster.activate("toggle")
    cluster.advance_time(1)
    assert cluster.until(lambda: tracker.acked == {1, 2})
    assert entries(journal) == [["a"], ["b"]]


def test_zero_ackers_acks_at_once(cluster):
    """With 0 ackers a tracked emit is acked at once though the bolt never acks."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", NeverAckBolt(journal)).global_grouping("1")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_ACKER_EXECUTORS: 0}
    cluster.submit_topology("at-most-once", conf, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    assert cluster.wait_idle()
    assert tracker.acked == {1}
    assert entries(journal) == [["a"]]
    cluster.advance_time(25)  # past 2 timeouts: a tracked tree would have failed
    assert tracker.failed == set()


def test_untracked_emit_is_never_acked_nor_failed(cluster):
    """With ackers but msg_id=None the tuple is not tracked: no ack, no fail, ever."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", NeverAckBolt(journal)).global_grouping("1")
    cluster.submit_topology("untracked", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a"], msg_id=None)
    assert cluster.wait_idle()
    assert entries(journal) == [["a"]]
    assert tracker.acked == set()
    cluster.advance_time(25)  # past 2 timeouts: a tracked tree would have failed
    assert tracker.acked == set()
    assert tracker.failed == set()


def test_basic_bolt_failures_and_errors(cluster):
    """BasicBolt: raised exceptions fail the input, errors are reported, work goes on."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", PickyBasicBolt()).shuffle_grouping("1")
    b.set_bolt("3", RecordingAckBolt(journal)).shuffle_grouping("2")
    cluster.submit_topology("basic", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["ok"], msg_id=1)
    feeder.feed(["reject"], msg_id=2)
    feeder.feed(["crash"], msg_id=3)
    feeder.feed(["fine"], msg_id=4)
    assert cluster.wait_idle()  # no time passes: the failures are explicit, not timeouts
    assert tracker.failed == {2, 3}
    assert tracker.acked == {1, 4}
    assert entries(journal) == [["ok"], ["fine"]]
    errors = cluster.errors("basic")
    assert any("boom on crash" in e for e in errors), errors
    feeder.feed(["later"], msg_id=5)
    assert cluster.wait_idle()
    assert tracker.acked == {1, 4, 5}
    assert entries(journal)[-1] == ["later"]


def test_max_spout_pending_bounds_in_flight_tuples(cluster):
    """max.spout.pending 2 keeps at most 2 trees in flight; timeouts free the slots."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", NeverAckBolt(journal)).global_grouping("1")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_MAX_SPOUT_PENDING: 2}
    cluster.submit_topology("pending", conf, b.create_topology())
    for i in range(1, 31):
        feeder.feed([f"w{i}"], msg_id=i)
    assert cluster.wait_idle()
    assert entries(journal) == [["w1"], ["w2"]]
    if cluster.exact_time:
        cluster.advance_time(5)
        assert entries(journal) == [["w1"], ["w2"]]
        assert tracker.failed == set()
    cluster.advance_time(25)

    def two_in_flight() -> bool:
        failed, executed = tracker.failed, entries(journal)
        return (
            len(failed) >= 2
            and failed == set(range(1, len(failed) + 1))
            and len(executed) - len(failed) == 2
            and executed == [[f"w{i}"] for i in range(1, len(executed) + 1)]
        )

    assert cluster.until(two_in_flight), (tracker.failed, entries(journal))
    assert tracker.acked == set()


def test_tick_tuples_at_configured_frequency(cluster):
    """A per-bolt tick frequency of 3 s yields __system/__tick tuples every 3 s."""
    ticking, quiet = new_journal(), new_journal()
    feeder, _, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("ticker", TickRecorder(ticking)).shuffle_grouping("1").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 3
    )
    b.set_bolt("quiet", TickRecorder(quiet)).shuffle_grouping("1")
    cluster.submit_topology("ticks", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["w"], msg_id=1)
    cluster.advance_time(30)

    def ticks() -> int:
        return entries(ticking).count(("__system", "__tick"))

    if cluster.exact_time:
        assert 9 <= ticks() <= 11, entries(ticking)
    else:  # a loaded machine may run a real-time worker's timers late
        assert cluster.until(lambda: ticks() >= 5), entries(ticking)
    seen = entries(ticking)
    assert [e for e in seen if e != ("__system", "__tick")] == [("1", "default")]
    assert entries(quiet) == [("1", "default")]
    cluster.advance_time(30)
    if cluster.exact_time:
        assert 19 <= ticks() <= 21
    else:
        assert cluster.until(lambda: ticks() >= 10), entries(ticking)
    assert entries(quiet) == [("1", "default")]
    assert cluster.errors("ticks") == []


def test_topology_level_tick_frequency_reaches_every_bolt(cluster):
    """topology.tick.tuple.freq.secs in the topology conf sends ticks to every bolt."""
    j1, j2 = new_journal(), new_journal()
    b = TopologyBuilder()
    b.set_spout("1", FeederSpout(["word"]))
    b.set_bolt("a", TickRecorder(j1)).shuffle_grouping("1")
    b.set_bolt("b", TickRecorder(j2), parallelism=2).shuffle_grouping("1")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5}
    cluster.submit_topology("ticks-all", conf, b.create_topology())
    cluster.advance_time(20)
    if cluster.exact_time:
        assert 3 <= entries(j1).count(("__system", "__tick")) <= 5
        # Every task of "b" gets its own ticks.
        assert 6 <= entries(j2).count(("__system", "__tick")) <= 10
    else:
        assert cluster.until(lambda: entries(j1).count(("__system", "__tick")) >= 2)
        assert cluster.until(lambda: entries(j2).count(("__system", "__tick")) >= 4)


def test_metrics_count_what_happened(cluster):
    """cluster.metrics counters per component and per task match what happened."""
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("split", SplitTwo(), parallelism=2).shuffle_grouping("src")
    b.set_bolt("judge", FailOneAckRest()).shuffle_grouping("split")
    b.set_bolt("watch", AckBolt(), parallelism=2).all_grouping("src")
    cluster.submit_topology("metered", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    feeder.feed(["b"], msg_id=2)
    feeder.feed(["c"], msg_id=3)
    assert cluster.wait_idle()
    assert tracker.acked == {1, 3}
    assert tracker.failed == {2}

    m = cluster.metrics("metered")
    src, split, judge, watch = m["src"], m["split"], m["judge"], m["watch"]
    # Each spout tuple goes to one "split" task and to both "watch" tasks.
    assert (src["emitted"], src["transferred"]) == (3, 9)
    assert (src["acked"], src["failed"], src["timed_out"]) == (2, 1, 0)
    assert src["complete_latency_ms"] is not None
    assert src["complete_latency_ms"] >= 0
    assert (split["executed"], split["emitted"], split["transferred"]) == (3, 6, 6)
    assert (split["acked"], split["failed"]) == (3, 0)
    assert (judge["executed"], judge["acked"], judge["failed"]) == (6, 5, 1)
    assert judge["emitted"] == 0
    assert (watch["executed"], watch["acked"]) == (6, 6)
    assert len(split["tasks"]) == 2
    assert len(watch["tasks"]) == 2
    assert all(t["executed"] == 3 for t in watch["tasks"].values())
    for comp in (src, split, judge, watch):
        for counter in ("emitted", "transferred", "executed", "acked", "failed"):
            total = sum(task[counter] for task in comp["tasks"].values())
            assert total == comp[counter], counter


def test_metrics_count_timeouts(cluster):
    """Tuples that time out count as failed and timed_out for the spout."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("sink", NeverAckBolt(journal)).shuffle_grouping("src")
    cluster.submit_topology("timeouts", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a"], msg_id=1)
    feeder.feed(["b"], msg_id=2)
    cluster.advance_time(25)
    assert cluster.until(lambda: tracker.failed == {1, 2})

    def spout_counts() -> tuple[int, int, int]:
        src = cluster.metrics("timeouts")["src"]
        return src["acked"], src["failed"], src["timed_out"]

    # On Spark the figures arrive with the workers' periodic reports.
    assert cluster.until(lambda: spout_counts() == (0, 2, 2)), spout_counts()
    m = cluster.metrics("timeouts")
    assert m["src"]["complete_latency_ms"] is None
    assert (m["sink"]["executed"], m["sink"]["acked"]) == (2, 0)


def _pipeline(journal: str, cleanup: str) -> tuple[Any, FeederSpout, AckFailTracker]:
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    b.set_bolt("2", RecordingAckBolt(journal, cleanup)).shuffle_grouping("1")
    return b.create_topology(), feeder, tracker


def test_two_topologies_and_kill(cluster):
    """Two topologies share a cluster; killing one cleans it up, the other keeps working."""
    j1, c1, j2, c2 = new_journal(), new_journal(), new_journal(), new_journal()
    topo1, feeder1, tracker1 = _pipeline(j1, c1)
    topo2, feeder2, tracker2 = _pipeline(j2, c2)
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_WORKERS: 1}  # two topologies in two Spark slots
    cluster.submit_topology("t1", conf, topo1)
    cluster.submit_topology("t2", conf, topo2)
    feeder1.feed(["one"], msg_id="x1")
    feeder2.feed(["two"], msg_id="y1")
    assert cluster.wait_idle()
    assert tracker1.acked == {"x1"}
    assert tracker2.acked == {"y1"}
    assert entries(j1) == [["one"]]
    assert entries(j2) == [["two"]]

    cluster.kill_topology("t1")
    assert cluster.until(lambda: entries(c1) == ["cleanup"])
    assert entries(c2) == []
    feeder2.feed(["again"], msg_id="y2")
    cluster.advance_time(2)
    assert cluster.until(lambda: tracker2.acked == {"y1", "y2"})
    assert entries(j2) == [["two"], ["again"]]
    assert entries(j1) == [["one"]]
    assert cluster.until(lambda: cluster.metrics("t2")["2"]["executed"] == 2)


def test_submitting_a_running_name_again_is_rejected(cluster):
    """Submitting under a running topology's name raises and leaves it untouched."""
    j1, c1, j2, c2 = new_journal(), new_journal(), new_journal(), new_journal()
    topo1, feeder1, tracker1 = _pipeline(j1, c1)
    topo2, _, _ = _pipeline(j2, c2)
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_WORKERS: 1}
    cluster.submit_topology("same", conf, topo1)
    with pytest.raises(Exception, match="same"):  # API.md does not fix the type
        cluster.submit_topology("same", conf, topo2)
    feeder1.feed(["still"], msg_id=1)
    assert cluster.wait_idle()
    assert tracker1.acked == {1}
    assert entries(j1) == [["still"]]
