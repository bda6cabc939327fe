"""A stateful bolt's held-back acks (OutputCollector.defer_ack) join the acks of the turn
they are released in: releasing one or several deferred batches in a turn whose own
acks touch the same trees sends, per tree, exactly what acking every tuple at once
would have (XOR-combined). A release that replaced a tree's value instead of combining
it would leave the tree non-zero for good: its tuples time out and are replayed though
every one was processed and committed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.runtime.collectors import OutputCollector, TaskWiring
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import TupleSource, in_trees

ROOTS = [11, 2**64 - 3, 7 * 2**40]
SRC = TupleSource("s", "default", 9, Fields(["i"]))

one_tuple = st.tuples(
    st.lists(st.sampled_from(ROOTS), min_size=1, max_size=3, unique=True),
    st.integers(1, 2**64 - 1),  # its edge
    st.sampled_from(["ack", "first", "second"]),  # acked now, or deferred into a batch
)


def _combined(out: OutputCollector) -> dict[int, int]:
    return {root: val for root, val in out.acks.items() if val}


@settings(max_examples=200, deadline=None)
@given(st.lists(one_tuple, min_size=1, max_size=20))
def test_released_batches_combine_with_the_turns_acks(plan: list[tuple[Any, int, str]]) -> None:
    """Tuples acked at once, deferred into a first batch, or into a second one; both
    batches are released in the turn of the direct acks: the turn's acks equal acking
    every tuple."""
    reference = OutputCollector(TaskWiring("b", 1, {}, {}))
    out = OutputCollector(TaskWiring("b", 1, {}, {}))
    tuples = []
    for i, (roots, edge, how) in enumerate(plan):
        reference.ack(in_trees([i], SRC, dict.fromkeys(roots, edge)))
        tuples.append((in_trees([i], SRC, dict.fromkeys(roots, edge)), how))
    for tup, how in tuples:
        if how == "first":
            out.defer_ack(tup)
    first = out.take_deferred()
    for tup, how in tuples:
        if how == "second":
            out.defer_ack(tup)
    second = out.take_deferred()
    for tup, how in tuples:
        if how == "ack":
            out.ack(tup)
    out.release_deferred(first)
    out.release_deferred(second)
    assert _combined(out) == _combined(reference)
