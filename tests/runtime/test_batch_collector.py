"""BatchCollector and BatchBoltExecutor (runtime/batch_collector.py,
runtime/batch_executor.py) inside one worker: where a BatchBolt's emits go and in
which form, and what a careless bolt gets for misusing rows."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BatchBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.reliability.protocol import FAIL
from tupletree.runtime.worker import Worker, make_layout
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.topology.batch import Batch
from tupletree.topology.tuple import Tuple


class Sentences(Spout):
    outputs = ["sentence"]

    def open(self, conf, context, collector):
        self.collector = collector
        self.left = ["a b", "c d e"]

    def next_tuple(self):
        if self.left:
            n = len(self.left)
            self.collector.emit([self.left.pop(0)], msg_id=n)


class Split(BatchBolt):
    outputs = ["word"]

    def execute_batch(self, batch, collector):
        for i, sentence in enumerate(batch.column("sentence")):
            for word in sentence.split():
                collector.emit([word], row=i)


class Seen(BatchBolt):
    def prepare(self, conf, context):
        self.batches: list[Any] = []

    def execute_batch(self, batch, collector):
        self.batches.append(batch)


class Sink(Bolt):
    def execute(self, tup):
        pass


def test_emits_go_as_batches_to_batch_bolts_and_peers_and_as_tuples_to_the_rest() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("split", Split()).shuffle_grouping("sentences")
    b.set_bolt("seen", Seen()).shuffle_grouping("split")  # local, takes Batches
    b.set_bolt("local_sink", Sink()).shuffle_grouping("split")  # local, takes Tuples
    b.set_bolt("far", Sink()).shuffle_grouping("split")  # on another worker
    topology = b.create_topology()
    conf = validate({Config.TOPOLOGY_ACKER_EXECUTORS: 1})
    tasks = make_layout(topology, conf).component_to_tasks
    far = tasks["far"][0]
    peer_lists: dict[int, list[Any]] = {}
    local = [t for ts in tasks.values() for t in ts if t != far]
    worker = Worker("w", topology, conf, lambda: 0.0, local, lambda t: peer_lists.setdefault(t, []))
    sink = worker.executors[tasks["local_sink"][0]]
    got: list[Any] = []
    sink.bolt.execute = got.append  # what the plain bolt gets
    worker.start()
    for _ in range(20):
        worker.step(0.0)
    seen = worker.executors[tasks["seen"][0]].bolt.batches
    assert [w for b in seen for w in b.column("word")] == ["a", "b", "c", "d", "e"]
    assert [t.values for t in got] == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert all(type(t) is Tuple for t in got)
    sent = peer_lists[far]
    assert sent and all(type(item) is Batch for item in sent)
    assert [w for item in sent for w in item.column("word")] == ["a", "b", "c", "d", "e"]
    # Each sentence's words share its tree, on every path.
    runs = [(r, c) for item in sent for r, c in zip(item._roots, item._counts, strict=True)]
    assert [c for _, c in runs] == [2, 3] and runs[0][0] != runs[1][0]
    assert [t._root for t in got] == [runs[0][0]] * 2 + [runs[1][0]] * 3
    # A row that cannot be serialized fails its batch's trees and names the emitter.
    acker = worker.executors[tasks["__acker"][0]]
    acker.inbox.clear()
    for item in sent:
        worker.fail_unserializable(item, TypeError("no pickle"))
    assert sorted(acker.inbox) == sorted((FAIL, root, 0, 0) for root, _ in runs)
    errors = worker.errors.texts()
    assert any("'split'" in e and "cannot be serialized" in e and "no pickle" in e for e in errors)


class MisusesRows(BatchBolt):
    outputs = ["word"]

    def prepare(self, conf, context):
        self.kept: Any = None

    def execute_batch(self, batch, collector):
        word = batch.column("word")[0]
        if word == "late":
            collector.emit(["x"], row=0)
            collector.fail(0)
            collector.emit(["y"], row=0)  # anchored to a row it failed: refused
        elif word == "bool":
            collector.emit(["x"], row=True)
        else:
            collector.emit(["x"], row=len(batch))


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("late", "anchored an emit to row 0, which it already failed"),
        ("bool", "row must be the index of an input row (0 to 0), got True"),
        ("past", "row must be the index of an input row (0 to 0), got 1"),
    ],
)
def test_an_emit_to_a_row_that_is_not_there_is_an_error_that_fails_the_batch(
    word: str, message: str
) -> None:
    tracker = AckFailTracker()
    b = TopologyBuilder()
    feeder = FeederSpout(["word"], tracker=tracker)
    b.set_spout("words", feeder)
    b.set_bolt("misuse", MisusesRows()).shuffle_grouping("words")
    b.set_bolt("sink", Sink()).shuffle_grouping("misuse")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("rows", {}, b.create_topology())
        feeder.feed([word], msg_id=1)
        assert cluster.wait_idle()
        assert tracker.failed == {1}
        assert any(message in e for e in cluster.errors("rows")), cluster.errors("rows")


def test_a_tick_reaches_a_batch_bolt_as_a_batch_of_its_own() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("seen", Seen()).shuffle_grouping("sentences")
    conf = {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 5}
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("ticks", conf, b.create_topology())
        cluster.advance_time(6)
        assert cluster.wait_idle()
        worker = cluster._worker("ticks")
        (seen,) = [e for e in worker.executors.values() if e.component_id == "seen"]
        batches = seen.bolt.batches
    ticks = [b for b in batches if b.is_tick()]
    assert ticks and all(len(b) == 1 and b.column("freq") == [5] for b in ticks)
    words = [b for b in batches if not b.is_tick()]
    assert [s for b in words for s in b.column("sentence")] == ["a b", "c d e"]


def test_tuples_in_a_row_from_one_source_make_one_batch_of_at_most_a_turn() -> None:
    """A BatchBolt's turn takes the Tuples queued in a row from one source as one Batch,
    and stops at the executor's batch size."""
    from tupletree.runtime.batch_executor import BatchBoltExecutor
    from tupletree.runtime.collectors import TaskWiring
    from tupletree.topology.fields import Fields
    from tupletree.topology.tuple import TupleSource

    ex = BatchBoltExecutor(7, "seen", Seen(), lambda *a: None)
    ex.connect(TaskWiring("seen", 7, {}, {}, metrics=ex.metrics))
    ex.bolt.prepare({}, None)
    a = TupleSource("a", "default", 1, Fields(["w"]))
    other = TupleSource("b", "default", 2, Fields(["w"]))
    ex.inbox.extend([Tuple([i], a) for i in range(5)] + [Tuple(["o"], other), Tuple([9], a)])
    assert ex.run_batch(3) == 3
    assert ex.run_batch(100) == 4
    assert [b.column("w") for b in ex.bolt.batches] == [[0, 1, 2], [3, 4], ["o"], [9]]
    assert ex.metrics.executed == 7 and ex.metrics.acked == 7


