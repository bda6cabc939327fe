"""The spout kinds under failure: a partition becomes unreadable just as a batch that
read it is replayed. The transactional spout may not change the batch, so it stops,
shown as stuck with where; the opaque spout goes on without the partition, and its
counts are exact for what it could read. Both catch up once the partition is back."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, Fields, Spout
from tupletree.errors import InvalidTopologyError
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.operation import BaseFunction
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from ..registry import Box, entries, new_journal, record
from .support import (
    RecordingFactory,
    SeqOpaque,
    SeqTransactional,
    coordinator_view,
    memory_counts,
    sim_conf,
)

FAIL_AT = 3  # txid whose first commit fails, making p1 unreadable


def word_count(spout: Any, factory: Any) -> TridentTopology:
    topology = TridentTopology()
    (
        topology.new_stream("spout1", spout)
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
    )
    return topology


def run(cluster: Any, spout_cls: type, seconds: int, interval: int) -> tuple[Box, Any, Any]:
    """Batches of 2 records per partition, 3 active at once, up to txid 25; with
    ``interval`` 0 three start at once (a stuck spout would then spin: the
    transactional case uses 100 ms, one batch per simulated second)."""
    box = Box()
    box.get()["max_txid"] = 25
    memory = MemoryMapState.Factory()
    factory = RecordingFactory(memory, fail_begin={FAIL_AT}, on_fail=(box, {"unreadable": {"p1"}}))
    spout = spout_cls(box, partitions=3, records=10, per_batch=2)
    conf = sim_conf(
        **{
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: interval,
        }
    )
    cluster.submit_topology("kinds", conf, word_count(spout, factory).build())
    cluster.advance_time(seconds)
    return box, memory, factory


def read(memory: Any) -> dict[str, int]:
    return memory_counts(memory, 1)


def test_transactional_spout_stops_at_an_unreadable_partition_and_says_where(sim_cluster):
    box, memory, _ = run(sim_cluster, SeqTransactional, 12, 100)
    view = coordinator_view(sim_cluster, "kinds")
    assert view["currentTxid"] == FAIL_AT  # stuck: never past the batch it cannot replay
    assert view["replayed"] >= 3
    # Only what the committed batches read (2 records of each partition per batch).
    counts = read(memory)
    assert counts == {f"p{p}-{i}": 1 for p in range(3) for i in range(2 * (FAIL_AT - 1))}
    stuck = [
        s
        for per_task in sim_cluster.metrics("kinds")["spout1"]["custom"]["trident"].values()
        for s in per_task["stuck"].values()
    ]
    assert stuck and stuck[0]["partition"] == "p1" and stuck[0]["txid"] == FAIL_AT
    assert "unavailable" in stuck[0]["error"]

    box.get()["unreadable"] = set()  # the partition is back: it goes on, exactly
    sim_cluster.advance_time(30)
    assert read(memory) == {f"p{p}-{i}": 1 for p in range(3) for i in range(10)}
    view = coordinator_view(sim_cluster, "kinds")
    assert view["currentTxid"] > FAIL_AT + 5
    stuck = [
        s
        for per_task in sim_cluster.metrics("kinds")["spout1"]["custom"]["trident"].values()
        for s in per_task["stuck"].values()
    ]
    assert stuck == []


def test_opaque_spout_goes_on_without_the_partition_with_exact_counts(sim_cluster):
    box, memory, _ = run(sim_cluster, SeqOpaque, 12, 0)
    view = coordinator_view(sim_cluster, "kinds")
    assert view["currentTxid"] > FAIL_AT + 3  # it went on
    counts = read(memory)
    # p0 and p2 read to the end, each record once; p1 only what committed before.
    readable = {f"p{p}-{i}": 1 for p in (0, 2) for i in range(10)}
    before = {f"p1-{i}": 1 for i in range(2 * (FAIL_AT - 1))}
    assert counts == {**readable, **before}

    box.get()["unreadable"] = set()
    box.get()["max_txid"] = 40  # more batches, to read what p1 still holds
    sim_cluster.advance_time(10)
    assert read(memory) == {f"p{p}-{i}": 1 for p in range(3) for i in range(10)}
    assert sim_cluster.errors("kinds") == []


class Numbers(Spout):
    """A plain spout of tracked tuples 0..n-1, journaling acks and fails."""

    outputs = ["word"]

    def __init__(self, n: int) -> None:
        self.n = n
        self.acks = new_journal()
        self.fails = new_journal()

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0

    def next_tuple(self) -> None:
        if self.i < self.n:
            self.collector.emit([f"w{self.i}"], self.i)
            self.i += 1

    def ack(self, msg_id: Any) -> None:
        record(self.acks, msg_id)

    def fail(self, msg_id: Any) -> None:
        record(self.fails, msg_id)


def test_a_plain_spout_is_refused_unless_at_least_once_is_asked_for(sim_cluster):
    spout = Numbers(5)
    topology = word_count(spout, MemoryMapState.Factory())
    with pytest.raises(InvalidTopologyError, match="non-transactional spout"):
        topology.build()
    built = topology.build(allow_at_least_once=True)
    assert [v.exactly_once for v in built.trident_guarantees] == [False]
    conf = sim_conf(**{Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE: 2})
    sim_cluster.submit_topology("plain", conf, built)
    sim_cluster.advance_time(8)
    # Acked once their batch committed, in batches of 2.
    assert sorted(entries(spout.acks)) == [0, 1, 2, 3, 4]
    assert entries(spout.fails) == []


class FailOnce(BaseFunction):
    """Raises on the first tuple ``word`` it sees, once (a poison tuple, then fixed)."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.raised = new_journal()

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == self.word and not entries(self.raised):
            record(self.raised, tup[0])
            raise ValueError(f"test: cannot take {tup[0]}")
        collector.emit([tup[0]])


