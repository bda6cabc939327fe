"""Fuzzing the data-frame decoder (distributed/frames.py ``decode``) with hypothesis:
frames a worker may receive that are not what ``encode`` made (a bug or a version skew in
a peer; a stranger's frames never get this far, the MAC refuses them first, see
tests/distributed/test_transport.py). Whatever the frame, ``decode`` ends, delivers no more
items than the frame holds, and delivers a frame whole or not at all (it raises an
Exception, which ``Transport.receive`` counts as an unreadable frame). Bounded: a few
hundred examples, about a second."""

from __future__ import annotations

import marshal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed.frames import MARSHAL_VERSION, decode, encode
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

SOURCES = [
    TupleSource("split", "default", 3, Fields(["word"])),
    TupleSource("split", "pairs", 3, Fields(["word", "n"])),
]
TASKS = (0, 1, 2)
item = st.one_of(
    st.builds(lambda w: Tuple([w], SOURCES[0], 5, 6), st.text(max_size=3)),
    st.builds(lambda w, n: Tuple([w, n], SOURCES[1], 7, 8), st.text(max_size=3), st.integers()),
    st.tuples(st.integers(0, 3), st.integers(1, 2**63), st.integers(0, 2**63), st.just(0)),
    st.tuples(st.integers(10, 13), st.integers(1, 2**63)),
    st.text(max_size=3),
)
frames = st.dictionaries(st.sampled_from(TASKS), st.lists(item, min_size=1, max_size=8), min_size=1)

# The frame's parts (frames.py): 0 source table, 1 runs, 2 run roots, 3 run counts,
# 4 edges, 5 values coding, 6 values column, 7 multi-tree edges, 8 messages, 9 others.
_SHORTENED = {"roots": 2, "counts": 3, "edges": 4, "values": 6, "messages": 8, "others": 9}


def _holds(parts: list[Any]) -> int:
    """Items the columns could make at most: tuples (one edge each), messages (two ints
    at least), other items (pickled: at most their bytes)."""
    return len(parts[4]) // 8 + len(parts[8]) // 8 // 2 + len(parts[9])


@st.composite
def mutated(draw: Any) -> bytes:
    """An encoded frame with a few of its parts changed."""
    parts = list(marshal.loads(encode(draw(frames))))
    for _ in range(draw(st.integers(1, 3))):
        part = draw(st.sampled_from(["runs", "table", *_SHORTENED]))
        if part == "runs" and parts[1]:
            runs = list(parts[1])
            runs[draw(st.integers(0, len(runs) - 1))] = draw(st.integers(-12, 100_000))
            parts[1] = runs
        elif part == "table" and parts[0]:
            component, stream, task, fields = parts[0][0]
            parts[0] = [(component, stream, task, (*fields, "extra")), *parts[0][1:]]
        elif part in _SHORTENED:
            i = _SHORTENED[part]
            parts[i] = parts[i][: draw(st.integers(0, len(parts[i])))]
    return marshal.dumps(tuple(parts), MARSHAL_VERSION)


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_a_malformed_frame_is_delivered_whole_or_not_at_all(data):
    """No more items than the frame holds, no tuple short of its fields, and nothing of
    a frame refused."""
    got: list[Any] = []
    deliver = {task: got.extend for task in TASKS}
    try:
        n = decode(data, {}, deliver)
    except Exception:
        n = None
    assert len(got) <= _holds(list(marshal.loads(data)))
    assert (n is None and got == []) or n == len(got)
    for t in got:
        if isinstance(t, Tuple):
            assert len(t.values) == len(t.fields)


def _not_messages(items: list[Any]) -> list[Any]:
    return [x for x in items if not isinstance(x, tuple)]


@settings(max_examples=200, deadline=None)
@given(frames)
def test_an_unchanged_frame_is_delivered_whole(lists):
    """The decoder's checks refuse no frame that encode made: every tuple and other item
    arrives, in order per task (acks to one tree may arrive combined into one)."""
    got: dict[int, list[Any]] = {task: [] for task in TASKS}
    n = decode(encode(lists), {}, {task: got[task].extend for task in TASKS})
    assert n == sum(len(v) for v in got.values()) <= sum(len(v) for v in lists.values())
    for task, items in lists.items():
        sent, arrived = _not_messages(items), _not_messages(got[task])
        assert [getattr(x, "values", x) for x in arrived] == [getattr(x, "values", x) for x in sent]
