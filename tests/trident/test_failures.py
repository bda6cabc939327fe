"""Trident's exactly-once at the worst moment: a transactional spout's new batch that
fails while later ones already ran, an emitter with nothing new, a transactional map
written once per tuple that fails part-way, one factory behind two states. Each once
counted records twice, lost an update or wiped a count (found by an adversarial
review, 2026-11-29)."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, Fields
from tupletree.errors import InvalidTopologyError
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.operation import BaseFunction
from tupletree.trident.state import BaseStateUpdater, MemoryMapState, SqliteMapState
from tupletree.trident.testing import FixedBatchSpout

from ..registry import Box
from .support import SeqTransactional, _SeqEmitter, coordinator_view, memory_counts, sim_conf


class _FlakyNewEmitter(_SeqEmitter):
    """SeqTransactional's emitter whose first emit_batch_new of txid
    ``box["flaky_txid"]`` raises (a transient read error, before anything was
    emitted); every later call works."""

    def emit_batch_new(self, tx: Any, collector: Any, partitions: Any, last: Any) -> dict:
        b = self.box.get()
        if tx.transaction_id == b["flaky_txid"] and not b.get("raised"):
            b["raised"] = True
            raise OSError("transient: broker not reachable")
        return super().emit_batch_new(tx, collector, partitions, last)


class FlakyTransactional(SeqTransactional):
    """One partition of records p0-0 .. p0-9, two a batch, with that emitter."""

    def __init__(self, box: Any) -> None:
        super().__init__(box, partitions=1, records=10, per_batch=2)

    def get_emitter(self, conf: Any, context: Any) -> Any:
        return _FlakyNewEmitter(self.box, self.records, self.per_batch)


def _three_batches_at_once() -> dict[str, Any]:
    """Three batches in flight and no wait between them: a batch that fails finds the
    next ones started."""
    return sim_conf(
        **{
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0,
        }
    )


def test_transactional_spout_new_emit_failure_with_pending_batches_counts_once(sim_cluster):
    """A transactional partitioned spout whose emit_batch_new raises once (a transient
    read error) for txid 2 while txid 3 is already started (max.spout.pending 3, emit
    interval 0). Txid 3, emitted new while txid 2 had stored nothing, reads on from txid
    1's metadata: the records txid 2 would read. Txid 2's replay then read them again,
    and p0-2, p0-3 counted twice. Now txid 2 is empty for good (Storm's rule), and every
    record counts once."""
    box = Box()
    box.get().update(max_txid=8, flaky_txid=2)
    memory = MemoryMapState.Factory()
    topology = TridentTopology()
    (
        topology.new_stream("spout1", FlakyTransactional(box))
        .group_by(Fields("word"))
        .persistent_aggregate(memory, Count(), Fields("count"))
    )
    sim_cluster.submit_topology("flaky", _three_batches_at_once(), topology.build())
    sim_cluster.advance_time(20)
    assert box.get().get("raised")
    assert coordinator_view(sim_cluster, "flaky")["currentTxid"] > 6
    assert memory_counts(memory, 1) == {f"p0-{i}": 1 for i in range(10)}


# -- a transactional map written by several multi_update calls in one batch -----------


class Inc:
    def __call__(self, old: Any) -> Any:
        return (old or 0) + 1


class PerTupleCount(BaseStateUpdater):
    """Counts each tuple's word with its own multi_update call (the pattern BatchReads
    says it supports: "an earlier multi_update call of the same updater"). The first
    time it meets "boom" it raises (a transient error: a lookup, a timeout), once."""

    def __init__(self, box: Any) -> None:
        self.box = box

    def update_state(self, state: Any, tuples: list[Any], collector: Any) -> None:
        b = self.box.get()
        for t in tuples:
            word = t.get("word")
            if word == "boom" and not b.get("raised"):
                b["raised"] = True
                raise OSError("transient error in the updater")
            state.multi_update([(word,)], [Inc()])


def test_transactional_map_partial_attempt_then_replay_counts_once(sim_cluster, tmp_path):
    """Batch txid 1 = [a, boom, a], an updater calling multi_update per tuple. Attempt
    0 wrote a (+1, txid 1) through to the store, then raised at "boom"; the replay took
    the stored txid 1 for "applied already" and skipped both of a's updates: a = 1, one
    tuple lost. Now a transactional map holds a batch's writes until its commit, and
    a = 2."""
    box = Box()
    factory = SqliteMapState.transactional(str(tmp_path / "t.db"))
    spout = FixedBatchSpout(Fields("word"), 3, ["a"], ["boom"], ["a"])
    topology = TridentTopology()
    topology.new_stream("spout1", spout).partition_persist(
        factory, Fields("word"), PerTupleCount(box)
    )
    sim_cluster.submit_topology("pertuple", sim_conf(), topology.build())
    sim_cluster.advance_time(10)
    assert box.get().get("raised")
    assert coordinator_view(sim_cluster, "pertuple")["currentTxid"] > 2
    state = factory.make_state({}, None, 0, 1)
    assert state.multi_get([("a",), ("boom",)]) == [2, 1]


# -- the same, cut short by a function right after the spout --------------------------


class FlakyOnce(BaseFunction):
    """Passes the word through; raises once, the first time it sees ``box["boom"]``
    (a transient failure of a lookup, say)."""

    def __init__(self, box: Any) -> None:
        self.box = box

    def execute(self, tup: Any, collector: Any) -> None:
        b = self.box.get()
        if tup[0] == b["boom"] and not b.get("raised"):
            b["raised"] = True
            raise OSError("transient")
        collector.emit([tup[0]])


def test_transactional_spout_function_failure_with_pending_batches_counts_once(sim_cluster):
    """The test suite's own SeqTransactional spout (one partition, 2 records a batch),
    3 batches active at once, and a function right after the spout (so it runs inside
    the spout's emit) that raises once at record p0-2, the first record of txid 2.
    emit_batch_new of txid 2 is cut short, nothing is stored for txid 2, and txid 3,
    already started, is emitted from txid 1's metadata: records p0-2, p0-3 were in txid
    2's replay and in txid 3. Each counts once now."""
    box = Box()
    box.get().update(max_txid=10, boom="p0-2")
    memory = MemoryMapState.Factory()
    topology = TridentTopology()
    (
        topology.new_stream("spout1", SeqTransactional(box, partitions=1, records=10, per_batch=2))
        .each(Fields("word"), FlakyOnce(box), Fields("w"))
        .group_by(Fields("w"))
        .persistent_aggregate(memory, Count(), Fields("count"))
    )
    sim_cluster.submit_topology("flakyfn", _three_batches_at_once(), topology.build())
    sim_cluster.advance_time(20)
    assert box.get().get("raised")
    assert coordinator_view(sim_cluster, "flakyfn")["currentTxid"] > 8
    assert memory_counts(memory, 1) == {f"p0-{i}": 1 for i in range(10)}


# -- one state factory behind two aggregations (disjoint key spaces) -----------------


class Length(BaseFunction):
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([len(tup[0])])


def _two_aggregations(first: Any, second: Any) -> Any:
    spout = FixedBatchSpout(Fields("word"), 2, ["aa"], ["b"], ["aa"], ["ccc"])
    topology = TridentTopology()
    words = topology.new_stream("spout1", spout)
    words.group_by(Fields("word")).persistent_aggregate(first, Count(), Fields("n"))
    (
        words.each(Fields("word"), Length(), Fields("len"))
        .group_by(Fields("len"))
        .persistent_aggregate(second, Count(), Fields("n"))
    )
    return topology


def test_one_factory_behind_two_states_is_refused_naming_both(tmp_path: Any) -> None:
    """One MemoryMapState.Factory() (or two SQLite factories on one file and name)
    behind two persistent_aggregates: each state took the other's opaque batch record
    for an earlier attempt of its own txid and reverted its keys (the first's counts
    came out None). Refused at build, naming both and the place."""
    factory = MemoryMapState.Factory()
    with pytest.raises(InvalidTopologyError, match=r"both write their state to memory map"):
        _two_aggregations(factory, factory).build()
    path = str(tmp_path / "s.db")
    with pytest.raises(InvalidTopologyError, match=r"both write their state to SQLite file"):
        _two_aggregations(SqliteMapState(path), SqliteMapState(path)).build()
    _two_aggregations(SqliteMapState(path), SqliteMapState(path, name="lengths")).build()


def test_two_factories_behind_two_states_keep_both(sim_cluster: Any) -> None:
    words, lengths = MemoryMapState.Factory(), MemoryMapState.Factory()
    sim_cluster.submit_topology("apart", sim_conf(), _two_aggregations(words, lengths).build())
    sim_cluster.advance_time(10)
    assert memory_counts(words, 1) == {"aa": 2, "b": 1, "ccc": 1}
    assert memory_counts(lengths, 1) == {2: 2, 1: 1, 3: 1}


class _NothingNewEveryOther(_FlakyNewEmitter):
    """Returns no metadata at all for even txids (nothing new to read then, as an
    emitter may say), and reads on from the last batch that did."""

    def emit_batch_new(self, tx: Any, collector: Any, partitions: Any, last: Any) -> dict:
        if tx.transaction_id % 2 == 0:
            return {}
        return super().emit_batch_new(tx, collector, partitions, last)


class NothingNewEveryOther(FlakyTransactional):
    def get_emitter(self, conf: Any, context: Any) -> Any:
        return _NothingNewEveryOther(self.box, self.records, self.per_batch)


def test_a_batch_with_nothing_new_does_not_restart_the_partition(sim_cluster: Any) -> None:
    """A transactional spout's emitter returns no metadata for a batch (nothing new
    from the partition). Its success dropped every older metadata of the partition, so
    the next new batch read from the partition's start again: every record counted
    again. Now the newest metadata is kept, and each record counts once."""
    box = Box()
    box.get().update(max_txid=14, flaky_txid=-1)
    memory = MemoryMapState.Factory()
    topology = TridentTopology()
    (
        topology.new_stream("spout1", NothingNewEveryOther(box))
        .group_by(Fields("word"))
        .persistent_aggregate(memory, Count(), Fields("count"))
    )
    sim_cluster.submit_topology("sparse", sim_conf(), topology.build())
    sim_cluster.advance_time(20)
    assert coordinator_view(sim_cluster, "sparse")["currentTxid"] > 12
    assert memory_counts(memory, 1) == {f"p0-{i}": 1 for i in range(10)}
