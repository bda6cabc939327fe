"""Batches on the wire (distributed/frames.py with topology/batch.py): a BatchBolt's
emits travel as Batch items in a peer's task lists, and a run of tuples reaches a
BatchBolt's task as one Batch. Whatever mix of Tuples and Batches is sent, every row
arrives with its values, source and trees, in order per task, whichever form the
receiving task takes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed.frames import MAX_ROOT_RUN, decode, encode
from tupletree.distributed.transport import _dumps
from tupletree.topology.batch import Batch
from tupletree.topology.tuple import Tuple

from ..topology.test_batch import as_tuples
from .test_frames import SOURCES, canon, ids, value

BATCH_TASKS = {1, 3}


@st.composite
def tuples_of_one_source(draw: Any) -> list[Tuple]:
    src = draw(st.sampled_from(SOURCES))
    roots = draw(st.lists(st.sampled_from([7, 2**64 - 1]) | ids, min_size=1, max_size=3))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        values = [draw(value) for _ in range(len(src.fields))]
        kind = draw(st.sampled_from(["none", "one", "one", "one", "several"]))
        if kind == "none":
            out.append(Tuple(values, src))
        elif kind == "one":
            out.append(Tuple(values, src, draw(st.sampled_from(roots)), draw(ids)))
        else:
            trees = draw(st.dictionaries(ids, ids, min_size=2, max_size=3))
            out.append(Tuple(values, src, 0, 0, trees))
    return out


@st.composite
def sent_items(draw: Any) -> list[Any]:
    """A task's list: Tuples and Batches (a BatchBolt's buffered emits), mixed."""
    out: list[Any] = []
    for group in draw(st.lists(tuples_of_one_source(), max_size=5)):
        if draw(st.booleans()):
            out.append(Batch.of_tuples(group))
        else:
            out.extend(group)
    return out


def rows(items: list[Any]) -> list[Tuple]:
    """Every row, as the Tuple a plain bolt would get."""
    out: list[Tuple] = []
    for item in items:
        out.extend(as_tuples(item) if type(item) is Batch else [item])
    return out


def summary(tup: Tuple) -> Any:
    src = tup._src
    return (canon(tup.values), src.component, src.stream, src.task, tup._tree_edges())


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 3), sent_items(), max_size=4))
def test_rows_arrive_equal_as_tuples_or_as_batches(lists: dict[int, list[Any]]) -> None:
    got: dict[int, list[Any]] = {task: [] for task in lists}
    data = encode({t: list(items) for t, items in lists.items()}, _dumps)
    n = decode(data, {}, {t: got[t].extend for t in lists}, batch_tasks=BATCH_TASKS)
    assert n == sum(len(rows(items)) for items in lists.values())
    for task, items in lists.items():
        if task in BATCH_TASKS:
            assert all(type(item) is Batch for item in got[task])
        else:
            assert all(type(item) is Tuple for item in got[task])
        assert [summary(t) for t in rows(got[task])] == [summary(t) for t in rows(items)]


def test_a_run_of_one_source_is_one_batch_and_long_trees_keep_their_roots() -> None:
    """Tuples and a Batch of one source in a row make one run, hence one Batch on
    arrival; a tree longer than a root run's limit keeps its root on every row."""
    src = SOURCES[0]
    long_tree = [Tuple([f"w{i}"], src, 2**63 + 1, 1000 + i) for i in range(MAX_ROOT_RUN + 45)]
    sent: list[Any] = [Tuple(["a"], src, 5, 6), Batch.of_tuples(long_tree), Tuple(["b"], src)]
    got: list[Any] = []
    decode(encode({1: sent}), {}, {1: got.extend}, batch_tasks={1})
    assert len(got) == 1 and len(got[0]) == len(long_tree) + 2
    assert [summary(t) for t in as_tuples(got[0])] == [summary(t) for t in rows(sent)]
    assert got[0].column("word")[:2] == ["a", "w0"]
    acks: dict[int, int] = {}
    got[0].tree_acks(acks)
    want = 0
    for t in long_tree:
        want ^= t._edge
    assert acks == {5: 6, 2**63 + 1: want}


def test_a_batch_whose_values_do_not_fit_its_rows_is_refused() -> None:
    src = SOURCES[1]  # two fields
    bad = Batch(src, ["only one value"], [0], [1], [0])
    try:
        encode({1: [bad]})
    except ValueError as exc:
        assert "1 value(s) for 1 row(s) of 2 field(s)" in str(exc)
        assert "'split'" in str(exc) and "'pairs'" in str(exc)
    else:
        raise AssertionError("encode took a batch with too few values")


def test_a_batch_run_takes_whole_root_runs_and_the_columns_of_a_frame_of_one_run() -> None:
    """A run of a BatchBolt's task that starts and ends with the frame's root runs gets
    their slices (runs of one tree past MAX_ROOT_RUN included); one that cuts a root run
    is made row by row; either way every row keeps its tree and edge."""
    src = SOURCES[0]
    long_run = [Tuple([f"w{i}"], src, 2**63 + 5, 0 if i else 77) for i in range(MAX_ROOT_RUN + 3)]
    words = [Batch.of_tuples([Tuple(["a"], src, 11, 12), Tuple(["b"], src, 11, 0)])]
    words.append(Batch.of_tuples(long_run))
    words.append(Batch.of_tuples([Tuple(["c"], src, 0, 0)]))
    for lists in ({1: words}, {1: words, 2: [Tuple(["x"], src, 11, 3)], 3: words[:1]}):
        got: dict[int, list[Any]] = {task: [] for task in lists}
        decode(encode(lists), {}, {t: got[t].extend for t in lists}, batch_tasks={1, 3})
        for task, items in lists.items():
            assert [summary(t) for t in rows(got[task])] == [summary(t) for t in rows(items)]
            assert [t._edge for t in rows(got[task])] == [t._edge for t in rows(items)]
        batch = got[1][0]
        assert sum(batch._counts) == len(batch) == len(long_run) + 3
        assert len(batch._roots) == len(batch._counts)
