"""Group keys that Python calls equal (1, 1.0, True) are one group in a map state, in
whatever batches they come: the grouping (runtime/hashing.py) and every dict of a batch
go by Python's equality, and so must the stored key (found by an adversarial review,
2026-11-29)."""

from __future__ import annotations

from collections import Counter

from tupletree import Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState, SqliteMapState
from tupletree.trident.testing import FixedBatchSpout

from .support import sim_conf

ROWS = [[1], [1.0], [True], [1], [None], [None], [2.5], [2.5]]


def _count(cluster, factory, name):
    t = TridentTopology()
    (
        t.new_stream("s", FixedBatchSpout(Fields("k"), 2, *ROWS))
        .group_by(Fields("k"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(2)
    )
    cluster.submit_topology(name, sim_conf(), t.build())
    cluster.advance_time(10)
    assert cluster.errors(name) == []


def test_equal_keys_in_other_batches_count_as_one_key_in_memory_state(sim_cluster):
    """Batches of two: [1, 1.0], [True, 1], [None, None], [2.5, 2.5]. Batch 1 stored its
    count under key 1 (JSON "[1]") and batch 2 under True ("[true]"): the state held two
    rows, 1 -> 2 and True -> 2, and a lookup of 1 answered 2 where a Python Counter of
    the same values says 4."""
    memory = MemoryMapState.Factory()
    _count(sim_cluster, memory, "eq-memory")
    rows = sorted(MemoryMapState(memory.id).get_tuples(), key=repr)
    expected = Counter(r[0] for r in ROWS)
    assert len(rows) == len(expected), rows
    state = memory.make_state({}, None, 0, 1)
    assert state.multi_get([(1,), (1.0,), (True,), (None,), (2.5,)]) == [4, 4, 4, 2, 2]


def test_equal_keys_in_other_batches_count_as_one_key_in_sqlite_state(sim_cluster, tmp_path):
    """The same with a durable state: SqliteMapState.opaque kept rows "[1]" and "[true]"
    for one group."""
    factory = SqliteMapState.opaque(str(tmp_path / "eq.db"))
    _count(sim_cluster, factory, "eq-sqlite")
    state = factory.make_state({}, None, 0, 1)
    assert state.multi_get([(1,), (1.0,), (True,), (None,), (2.5,)]) == [4, 4, 4, 2, 2]
