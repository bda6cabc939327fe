"""Exact counts across a topology's lifecycle: killed between a state's commit and the
coordinator's record of it, then submitted again with another parallelism; and an
opaque spout's partition list changing while batches are in flight. Each test failed
before its fix (the docstrings say what a user saw)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from tupletree import Config, FailedException, Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MapState, SqliteMapState, State, StateFactory

from ..registry import Box
from .support import SeqOpaque, SeqTransactional, die_after_commit, memory_counts, sim_conf

# -- helpers ---------------------------------------------------------------------------


class _CommitThenFail(MapState):
    """Wraps a state: commits ``txid`` to the store, then fails the batch (as a worker
    that dies between the state's commit and the coordinator's record of it would)."""

    def __init__(self, inner: State, fail_txid: int) -> None:
        self.inner = inner
        self.fail_txid = fail_txid
        self.state_type = inner.state_type
        self.commit_empty_batches = getattr(inner, "commit_empty_batches", False)

    def begin_commit(self, txid: Any) -> None:
        self.inner.begin_commit(txid)

    def commit(self, txid: Any) -> None:
        self.inner.commit(txid)
        if txid == self.fail_txid:
            raise FailedException(f"test: dying after the state committed txid {txid}")

    def multi_get(self, keys: Any) -> Any:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: Any, updaters: Any) -> Any:
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: Any, vals: Any) -> None:
        self.inner.multi_put(keys, vals)


class CommitThenFail(StateFactory):
    def __init__(self, inner: Any, fail_txid: int) -> None:
        self.inner = inner
        self.fail_txid = fail_txid
        self.state_type = inner.state_type
        self.requires_deterministic_batches = inner.requires_deterministic_batches

    def location(self) -> Any:
        return self.inner.location()

    def make_state(self, conf: Any, metrics: Any, index: int, partitions: int) -> State:
        return _CommitThenFail(
            self.inner.make_state(conf, metrics, index, partitions), self.fail_txid
        )


def _progress_conf(tmp_path: Any, **extra: Any) -> dict[str, Any]:
    return sim_conf(
        **{
            Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: "sqlite",
            Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: {"path": str(tmp_path / "progress.db")},
        },
        **extra,
    )


def _count_topology(spout: Any, factory: Any, parallelism: int) -> Any:
    topology = TridentTopology()
    topology.new_stream("seq", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    ).parallelism_hint(parallelism)
    return topology.build()


def _stored_counts(path: str, words: list[str]) -> dict[str, Any]:
    state = SqliteMapState.opaque(path).make_state({}, None, 0, 1)
    state.begin_commit(None)
    got = state.multi_get([(w,) for w in words])
    return dict(zip(words, got, strict=True))


# -- Trident: kill between state commit and progress write, resubmit wider ------------


def test_an_opaque_state_resubmitted_wider_after_a_kill_between_commit_and_record_counts_once(
    sim_cluster: Any, tmp_path: Any
) -> None:
    """A user counts a transactional partitioned spout (2 partitions x 12 records, every
    record a distinct word) into ``SqliteMapState.opaque`` with ``persistent_aggregate``
    at parallelism 2. The worker dies after the state committed txid 2 but before the
    coordinator recorded it; the user resubmits the same topology under the same name,
    same progress store and state, with the aggregation at parallelism 3. docs/trident.md
    ("a topology submitted again with the same names and store resumes where it
    stopped") and docs/trident-state.md (transactional spout + opaque map: "exactly
    once") promise every word counted once. Seen before the fix: words of txid 2 that
    went to another state partition ended at no count (lost): a state partition read
    the old batch record of its index, found keys it did not write in the replay and
    reverted them to ``prev``, undoing their new partition's recomputed counts. Now
    each layout keeps records of its own."""
    db = str(tmp_path / "counts.db")
    spout = SeqTransactional(None, partitions=2, records=12, per_batch=4)
    words = [f"p{p}-{i}" for p in range(2) for i in range(12)]

    first = _count_topology(spout, CommitThenFail(SqliteMapState.opaque(db), 2), 2)
    sim_cluster.submit_topology("wc", _progress_conf(tmp_path), first)
    sim_cluster.advance_time(8)
    sim_cluster.kill_topology("wc")
    before = _stored_counts(db, words)
    assert before["p0-2"] == 1  # txid 2 was written to the state
    sim_cluster.submit_topology(
        "wc", _progress_conf(tmp_path), _count_topology(spout, SqliteMapState.opaque(db), 3)
    )
    sim_cluster.advance_time(15)
    counts = _stored_counts(db, words)
    assert counts == dict.fromkeys(words, 1)


# -- Trident: an opaque spout's partition list changes with batches in flight ----------


class _ListedCoordinator:
    """The partition list is whatever box["partitions"] holds now (a Kafka topic whose
    partitions the operator changes)."""

    def __init__(self, box: Any) -> None:
        self.box = box

    def get_partitions_for_batch(self) -> list[str]:
        return list(self.box.get()["partitions"])

    def is_ready(self, txid: int) -> bool:
        return True

    def close(self) -> None:
        pass


class ListedOpaque(SeqOpaque):
    def get_coordinator(self, conf: Any, context: Any) -> Any:
        return _ListedCoordinator(self.box)


def test_an_opaque_spouts_partition_moving_task_with_batches_in_flight_counts_once(
    sim_cluster: Any,
) -> None:
    """An opaque partitioned spout (3 partitions, read by 2 spout tasks, Storm's
    ``ordered[index::tasks]`` assignment) feeds a count into ``MemoryMapState``, with
    ``topology.max.spout.pending`` 3. While txid 2 is still being processed, partition p0
    goes away: the next batches deal p1 to task 0 (it was task 1's). docs/trident.md
    promises for an opaque spout that "every tuple succeeds in exactly one batch", and
    an opaque state is exactly once behind it. Seen before the fix: p1's record emitted by task 1 in
    txid 2 is emitted again by task 0 in txid 3 and counted twice, because task 0 reads
    p1 on from the last *committed* metadata (txid 1's), not from where the in-flight txid
    2 left it (held in task 1's memory). Now task 0 fails its batches until txid 2 has
    committed, then reads on from where it ended."""
    from tupletree.trident.state import MemoryMapState

    from .support import HoldAndFail, coordinator_view, memory_counts

    box = Box()
    box.get()["partitions"] = ["p0", "p1", "p2"]
    spout = ListedOpaque(box, partitions=3, records=10, per_batch=1)
    memory = MemoryMapState.Factory()
    topology = TridentTopology()
    topology.new_stream("seq", spout).parallelism_hint(2).group_by(
        Fields("word")
    ).persistent_aggregate(memory, Count(), Fields("count"))
    built = topology.build()
    (bolt,) = [
        c
        for c, s in built.components.items()
        if c != "seq" and any(i.stream == "$commit" for i in s.inputs)
    ]
    built.components[bolt].obj = HoldAndFail(built.components[bolt].obj, box, 2, set())
    conf = sim_conf(**{Config.TOPOLOGY_MAX_SPOUT_PENDING: 3})
    sim_cluster.submit_topology("parts", conf, built)
    sim_cluster.advance_time(3)
    phases = {a["txid"]: a["phase"] for a in coordinator_view(sim_cluster, "parts")["active"]}
    assert phases.get(2) == "PROCESSING", phases
    box.get()["partitions"] = ["p1", "p2"]  # p0 removed
    sim_cluster.advance_time(5)
    box.get()["release"] = True
    sim_cluster.advance_time(40)
    counts = memory_counts(memory, 1)
    for p in ("p1", "p2"):
        for i in range(10):
            assert counts.get(f"{p}-{i}") == 1, (f"{p}-{i}", counts)
    assert all(counts.get(f"p0-{i}", 0) <= 1 for i in range(10)), counts


# -- Trident: exactly-once sink, kill between its commit and progress write, resubmit --


from tupletree.trident.state.sinks import SqliteSinkFactory  # noqa: E402


class FailAfterCommitSink(SqliteSinkFactory):
    """A SQLite sink whose commit of ``fail_txid`` writes, then fails the batch."""

    def __init__(self, path: str, table: str, columns: Any, fail_txid: int) -> None:
        super().__init__(path, table, columns)
        self.fail_txid = fail_txid

    def make_state(self, conf: Any, metrics: Any, index: int, partitions: int) -> Any:
        return die_after_commit(
            super().make_state(conf, metrics, index, partitions), self.fail_txid
        )


def _sink_factory(path: str, fail_txid: int | None) -> Any:
    if fail_txid is None:
        return SqliteSinkFactory(path, "events", ["word"])
    return FailAfterCommitSink(path, "events", ["word"], fail_txid)


def _sink_topology(spout: Any, factory: Any, parallelism: int) -> Any:
    from tupletree.trident.state.sinks import SinkUpdater

    topology = TridentTopology()
    topology.new_stream("seq", spout).partition_by(Fields("word")).partition_persist(
        factory, Fields("word"), SinkUpdater()
    ).parallelism_hint(parallelism)
    return topology.build()


def test_a_sink_resubmitted_with_more_partitions_after_a_kill_writes_each_row_once(
    sim_cluster: Any, tmp_path: Any
) -> None:
    """A transactional partitioned spout (2 partitions x 12 records, each a distinct
    word) is written with ``partition_by(word)`` into ``SqliteSinkFactory`` at
    parallelism 2. The worker dies after the sink committed txid 2 but before the
    coordinator recorded it; the user resubmits under the same name and stores with the
    sink at parallelism 3. docs/trident-state.md promises the exactly-once sinks "exactly
    once, if no shuffle before the sink" (``partition_by`` is deterministic) and "a crash
    anywhere leaves either both or neither"; docs/trident.md that the resubmitted
    topology "resumes where it stopped". Seen before the fix: some of txid 2's rows were
    in the table twice: the sink's "already committed" txid is kept per partition
    *index*, and partition 2 (new) had none, so it appended the replayed rows that old
    partitions 0 and 1 had written. Now the old layout's records show txid 2 committed
    whole, and the new layout skips it."""
    import sqlite3

    path = str(tmp_path / "out.db")
    spout = SeqTransactional(None, partitions=2, records=12, per_batch=4)
    words = [f"p{p}-{i}" for p in range(2) for i in range(12)]
    sim_cluster.submit_topology(
        "sink", _progress_conf(tmp_path), _sink_topology(spout, _sink_factory(path, 2), 2)
    )
    sim_cluster.advance_time(8)
    sim_cluster.kill_topology("sink")
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 16  # txids 1, 2
    sim_cluster.submit_topology(
        "sink", _progress_conf(tmp_path), _sink_topology(spout, _sink_factory(path, None), 3)
    )
    sim_cluster.advance_time(15)
    with sqlite3.connect(path) as db:
        rows = dict(db.execute("SELECT word, COUNT(*) FROM events GROUP BY word").fetchall())
    assert rows == dict.fromkeys(words, 1)


def test_a_memory_map_state_resubmitted_wider_keeps_each_words_whole_count(
    sim_cluster: Any, tmp_path: Any
) -> None:
    """A word count (``persistent_aggregate(MemoryMapState.Factory("mm"), Count())``,
    grouped by word, 5 distinct words over 24 records) runs in a LocalCluster at
    parallelism 2 with a SQLite progress store, is killed after a batch, and is
    resubmitted in the same process under the same name and stores (the same-named
    memory factory) at parallelism 3. docs/trident-state.md 'Changing parallelism': "a
    topology submitted again (same names, same stores) with another parallelism_hint for
    a state resumes where it stopped, and deals keys to partitions anew"; opaque map
    behind a transactional spout: exactly once. Seen before the fix: a word's count
    was split between the old partition's map and the new one's (w0: 3 in partition
    0's, 2 in partition 1's): the memory map kept a map per partition index. Now a
    factory's partitions share one map, as a durable map's share one table."""
    from tupletree.trident.builtin import Count
    from tupletree.trident.state import MemoryMapState

    spout = SeqTransactional(None, partitions=2, records=12, per_batch=4, words=5)
    emitter = spout.get_emitter(None, None)
    expected = Counter(emitter.word(f"p{p}", i) for p in range(2) for i in range(12))
    name = f"mm-{uuid.uuid4().hex[:8]}"

    def topology(parallelism: int) -> Any:
        t = TridentTopology()
        t.new_stream("seq", spout).group_by(Fields("word")).persistent_aggregate(
            MemoryMapState.Factory(name), Count(), Fields("count")
        ).parallelism_hint(parallelism)
        return t.build()

    sim_cluster.submit_topology("wc", _progress_conf(tmp_path), topology(2))
    sim_cluster.advance_time(1.5)
    sim_cluster.kill_topology("wc")
    sim_cluster.submit_topology("wc", _progress_conf(tmp_path), topology(3))
    sim_cluster.advance_time(15)
    try:
        assert memory_counts(MemoryMapState.Factory(name)) == dict(expected)
    finally:
        MemoryMapState.Factory(name).forget()
