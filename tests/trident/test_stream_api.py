"""The Stream API a Storm user knows, each operation checked by what reaches a state:
each (functions, filters, plain callables), map, flat_map, peek, project, the
aggregations, merge, join, FirstN, persistent_aggregate's new values, static state."""

from __future__ import annotations

from typing import Any

from tupletree import Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count, Debug, FirstN, MapGet, SnapshotGet, Sum
from tupletree.trident.operation import Aggregator, BaseFilter, ReducerAggregator
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from ..registry import entries, new_journal, record
from .support import Collect, Split, TxidStateFactory, sim_conf

ROWS = [["a b", 1], ["b c", 2], ["c d", 3], ["d e", 4], ["e f", 5]]


def source(t: TridentTopology, name: str = "src", rows: list[list[Any]] = ROWS, size: int = 2):
    return t.new_stream(name, FixedBatchSpout(Fields("sentence", "n"), size, *rows))


def collected(cluster: Any, t: TridentTopology, stream: Any, fields: list[str]) -> list[list[Any]]:
    c = Collect()
    stream.partition_persist(TxidStateFactory(), Fields(fields), c)
    cluster.submit_topology("api", sim_conf(), t.build())
    cluster.advance_time(8)
    assert cluster.errors("api") == []
    return c.rows()


class Odd(BaseFilter):
    def is_keep(self, tup: Any) -> bool:
        return tup.get("n") % 2 == 1


def test_each_with_functions_filters_and_plain_callables(sim_cluster):
    t = TridentTopology()
    s = (
        source(t)
        .each(Fields("n"), Odd())
        .each(Fields("sentence"), Split(), Fields("word"))
        .each(Fields("word"), lambda tup: ([tup[0] * 2],), Fields("twice"))
        .filter(lambda tup: tup.get("word") != "e")
        .each(Fields("word", "n"), lambda tup: tup.get("n") > 1)
    )
    rows = collected(sim_cluster, t, s, ["word", "twice", "n"])
    assert rows == sorted([["c", "cc", 3], ["d", "dd", 3], ["f", "ff", 5]], key=repr)


def test_map_flat_map_peek_project(sim_cluster):
    seen = new_journal()
    t = TridentTopology()
    s = (
        source(t)
        .map(lambda tup: [tup.get("sentence").upper(), tup.get("n") * 10])
        .flat_map(lambda tup: [[w] for w in tup[0].split()], Fields("w"))
        .peek(lambda tup: record(seen, tup.get("w")))
        .each(Fields("w"), lambda tup: [[len(tup[0])]], Fields("len"))
        .project(Fields("w"))
    )
    rows = collected(sim_cluster, t, s, ["w"])
    words = [w for r, _ in ROWS for w in r.upper().split()]
    assert rows == sorted(([w] for w in words), key=repr)
    assert sorted(entries(seen)) == sorted(words)


class MaxReducer(ReducerAggregator):
    def init(self) -> int:
        return -1

    def reduce(self, curr: int, tup: Any) -> int:
        return max(curr, tup[0])


class Spread(Aggregator):
    """min and max of the input per batch (an Aggregator with a state and one emit)."""

    def init(self, batch_id: Any, collector: Any) -> list[Any]:
        return [None, None]

    def aggregate(self, state: list[Any], tup: Any, collector: Any) -> None:
        v = tup[0]
        state[0] = v if state[0] is None else min(state[0], v)
        state[1] = v if state[1] is None else max(state[1], v)

    def complete(self, state: list[Any], collector: Any) -> None:
        collector.emit(state)


def test_global_aggregations_per_batch(sim_cluster):
    """aggregate() gives one tuple per batch, whatever the parallelism (batches of 2:
    [1, 2], [3, 4], [5])."""
    t = TridentTopology()
    s = source(t).shuffle().parallelism_hint(3).each(Fields("n"), lambda tup: True)
    a = s.aggregate(Fields("n"), Sum(), Fields("sum"))
    b = s.aggregate(Fields("n"), MaxReducer(), Fields("max"))
    c = s.aggregate(Fields("n"), Spread(), Fields("lo", "hi"))
    ca, cb, cc = Collect(), Collect(), Collect()
    a.partition_persist(TxidStateFactory(), Fields("sum"), ca)
    b.partition_persist(TxidStateFactory(), Fields("max"), cb)
    c.partition_persist(TxidStateFactory(), Fields("lo", "hi"), cc)
    sim_cluster.submit_topology("agg", sim_conf(), t.build())
    sim_cluster.advance_time(8)
    assert sim_cluster.errors("agg") == []
    assert [r for r in ca.rows() if r != [0]] == sorted([[3], [5], [7]], key=repr)
    assert [r for r in cb.rows() if r != [-1]] == sorted([[2], [4], [5]], key=repr)
    # An empty batch completes the Aggregator's initial state once (Storm's single emit).
    assert [r for r in cc.rows() if r != [None, None]] == [[1, 2], [3, 4], [5, 5]]
    # Empty batches answer the zero once, not once per task.
    per_batch = [len(rows) for _, rows in entries(ca.journal)]
    assert set(per_batch) == {1}


