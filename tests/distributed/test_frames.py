"""The frame layout (distributed/frames.py): whatever is appended to a peer's task lists comes
out of encode -> decode as equal items (same types, same values), in the same order per
task (acks too, one by one: they are not combined); a tampered frame is refused before
anything of it is read."""

from __future__ import annotations

import enum
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed import frames
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.frames import (
    PICKLED,
    PLAIN,
    TEXT,
    PeerBuffer,
    decode,
    encode,
    values_coding,
)
from tupletree.distributed.sealing import MAC_BYTES, Link, link_key, open_frame
from tupletree.distributed.transport import _dumps
from tupletree.reliability.protocol import ACK, FAIL, INIT
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

SOURCES = [
    TupleSource("split", "default", 3, Fields(["word"])),
    TupleSource("split", "pairs", 3, Fields(["word", "n"])),
    TupleSource("sentences", "default", 1, Fields(["sentence"])),
    TupleSource("empty", "signals", 5, Fields([])),
]
ids = st.integers(min_value=1, max_value=2**64 - 1)


class Word(str):
    """A str subclass: must come back as a Word, not a str."""


class Colour(enum.IntEnum):
    RED = 1


def _local_class() -> Any:
    class Reading:  # plain pickle cannot name it: the cloudpickle fallback carries it
        def __init__(self, n: int) -> None:
            self.n = n

        def __eq__(self, other: object) -> bool:
            return type(other).__name__ == "Reading" and other.n == self.n  # type: ignore[attr-defined]

        def __repr__(self) -> str:
            return f"Reading({self.n})"

    return Reading


Reading = _local_class()

scalar = st.one_of(
    st.text(max_size=5),  # NULs and lone surrogates included
    st.integers(),  # big and negative ones included
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
)
value = st.one_of(
    scalar,
    scalar,
    st.lists(st.integers(), max_size=2),
    st.builds(bytearray, st.binary(max_size=3)),
    st.builds(Word, st.text(max_size=3)),
    st.just(Colour.RED),
    st.builds(Reading, st.integers(0, 9)),
)


@st.composite
def items(draw: Any) -> Any:
    kind = draw(st.sampled_from(["tuple", "tuple", "ack", "reply", "odd"]))
    if kind == "ack":
        # Few roots, so that acks to one tree meet in a frame.
        root = draw(st.sampled_from([1, 2, 2**64 - 1]) | ids)
        return (draw(st.integers(0, 3)), root, draw(st.integers(0, 2**64 - 1)), 0)
    if kind == "reply":
        return (draw(st.integers(10, 13)), draw(ids))
    if kind == "odd":  # not the runtime's messages: must still arrive as they were sent
        return tuple(draw(st.lists(st.one_of(st.integers(), st.text(max_size=2)), max_size=5)))
    src = draw(st.sampled_from(SOURCES))
    values = [draw(value) for _ in range(len(src.fields))]
    trees = draw(st.sampled_from(["none", "one", "one", "several"]))
    if trees == "none":
        return Tuple(values, src)
    if trees == "one":
        return Tuple(values, src, draw(st.sampled_from([7, 8]) | ids), draw(ids))
    return in_trees(values, src, draw(st.dictionaries(ids, ids, min_size=2, max_size=3)))


def canon(v: Any) -> Any:
    """A value's type and repr, recursively: equal only for the same types and values
    (NaN included, -0.0 told from 0.0)."""
    if type(v) in (list, tuple):
        return (type(v), [canon(x) for x in v])
    return (type(v), repr(v))


def summary(item: Any) -> Any:
    """What must survive the trip: values, source and trees of a tuple; anything else as is."""
    if type(item) is Tuple:
        src = item._src
        return (
            "T",
            canon(item.values),
            src.component,
            src.stream,
            src.task,
            src.fields.to_list(),
            item._tree_edges(),
            item._root,
            item._edge,
            item._ack_val,
        )
    return canon(item)


def _is_message(item: Any) -> bool:
    return type(item) is tuple and len(item) in frames.MESSAGE_WIDTHS


def trip(lists: dict[int, list[Any]]) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = {task: [] for task in lists}
    n = decode(encode(lists, _dumps), {}, {task: got[task].extend for task in lists})
    assert n == sum(len(v) for v in got.values())
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
    for task in taken:
        assert [summary(t) for t in got[task]] == [summary(t) for t in taken[task]]


@settings(max_examples=100, deadline=None)
@given(st.lists(scalar, min_size=1, max_size=20))
def test_plain_values_cross_without_pickle_and_keep_their_types(vals: list[Any]) -> None:
    """Values of the plain types never reach pickle: all-text frames are joined text,
    the rest marshal; each value comes back with its exact type and value."""
    src = SOURCES[0]
    sent = [Tuple([v], src, 5, 6) for v in vals]

    def no_pickle(obj: Any) -> bytes:
        raise AssertionError(f"pickled {obj!r}")

    data = encode({1: sent}, no_pickle)
    kind = values_coding(data)
    assert kind == (TEXT if all(type(v) is str and "\x00" not in v for v in vals) else PLAIN)
    got: deque[Any] = deque()
    decode(data, {}, {1: got.extend}, loads=no_pickle)
    assert [canon(t.values) for t in got] == [canon([v]) for v in vals]


