"""Fuzzing the data-frame decoder (distributed/frames.py ``decode``) with hypothesis:
frames a worker may receive that are not what ``encode`` made (a bug or a version skew in
a peer; a stranger's frames never get this far, the mac refuses them first, see
tests/distributed/test_transport.py). Whatever the frame, ``decode`` ends, delivers no more
items than the frame holds, and fails only with the errors ``Transport.receive`` counts as
an unreadable frame. Bounded: a few hundred examples, about a second."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed.frames import decode, encode
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

SOURCES = [
    TupleSource("split", "default", 3, Fields(["word"])),
    TupleSource("split", "pairs", 3, Fields(["word", "n"])),
]
TASKS = (0, 1, 2)
item = st.one_of(
    st.builds(lambda w: Tuple([w], SOURCES[0], 5, 6), st.text(max_size=3)),
    st.builds(lambda w, n: Tuple([w, n], SOURCES[1]), st.text(max_size=3), st.integers()),
    st.tuples(st.integers(0, 3), st.integers(1, 2**63), st.integers(0, 2**63), st.just(0)),
    st.tuples(st.integers(10, 13), st.integers(1, 2**63)),
    st.text(max_size=3),
)
frames = st.dictionaries(st.sampled_from(TASKS), st.lists(item, min_size=1, max_size=8), min_size=1)


@st.composite
def mutated(draw: Any) -> tuple[Any, ...]:
    """An encoded frame with a few of its parts changed."""
    table, runs, roots, edges, values, multi, messages, others = encode(draw(frames))
    runs = list(runs)
    for _ in range(draw(st.integers(1, 3))):
        part = draw(st.sampled_from(["runs", "roots", "messages", "values", "others", "table"]))
        if part == "runs" and runs:
            runs[draw(st.integers(0, len(runs) - 1))] = draw(st.integers(-12, 100_000))
        elif part == "roots":
            roots = roots[: draw(st.integers(0, len(roots)))]
        elif part == "messages":
            messages = messages[: draw(st.integers(0, len(messages)))]
        elif part == "values":
            values = values[: draw(st.integers(0, len(values)))]
        elif part == "others":
            others = others[: draw(st.integers(0, len(others)))]
        elif part == "table" and table:
            component, stream, task, fields = table[0]
            table = [(component, stream, task, (*fields, "extra")), *table[1:]]
    return table, runs, roots, edges, values, multi, messages, others


UNREADABLE = (ValueError, IndexError, KeyError, TypeError)


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_a_malformed_frame_is_delivered_whole_or_not_at_all(frame):
    """No more items than the frame holds (a run of messages over an empty column
    delivered empty tuples, as many as it claimed), and nothing of a frame refused."""
    roots, messages, others = frame[2], frame[6], frame[7]
    holds = len(roots) // 8 + len(messages) // 8 // 2 + len(others)
    got: list[Any] = []
    deliver = {task: got.append for task in TASKS}
    try:
        n = decode(frame, {}, deliver)
    except UNREADABLE:
        n = None
    assert len(got) <= holds
    assert (n is None and got == []) or n == len(got)