def test_a_plain_spouts_tuples_of_a_failed_batch_are_failed_to_it(sim_cluster):
    """An operation raised while the spout filled a batch: the ids it had emitted were
    dropped, so the spout was told neither ack nor fail for them (a broker's messages
    stay unacknowledged: lost to at-least-once, or the spout stalls at its prefetch)."""
    spout = Numbers(5)
    topology = TridentTopology()
    topology.new_stream("spout1", spout).each(Fields("word"), FailOnce("w1"), Fields("w")).group_by(
        Fields("w")
    ).persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count"))
    conf = sim_conf(**{Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE: 3})
    sim_cluster.submit_topology("plain", conf, topology.build(allow_at_least_once=True))
    sim_cluster.advance_time(8)
    # 0 and 1 (whose emit raised) are failed to the spout, to replay as it chooses;
    # Numbers does not replay, but its emit of 1 raised before it moved on, so it sends
    # 1 again in the next batch, which commits.
    assert sorted(entries(spout.fails)) == [0, 1]
    assert sorted(entries(spout.acks)) == [1, 2, 3, 4]


def test_fixed_batch_spout_replays_the_same_batch_for_a_txid(sim_cluster):
    memory = MemoryMapState.Factory()
    factory = RecordingFactory(memory, fail_commit={1, 2})
    spout = FixedBatchSpout(Fields("word"), 2, ["a"], ["b"], ["c"], ["d"], ["e"])
    sim_cluster.submit_topology("fixed", sim_conf(), word_count(spout, factory).build())
    sim_cluster.advance_time(10)
    assert read(memory) == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}


def test_the_test_spouts_take_one_field_name_as_a_str() -> None:
    """FixedBatchSpout("sentence", ...) made the fields s, e, n, t, ... and was refused
    for "duplicate field name(s) ['e', 'n']" (or, for a name of distinct letters, took
    each row for too few values)."""
    from tupletree.trident.testing import FeederBatchSpout

    spout = FixedBatchSpout("word", 2, ["a"], ["b"])
    assert spout.get_output_fields().to_list() == ["word"]
    assert spout.outputs == [["a"], ["b"]]
    assert FixedBatchSpout("sentence", 2, "the cow").get_output_fields().to_list() == ["sentence"]
    assert FeederBatchSpout("word").get_output_fields().to_list() == ["word"]
