"""Batch (topology/batch.py): its columns and rows, and the one ACK per tree it sends
when acked whole, which must be what acking each of its rows would send."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.runtime.collectors import OutputCollector, TaskWiring
from tupletree.topology.batch import Batch
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

SRC = TupleSource("split", "pairs", 3, Fields(["word", "n"]))
ids = st.integers(min_value=1, max_value=2**64 - 1)


@st.composite
def tuples(draw: Any) -> list[Tuple]:
    """Rows of one source in a few trees, as they arrive: a tree's rows mostly in a
    row, some untracked, some in several trees."""
    roots = draw(st.lists(ids, min_size=1, max_size=4))
    out = []
    for i in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["one", "one", "one", "none", "several"]))
        if kind == "none":
            out.append(Tuple([f"w{i}", i], SRC))
        elif kind == "one":
            out.append(Tuple([f"w{i}", i], SRC, draw(st.sampled_from(roots)), draw(ids)))
        else:
            trees = draw(st.dictionaries(st.sampled_from(roots) | ids, ids, min_size=2))
            out.append(Tuple([f"w{i}", i], SRC, 0, 0, trees))
    return out


def as_tuples(batch: Batch) -> list[Tuple]:
    """One Tuple per row of ``batch``, in its rows' trees (a Batch with an edge per row:
    one from Batch.of_tuples or from a frame)."""
    return [
        in_trees(batch.row(i), batch._src, batch._trees_of(i) or None) for i in range(len(batch))
    ]


def acked_one_by_one(rows: list[Tuple], skip: set[int]) -> dict[int, int]:
    """What OutputCollector.ack sends for each row (its turn's combined acks), less
    the acks to failed trees (``skip``), which the batch does not send."""
    out = OutputCollector(TaskWiring("b", 1, {}, {}))
    for tup in rows:
        out.ack(tup)
    return {root: val for root, val in out.acks.items() if root not in skip}


@settings(max_examples=300, deadline=None)
@given(tuples(), st.data())
def test_acking_a_batch_sends_what_acking_each_row_sends(rows: list[Tuple], data: Any) -> None:
    batch = Batch.of_tuples(rows)
    roots = batch._all_roots()
    skip = set(data.draw(st.lists(st.sampled_from(roots))) if roots else [])
    acks: dict[int, int] = {}
    batch.tree_acks(acks, skip or None)
    want = acked_one_by_one(rows, skip)
    assert {r: v for r, v in acks.items() if v} == {r: v for r, v in want.items() if v}
    assert set(roots) == {r for t in rows for r in t._tree_edges()}


@settings(max_examples=100, deadline=None)
@given(tuples())
def test_a_batch_gives_back_its_rows_as_tuples_and_trees(rows: list[Tuple]) -> None:
    batch = Batch.of_tuples(rows)
    assert len(batch) == len(rows)
    back = as_tuples(batch)
    assert [(t.values, t._tree_edges()) for t in back] == [
        (t.values, t._tree_edges()) for t in rows
    ]
    for i, t in enumerate(rows):
        assert batch._trees_of(i) == t._tree_edges()
        assert batch.row(i) == t.values
    assert list(batch) == [t.values for t in rows]
    assert batch.column("n") == [t.values[1] for t in rows]
    assert batch.column(0) == [t.values[0] for t in rows]


def test_columns_are_the_callers_own_and_bad_names_are_named() -> None:
    batch = Batch.of_tuples([Tuple(["a", 1], SRC), Tuple(["b", 2], SRC)])
    words = batch.column("word")
    words.append("mine")
    assert batch.column("word") == ["a", "b"]  # the batch is unchanged
    one = Batch.of_tuples([Tuple(["x"], TupleSource("s", "default", 1, Fields(["w"])))])
    one.column("w").clear()
    assert one.column("w") == ["x"]
    with pytest.raises(KeyError, match=r"no field 'count'; fields are \['word', 'n'\]"):
        batch.column("count")
    with pytest.raises(IndexError, match=r"no field at position 2; fields are \['word', 'n'\]"):
        batch.column(2)
    with pytest.raises(IndexError, match="row 2 of a batch of 2 row"):
        batch.row(2)
    assert batch.row(-1) == ["b", 2]
    assert repr(batch) == "Batch(2 row(s), source=split:3, stream='pairs')"
    assert (batch.source_component, batch.source_stream, batch.source_task) == ("split", "pairs", 3)
    assert batch.fields == ["word", "n"] and not batch.is_tick()


@settings(max_examples=200, deadline=None)
@given(tuples())
def test_a_batch_cut_in_two_keeps_every_row_and_cuts_no_run(rows: list[Tuple]) -> None:
    batch = Batch.of_tuples(rows)
    parts = batch._split()
    if len(batch._roots) < 2:
        assert parts is None
        return
    assert parts is not None
    first, second = parts
    assert len(first) and len(second)
    back = as_tuples(first) + as_tuples(second)
    assert [(t.values, t._tree_edges()) for t in back] == [
        (t.values, t._tree_edges()) for t in rows
    ]
    assert first._roots + second._roots == batch._roots  # runs whole, none cut
    assert first._counts + second._counts == batch._counts
