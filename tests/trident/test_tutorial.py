"""The Trident tutorial's word count with its DRPC query, on simulated time, while the
aggregating bolt fails attempt 0 of every batch: in the processing phase for some, in
the commit phase for others (before its state wrote anything, and after). The counts
stay exact, each txid is committed once and in txid order, the DRPC sum is exact."""

from __future__ import annotations

from typing import Any

from tupletree import Config, Fields
from tupletree.drpc import LocalDRPC
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count, FilterNull, MapGet, Sum
from tupletree.trident.planner import master_id
from tupletree.trident.progress import Progress, memory_store_name, open_progress
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from ..registry import entries
from .support import (
    FailAttemptZero,
    RecordingFactory,
    Split,
    drpc_execute,
    many_sentences,
    memory_counts,
    sim_conf,
    word_counts,
)

SENTENCES = many_sentences(40)
BATCH = 4
BATCHES = len(SENTENCES) // BATCH  # 10 non-empty batches, txids 1..10


def tutorial(drpc: Any, factory: Any) -> tuple[TridentTopology, Any]:
    spout = FixedBatchSpout(Fields("sentence"), BATCH, *[[s] for s in SENTENCES])
    spout.set_cycle(False)
    topology = TridentTopology()
    counts = (
        topology.new_stream("spout1", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    (
        topology.new_drpc_stream("words", drpc)
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    return topology, counts


def aggregating_bolt(built: Any) -> str:
    (cid,) = [
        c for c, spec in built.components.items() if any(s.stream == "$commit" for s in spec.inputs)
    ]
    return cid


def test_tutorial_counts_are_exact_while_attempt_zero_of_every_batch_fails(sim_cluster):
    txids = range(1, BATCHES + 1)
    processing = {t for t in txids if t % 2 == 1}
    fail_begin = {t for t in txids if t % 4 == 0}
    fail_commit = {t for t in txids if t % 4 == 2}  # after the state wrote its updates
    memory = MemoryMapState.Factory()
    factory = RecordingFactory(memory, fail_begin=fail_begin, fail_commit=fail_commit)
    with LocalDRPC() as drpc:
        topology, _ = tutorial(drpc, factory)
        built = topology.build()
        bolt = aggregating_bolt(built)
        wrapper = FailAttemptZero(built.components[bolt].obj, processing, set())
        built.components[bolt].obj = wrapper
        conf = sim_conf(**{Config.TOPOLOGY_MAX_SPOUT_PENDING: 3})
        sim_cluster.submit_topology("wc", conf, built)
        sim_cluster.advance_time(60)

        # Every planned failure happened, in the phase planned.
        assert {t for _, t in entries(wrapper.journal)} == processing
        failed = entries(factory.failed)
        assert {t for _, t, where in failed if where == "begin"} == fail_begin
        assert {t for _, t, where in failed if where == "commit"} == fail_commit

        # The counts are exact: nothing lost, nothing counted twice.
        assert memory_counts(memory, 2) == word_counts(SENTENCES)

        # Each partition committed each txid once, in txid order.
        for p in (0, 1):
            seen = [t for q, t in factory.commits() if q == p]
            assert seen == sorted(set(seen)), f"partition {p} committed out of order: {seen}"
            assert set(txids) <= set(seen)

        # The coordinator recorded every txid committed, once (its compare-and-set).
        coordinator = sim_cluster.metrics("wc")[master_id("bg0")]["custom"]["trident"]
        (snap,) = coordinator.values()
        assert snap["replayed"] >= len(processing) + len(fail_begin) + len(fail_commit)
        name, pid = built.components[master_id("bg0")].obj.progress_name
        store = open_progress(conf, memory_store_name(name, "wc"), pid)
        log = Progress(store, ["spout1"]).commits("spout1")
        last = snap["lastCommittedTxid"]
        assert sorted(log) == list(range(1, last + 1))
        assert last >= BATCHES

        # The tutorial's query: the sum of the counts of its words.
        counts = word_counts(SENTENCES)
        query = "cat the dog jumped moon"
        expected = sum(counts.get(w, 0) for w in query.split())
        assert drpc_execute(sim_cluster, drpc, "words", query) == f"[[{expected}]]"
        assert sim_cluster.errors("wc") == []


def test_tutorial_answers_storms_example(sim_cluster):
    """Storm's tutorial: four sentences; "cat the dog jumped" is [[5]]."""
    spout = FixedBatchSpout(
        Fields("sentence"),
        3,
        ["the cow jumped over the moon"],
        ["the man went to the store and bought some candy"],
        ["four score and seven years ago"],
        ["how many apples can you eat"],
    )
    spout.set_cycle(False)
    with LocalDRPC() as drpc:
        topology = TridentTopology()
        counts = (
            topology.new_stream("spout1", spout)
            .each(Fields("sentence"), Split(), Fields("word"))
            .group_by(Fields("word"))
            .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count"))
            .parallelism_hint(6)
        )
        (
            topology.new_drpc_stream("words", drpc)
            .each(Fields("args"), Split(), Fields("word"))
            .group_by(Fields("word"))
            .state_query(counts, Fields("word"), MapGet(), Fields("count"))
            .each(Fields("count"), FilterNull())
            .aggregate(Fields("count"), Sum(), Fields("sum"))
        )
        sim_cluster.submit_topology("wc", sim_conf(), topology.build())
        sim_cluster.advance_time(5)
        assert drpc_execute(sim_cluster, drpc, "words", "cat the dog jumped") == "[[5]]"
        assert drpc_execute(sim_cluster, drpc, "words", "nothing here") == "[[0]]"