def test_grouped_and_partition_aggregations(sim_cluster):
    t = TridentTopology()
    words = source(t).each(Fields("sentence"), Split(), Fields("word"))
    counted = words.group_by(Fields("word")).aggregate(Count(), Fields("count"))
    rows = collected(sim_cluster, t, counted, ["word", "count"])
    # per batch: [a b, b c] -> b:2; [c d, d e] -> d:2; [e f]
    assert rows == sorted(
        [["a", 1], ["b", 2], ["c", 1], ["c", 1], ["d", 2], ["e", 1], ["e", 1], ["f", 1]],
        key=repr,
    )


def test_merge_and_join(sim_cluster):
    t = TridentTopology()
    left = source(t, "left", [["k1", 1], ["k2", 2]]).project(Fields("sentence", "n"))
    right = source(t, "right", [["k1", 10], ["k3", 30]])
    merged = t.merge(left, right).each(Fields("n"), lambda tup: [[tup[0] + 1]], Fields("m"))
    joined = t.join(left, Fields("sentence"), right, Fields("sentence"), Fields("k", "a", "b"))
    outer = t.join(
        left, Fields("sentence"), right, Fields("sentence"), Fields("k", "a", "b"), "outer"
    )
    cm, cj, co = Collect(), Collect(), Collect()
    merged.partition_persist(TxidStateFactory(), Fields("sentence", "m"), cm)
    joined.partition_persist(TxidStateFactory(), Fields("k", "a", "b"), cj)
    outer.partition_persist(TxidStateFactory(), Fields("k", "a", "b"), co)
    sim_cluster.submit_topology("mj", sim_conf(), t.build())
    sim_cluster.advance_time(6)
    assert sim_cluster.errors("mj") == []
    assert cm.rows() == sorted([["k1", 2], ["k1", 11], ["k2", 3], ["k3", 31]], key=repr)
    assert cj.rows() == [["k1", 1, 10]]
    assert co.rows() == sorted([["k1", 1, 10], ["k2", 2, None], ["k3", None, 30]], key=repr)


def test_first_n_and_debug(sim_cluster, capsys):
    t = TridentTopology()
    s = (
        source(t, size=5)
        .each(Fields("n"), Debug("seen"))
        .parallelism_hint(2)  # capped: FixedBatchSpout runs in one task
        .shuffle()
        .parallelism_hint(3)
        .apply_assembly(FirstN(2, "n", reverse=True))
    )
    rows = collected(sim_cluster, t, s, ["sentence", "n"])
    assert rows == sorted([["d e", 4], ["e f", 5]], key=repr)
    assert capsys.readouterr().out.count("DEBUG(seen): ") == 5


def test_persistent_aggregate_new_values_and_queries(sim_cluster):
    t = TridentTopology()
    words = source(t).each(Fields("sentence"), Split(), Fields("word"))
    counts = words.group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.Factory(), Count(), Fields("count")
    )
    total = words.persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("total"))
    news = counts.new_values_stream()
    lookup = news.state_query(total, SnapshotGet(), Fields("total"))
    rows = collected(sim_cluster, t, lookup, ["word", "count", "total"])
    # After each batch, each word's count so far and the total so far.
    assert rows == sorted(
        [
            ["a", 1, 4],
            ["b", 2, 4],
            ["c", 1, 4],
            ["c", 2, 8],
            ["d", 2, 8],
            ["e", 1, 8],
            ["e", 2, 10],
            ["f", 1, 10],
        ],
        key=repr,
    )


def test_state_query_of_a_static_state(sim_cluster):
    factory = MemoryMapState.Factory()
    state = factory.make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_put([("a",), ("c",)], ["A", "C"])
    state.commit(1)
    t = TridentTopology()
    static = t.new_static_state(factory)
    s = (
        source(t)
        .each(Fields("sentence"), Split(), Fields("word"))
        .state_query(static, Fields("word"), MapGet(), Fields("up"))
    )
    rows = collected(sim_cluster, t, s, ["word", "up"])
    assert ["a", "A"] in rows and ["c", "C"] in rows and ["b", None] in rows
