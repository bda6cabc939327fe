"""Rule 3 of Trident on a running topology: many batches in processing at once, commits
strictly in txid order. Five batches active, batch 2 held back in the aggregating bolt:
3, 4 and 5 finish processing first but commit only after 2; then a failed commit of 3
replays 3, 4 and 5 with attempt 1, never 1 or 2."""

from __future__ import annotations

from tupletree import Config, Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from ..registry import Box, entries
from .support import (
    HoldAndFail,
    RecordingFactory,
    Split,
    coordinator_view,
    memory_counts,
    sim_conf,
    word_counts,
)

SENTENCES = [f"w{i} common" for i in range(12)]


def test_batches_process_in_parallel_and_commit_in_txid_order(sim_cluster):
    spout = FixedBatchSpout(Fields("sentence"), 1, *[[s] for s in SENTENCES])
    memory = MemoryMapState.Factory()
    factory = RecordingFactory(memory)
    topology = TridentTopology()
    (
        topology.new_stream("spout1", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
    )
    built = topology.build()
    (bolt,) = [
        c for c, s in built.components.items() if any(i.stream == "$commit" for i in s.inputs)
    ]
    box = Box()
    wrapper = HoldAndFail(built.components[bolt].obj, box, hold=2, fail_commit={3})
    built.components[bolt].obj = wrapper
    sim_cluster.submit_topology("order", sim_conf(**{Config.TOPOLOGY_MAX_SPOUT_PENDING: 5}), built)

    sim_cluster.advance_time(10)
    view = coordinator_view(sim_cluster, "order")
    phases = {a["txid"]: (a["attempt"], a["phase"]) for a in view["active"]}
    # 1 committed; 2 held in processing; 3..6 processed, waiting for 2.
    assert view["lastCommittedTxid"] == 1
    assert phases == {
        2: (0, "PROCESSING"),
        3: (0, "PROCESSED"),
        4: (0, "PROCESSED"),
        5: (0, "PROCESSED"),
        6: (0, "PROCESSED"),
    }
    assert [t for _, t in factory.commits()] == [1]

    box.get()["release"] = True
    sim_cluster.advance_time(30)
    committed = [t for _, t in factory.commits()]
    assert committed == sorted(committed) and len(set(committed)) == len(committed)
    assert committed[:3] == [1, 2, 3] and len(committed) >= len(SENTENCES)

    seen = entries(wrapper.journal)
    attempts = {t: {a for _, tx, a in seen if tx == t} for t in range(1, 7)}
    assert attempts[1] == {0} and attempts[2] == {0}
    # The failed commit of 3 (attempt 0) replayed 3 and every later active batch.
    assert attempts[3] == {0, 1} and attempts[4] == {0, 1}
    assert attempts[5] == {0, 1} and attempts[6] == {0, 1}
    assert memory_counts(memory, 1) == word_counts(SENTENCES)
    assert sim_cluster.errors("order") == []