@settings(max_examples=50, deadline=None)
@given(st.lists(value, min_size=1, max_size=6))
def test_values_marshal_would_change_go_pickled(vals: list[Any]) -> None:
    """A value marshal would hand back as another type (bytearray -> bytes, a str subclass
    -> str, an IntEnum -> int) or cannot write at all makes the column go through the
    transport's pickle (cloudpickle for a class plain pickle cannot name)."""
    odd = [v for v in vals if type(v) not in (str, int, float, bool, type(None), bytes)]
    data = encode({1: [Tuple([v], SOURCES[0]) for v in vals]}, _dumps)
    kind = values_coding(data)
    assert kind == PICKLED if odd else kind in (TEXT, PLAIN)
    got: list[Any] = []
    decode(data, {}, {1: got.extend})
    assert [canon(t.values) for t in got] == [canon([v]) for v in vals]


def test_roots_run_length_coded_and_shared_on_arrival() -> None:
    """A tree's tuples in a row arrive sharing one root object (the acking bolt's fast
    path), and runs of different trees keep their own roots and edges."""
    src = SOURCES[0]
    sent = [Tuple([f"w{i}"], src, 2**63 + 5, 100 + i) for i in range(4)]
    sent += [Tuple(["x"], src, 9, 200), Tuple(["y"], src), Tuple(["z"], src, 2**63 + 5, 300)]
    got: list[Any] = []
    decode(encode({4: sent}), {}, {4: got.extend})
    assert [(t._root, t._edge) for t in got] == [(t._root, t._edge) for t in sent]
    assert all(t._root is got[0]._root for t in got[1:4])


def test_acks_arrive_one_by_one_as_plain_acks_and_other_messages() -> None:
    """Acks travel two ints each (ACK_RUN) and come back as the acker's 4-tuples, each on
    its own, in order; inits and fails pass as they are; a tuple that looks like an ack
    but holds another type (1.0 for ACK) is not made into one."""
    acks = [(ACK, 11, 0b0011, 0), (INIT, 11, 0b0101, 4), (ACK, 12, 7, 0), (ACK, 11, 0b0110, 0)]
    acks.append((FAIL, 12, 0, 0))
    acks.append((ACK, 13, 5, 7))  # an ack whose last field is not 0: not a plain ack
    got: list[Any] = []
    n = decode(encode({9: acks}), {}, {9: got.extend})
    assert got == acks and n == 6
    assert all(type(x) is int for m in got for x in m)
    odd = [(float(ACK), 11, 3, 0), (ACK, 11, 3, 0.0)]
    got = []
    decode(encode({9: odd}, _dumps), {}, {9: got.extend})
    assert [tuple(type(x) for x in m) for m in got] == [tuple(type(x) for x in m) for m in odd]


def test_one_source_object_per_source_across_frames() -> None:
    """The receiver rebuilds each source once, so tuples share it as locally emitted ones do."""
    known: dict[tuple[Any, ...], TupleSource] = {}
    got: list[Any] = []
    for word in ("a", "b"):
        decode(encode({7: [Tuple([word], SOURCES[0], 1, 2)]}), known, {7: got.extend})
    assert got[0]._src is got[1]._src and len(known) == 1


def test_a_tuple_not_matching_its_fields_is_refused_by_name() -> None:
    """No collector emits one; if one is ever built by hand, encode says what it is."""
    bad = Tuple(["only one"], SOURCES[1])
    with pytest.raises(ValueError, match=r"'split' on stream 'pairs' has 1 value\(s\) for 2"):
        encode({2: [bad]})


KEY = data_key(new_secret())
LOADED: list[str] = []


def _mark(name: str) -> str:
    LOADED.append(name)
    return name


class MarksWhenLoaded:
    """A value whose unpickling leaves a mark: a frame read at all would show it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_mark, ("loaded",))


def _signed_frame() -> bytes:
    src = TupleSource("spout", "default", 1, Fields(["v"]))
    lists = {3: [Tuple([MarksWhenLoaded()], src, 5, 6), Tuple(["w"], src, 5, 7)], 9: [(1, 5, 3, 0)]}
    return Link(KEY, "tcp://127.0.0.1:1", RECEIVER, 41, bytes(8)).seal(encode(lists, _dumps))


RECEIVER = "tcp://127.0.0.1:2"
OPEN_KEY = link_key(KEY, RECEIVER)
SIGNED = _signed_frame()


def test_a_signed_frame_opens_and_its_values_load() -> None:
    LOADED.clear()
    opened = open_frame(OPEN_KEY, memoryview(SIGNED))
    assert opened is not None and opened[:2] == ("tcp://127.0.0.1:1", 42)
    got: dict[int, list[Any]] = {3: [], 9: []}
    decode(opened[2], {}, {t: got[t].extend for t in got})
    assert LOADED == ["loaded"] and got[9] == [(1, 5, 3, 0)]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(SIGNED) - 1), st.integers(1, 255), st.integers(0, 40))
def test_a_tampered_frame_is_refused_before_anything_is_read(at: int, xor: int, cut: int) -> None:
    """Any byte changed (the mac, the sender, the layout, the values), any tail cut off,
    another key, another receiver's key: open_frame refuses the frame, so neither
    marshal nor pickle ever sees it (the transport counts it as rejected and reads
    nothing of it)."""
    LOADED.clear()
    flipped = bytearray(SIGNED)
    flipped[at] ^= xor
    assert open_frame(OPEN_KEY, memoryview(bytes(flipped))) is None
    if cut:
        assert open_frame(OPEN_KEY, memoryview(SIGNED[:-cut])) is None
    assert open_frame(link_key(data_key(new_secret()), RECEIVER), memoryview(SIGNED)) is None
    assert open_frame(link_key(KEY, "tcp://127.0.0.1:3"), memoryview(SIGNED)) is None
    assert open_frame(OPEN_KEY, memoryview(SIGNED[: MAC_BYTES + 1])) is None
    assert LOADED == []
