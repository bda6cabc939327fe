"""A stream split in two branches, one of them repartitioned, merged back: the merge
used to join both branches' bolts into one that fed itself through the repartition
(found by an adversarial review, 2026-11-29)."""

from __future__ import annotations

from collections import Counter

from tupletree import Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Sum
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from .support import memory_counts, sim_conf

ROWS = [["a", 1], ["b", 2], ["a", 3], ["c", 4], ["b", 5]]


def _times(factor):
    return lambda tup: [[tup[0] * factor]]


def _expected():
    out = Counter()
    for k, n in ROWS:
        out[k] += 10 * n + 100 * n
    return dict(out)


def _run(cluster, t, factory, name):
    cluster.submit_topology(name, sim_conf(), t.build())
    cluster.advance_time(10)
    assert cluster.errors(name) == []
    assert memory_counts(factory) == _expected()


def test_merge_with_a_shuffled_branch_of_the_same_stream(sim_cluster):
    """s.each(x10) merged with s.shuffle().each(x100): build() refused it with
    "each function (node 4) would repartition the output of bolt s back into it; this
    happens when a state is queried from a stream that comes from the state's own
    bolt" (no state query anywhere). Storm's merge takes any streams of a batch group."""
    t = TridentTopology()
    s = t.new_stream("s", FixedBatchSpout(Fields("k", "n"), 2, *ROWS))
    a = s.each(Fields("n"), _times(10), Fields("m")).project(Fields("k", "m"))
    b = (
        s.shuffle()
        .parallelism_hint(3)
        .each(Fields("n"), _times(100), Fields("m"))
        .project(Fields("k", "m"))
    )
    memory = MemoryMapState.Factory()
    (
        t.merge(a, b)
        .group_by(Fields("k"))
        .persistent_aggregate(memory, Fields("m"), Sum(), Fields("sum"))
        .parallelism_hint(2)
    )
    _run(sim_cluster, t, memory, "diamond")


def test_merge_with_a_branch_repartitioned_twice(sim_cluster):
    """s.each(x10) merged with s.shuffle().each(x100).shuffle().each(...): build()
    accepted it, two bolts fed each other, and no batch ever completed: the state stayed
    empty, with no error reported, however long time ran."""
    t = TridentTopology()
    s = t.new_stream("s", FixedBatchSpout(Fields("k", "n"), 2, *ROWS))
    a = s.each(Fields("n"), _times(10), Fields("m")).project(Fields("k", "m"))
    b = (
        s.shuffle()
        .parallelism_hint(3)
        .each(Fields("n"), _times(100), Fields("m"))
        .project(Fields("k", "m"))
        .shuffle()
        .parallelism_hint(2)
        .each(Fields("m"), _times(1), Fields("m2"))
        .project(Fields("k", "m2"))
    )
    memory = MemoryMapState.Factory()
    (
        t.merge(a, b)
        .group_by(Fields("k"))
        .persistent_aggregate(memory, Fields("m"), Sum(), Fields("sum"))
    )
    _run(sim_cluster, t, memory, "cycle")
