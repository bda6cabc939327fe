"""The frame layout (distributed/frames.py): whatever is appended to a peer's task lists comes
out of encode -> pickle -> decode as equal items, in the same order per task."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed.frames import PeerBuffer, decode, encode
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

SOURCES = [
    TupleSource("split", "default", 3, Fields(["word"])),
    TupleSource("split", "pairs", 3, Fields(["word", "n"])),
    TupleSource("sentences", "default", 1, Fields(["sentence"])),
    TupleSource("empty", "signals", 5, Fields([])),
]
ids = st.integers(min_value=1, max_value=2**64 - 1)
value = st.one_of(
    st.text(max_size=5), st.integers(), st.none(), st.lists(st.integers(), max_size=2)
)


@st.composite
def items(draw: Any) -> Any:
    kind = draw(st.sampled_from(["tuple", "ack", "reply", "odd"]))
    if kind == "ack":
        return (draw(st.integers(0, 3)), draw(ids), draw(st.integers(0, 2**64 - 1)), 0)
    if kind == "reply":
        return (draw(st.integers(10, 13)), draw(ids))
    if kind == "odd":  # not the runtime's messages: must still arrive as they were sent
        return tuple(draw(st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=5)))
    src = draw(st.sampled_from(SOURCES))
    values = [draw(value) for _ in range(len(src.fields))]
    trees = draw(st.sampled_from(["none", "one", "several"]))
    if trees == "none":
        return Tuple(values, src)
    if trees == "one":
        return Tuple(values, src, draw(ids), draw(ids))
    return in_trees(values, src, draw(st.dictionaries(ids, ids, min_size=2, max_size=3)))


def summary(item: Any) -> Any:
    """What must survive the trip: values, source and trees of a tuple; anything else as is."""
    if type(item) is Tuple:
        src = item._src
        return (
            "T",
            item.values,
            src.component,
            src.stream,
            src.task,
            src.fields.to_list(),
            item._tree_edges(),
            item._root,
            item._edge,
            item._ack_val,
        )
    return item


def trip(lists: dict[int, list[Any]]) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = {task: [] for task in lists}
    frame = pickle.loads(pickle.dumps(encode(lists)))
    n = decode(frame, {}, {task: got[task].append for task in lists})
    assert n == sum(len(v) for v in lists.values())
    return got


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), items()), max_size=40))
def test_every_item_arrives_equal_and_in_order_per_task(appends: list[tuple[int, Any]]) -> None:
    buffer = PeerBuffer()
    for task, item in appends:
        buffer.inbox(task).append(item)
    assert len(buffer) == len(appends)
    taken = buffer.take()
    assert len(buffer) == 0 and all(inbox == [] for inbox in buffer.lists.values())
    got = trip(taken)
    for task, items_sent in taken.items():
        assert [summary(t) for t in got[task]] == [summary(t) for t in items_sent]
    assert sum(len(v) for v in taken.values()) == len(appends)


def test_one_source_object_per_source_across_frames() -> None:
    """The receiver rebuilds each source once, so tuples share it as locally emitted ones do."""
    known: dict[tuple[Any, ...], TupleSource] = {}
    got: list[Any] = []
    for word in ("a", "b"):
        frame = pickle.loads(pickle.dumps(encode({7: [Tuple([word], SOURCES[0], 1, 2)]})))
        decode(frame, known, {7: got.append})
    assert got[0]._src is got[1]._src and len(known) == 1


def test_a_tuple_not_matching_its_fields_is_refused_by_name() -> None:
    """No collector emits one; if one is ever built by hand, encode says what it is."""
    bad = Tuple(["only one"], SOURCES[1])
    with pytest.raises(ValueError, match=r"'split' on stream 'pairs' has 1 value\(s\) for 2"):
        encode({2: [bad]})