class YieldingBatchBolt(BatchBolt):
    def execute_batch(self, batch, collector):
        yield batch


def test_a_generator_execute_batch_is_refused_when_the_topology_is_built() -> None:
    """Called, it would run none of its body and every row would be acked unprocessed."""
    from tupletree import InvalidTopologyError

    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("lazy", YieldingBatchBolt()).shuffle_grouping("sentences")
    with pytest.raises(InvalidTopologyError, match=r"YieldingBatchBolt.execute_batch is a gen"):
        b.create_topology()


class Router(BatchBolt):
    """Sends each word on a named stream, and directly to the first sink task."""

    def __init__(self, named_task: int) -> None:
        self.named_task = named_task

    def declare_output_fields(self, declarer):
        declarer.declare_stream("named", ["w"])
        declarer.declare_stream("direct", ["w"], direct=True)

    def prepare(self, conf, context):
        self.direct_to = min(context.component_tasks("direct_sink"))

    def execute_batch(self, batch, collector):
        for i, word in enumerate(batch.column("word")):
            assert collector.emit([word], row=i, stream="named") == [self.named_task]
            to = self.direct_to
            assert collector.emit_direct(to, [word.upper()], i, "direct") == [to]


class Journal(Bolt):
    def __init__(self, journal: Any) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.journal.append((tup.source_stream, tup[0]))
        self.collector.ack(tup)


def test_a_batch_bolt_emits_on_named_and_direct_streams() -> None:
    from tupletree.testing import SharedList

    journal = SharedList("batch-streams")
    tracker = AckFailTracker()
    feeder = FeederSpout(["word"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("words", feeder)
    router = Router(named_task=-1)
    b.set_bolt("router", router).shuffle_grouping("words")
    b.set_bolt("named_sink", Journal(journal)).shuffle_grouping("router", "named")
    b.set_bolt("direct_sink", Journal(journal), parallelism=2).direct_grouping("router", "direct")
    topology = b.create_topology()
    # Each task gets a copy at submit: tell the router where the named stream goes.
    (router.named_task,) = make_layout(topology, validate({})).component_to_tasks["named_sink"]
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("streams", {}, topology)
        feeder.feed(["ab"], msg_id=1)
        feeder.feed(["cd"], msg_id=2)
        assert cluster.wait_idle()
        assert tracker.acked == {1, 2} and cluster.errors("streams") == []
    assert sorted(journal.items()) == [
        ("direct", "AB"),
        ("direct", "CD"),
        ("named", "ab"),
        ("named", "cd"),
    ]
