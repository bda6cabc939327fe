"""Grouping on a field whose values are lists (tags, a path): the core fields grouping
routes them (runtime/routing.py), and Storm groups on a List; Trident's aggregations
and joins put the key in a dict and failed every batch, forever, with a bare
"TypeError: unhashable type: 'list'" (found by an adversarial review, 2026-11-29)."""

from __future__ import annotations

import pytest

from tupletree import Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count, MapGet, Sum
from tupletree.trident.operation import ReducerAggregator
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout
from tupletree.trident.tuple import make_tuple

from .support import Collect, TxidStateFactory, sim_conf

ROWS = [[["a", "b"], 1], [["a", "b"], 2], [["c"], 3], [["c"], 4], [[], 5]]


class Add(ReducerAggregator):
    def init(self) -> int:
        return 0

    def reduce(self, curr: int, tup) -> int:
        return curr + tup[0]


def test_list_valued_group_keys_aggregate_and_join(sim_cluster):
    """Batches of three. persistent_aggregate with a CombinerAggregator and with a
    ReducerAggregator, Count, and a join on the list field: each per key, as a Python
    computation over the lists as tuples."""
    t = TridentTopology()
    summed, reduced, counted = (MemoryMapState.Factory() for _ in range(3))
    s = t.new_stream("s", FixedBatchSpout(Fields("k", "n"), 3, *ROWS))
    g = s.group_by(Fields("k"))
    g.persistent_aggregate(summed, Fields("n"), Sum(), Fields("s")).parallelism_hint(2)
    g.persistent_aggregate(reduced, Fields("n"), Add(), Fields("s"))
    g.persistent_aggregate(counted, Count(), Fields("c"))
    joined = t.join(s, Fields("k"), s.project(Fields("k")), Fields("k"), Fields("k", "n"))
    c = Collect()
    joined.partition_persist(TxidStateFactory(), Fields("k", "n"), c)
    sim_cluster.submit_topology("lists", sim_conf(), t.build())
    sim_cluster.advance_time(6)
    assert sim_cluster.errors("lists") == []
    keys = [(("a", "b"),), (("c",),), ((),)]
    assert summed.make_state({}, None, 0, 1).multi_get(keys) == [3, 7, 5]
    assert reduced.make_state({}, None, 0, 1).multi_get(keys) == [3, 7, 5]
    assert counted.make_state({}, None, 0, 1).multi_get(keys) == [2, 2, 1]
    # MapGet with the list itself (a DRPC argument, say) finds the same key.
    query = make_tuple(["k"], [["a", "b"]])
    assert MapGet().batch_retrieve(summed.make_state({}, None, 0, 1), [query]) == [3]
    assert c.rows() == sorted(
        [[("a", "b"), 1]] * 2 + [[("a", "b"), 2]] * 2 + [[("c",), 3], [("c",), 4], [(), 5]],
        key=repr,
    )


def test_a_value_that_cannot_be_grouped_on_is_named():
    """A dict is no group key: the error names the operation, the field and the value."""
    from tupletree.trident.processors import group_key

    with pytest.raises(TypeError, match=r"counts: cannot group on the value .*\['tags'\]"):
        group_key({"x": 1}, ["tags"], "counts")
