"""A spout's ``emit_batch`` (runtime/collectors.py): rows emitted as one tuple tree.

Whatever rows a batch holds and wherever they go (a Tuple bolt of the spout's worker, a
Tuple bolt of another worker, a BatchBolt anywhere, which gets one edge for all its
rows): the spout tracks one root, sends one INIT, and the tree reads zero at the acker
once every receiver has acked all it got, and not while any one item (a Tuple, or a
BatchBolt's whole Batch) is unacked. Each target gets exactly the rows routed to it, in
order. A bad row raises before anything is sent.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.errors import EmitError
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import INIT
from tupletree.runtime.collectors import SpoutOutputCollector, TaskWiring
from tupletree.runtime.routing import StreamRoute
from tupletree.runtime.target_kinds import BATCH, PEER, TUPLES
from tupletree.topology.batch import Batch
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

SPOUT, LOCAL, FAR, BATCHED, ACKER = 1, 2, 3, 4, 5
KINDS = [TUPLES, TUPLES, TUPLES, PEER, BATCH, TUPLES]
OUT = TupleSource("spout", "default", SPOUT, Fields(["n", "to"]))


class ByValue:
    """A router that sends each row to the tasks its second value names."""

    def choose(self, values: list[Any]) -> list[int]:
        return list(values[1])


class Executor:
    """What the collector tells its spout executor."""

    def __init__(self) -> None:
        self.tracked: list[tuple[int, Any]] = []
        self.immediate_acks: list[Any] = []

    def track(self, root: int, msg_id: Any) -> None:
        self.tracked.append((root, msg_id))


def spout(
    seed: int,
    ackers: bool = True,
    acker_tasks: list[int] | None = None,
    local_ackers: list[int] | None = None,
) -> tuple[SpoutOutputCollector, Executor, dict]:
    """``acker_tasks``: the topology's ackers (default: ACKER, or none); an inbox is
    made for each. ``local_ackers``: the indexes among them on this worker."""
    if acker_tasks is None:
        acker_tasks = [ACKER] if ackers else []
    inboxes: dict[int, Any] = {LOCAL: deque(), FAR: [], BATCHED: [], ACKER: deque()}
    for acker in acker_tasks:
        inboxes.setdefault(acker, [])
    route = StreamRoute(OUT, StreamSpec(OUT.fields, False), [ByValue()], frozenset())
    wired = TaskWiring(
        "spout",
        SPOUT,
        {"default": route},
        inboxes,
        acker_tasks=acker_tasks,
        ids=IdGenerator(seed),
        local_ackers=local_ackers,
        target_kinds=KINDS,
    )
    ex = Executor()
    return SpoutOutputCollector(wired, ex), ex, inboxes


def received(inboxes: dict[int, Any]) -> list[tuple[int, Any, int]]:
    """Every item a receiver acks on its own: (task, item, the XOR its ack brings)."""
    out = []
    for task in (LOCAL, FAR, BATCHED):
        for item in inboxes[task]:
            if type(item) is Tuple:
                out.append((task, item, item._edge))
            elif task == BATCHED:  # a BatchBolt acks the Batch whole
                acks: dict[int, int] = {}
                item.tree_acks(acks)
                out.append((task, item, acks.get(item._roots[0], 0)))
            else:  # rebuilt as a Tuple per row on the other worker, each acked alone
                for edge in item._edges:
                    out.append((task, item, edge))
    return out


batches = st.lists(
    st.lists(st.sampled_from([LOCAL, FAR, BATCHED]), min_size=0, max_size=3, unique=True),
    min_size=0,
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(batches, st.integers(0, 2**32))
def test_a_batch_is_one_tree_that_balances_only_when_every_item_is_acked(
    targets_per_row: list[list[int]], seed: int
) -> None:
    collector, ex, inboxes = spout(seed)
    rows = [[n, targets] for n, targets in enumerate(targets_per_row)]
    got_tasks = collector.emit_batch(rows, msg_id="m")
    assert sorted(got_tasks) == sorted({t for targets in targets_per_row for t in targets})
    if not got_tasks:  # no task reached: complete at once, no tree
        assert (ex.tracked, ex.immediate_acks, list(inboxes[ACKER])) == ([], ["m"], [])
        return
    ((root, msg_id),) = ex.tracked
    assert msg_id == "m" and root != 0
    ((kind, init_root, init, task),) = list(inboxes[ACKER])
    assert (kind, init_root, task) == (INIT, root, SPOUT)
    # Each target got exactly its rows, in order, all in the one tree.
    for task in (LOCAL, FAR, BATCHED):
        want = [n for n, targets in enumerate(targets_per_row) if task in targets]
        got: list[int] = []
        for item in inboxes[task]:
            if type(item) is Tuple:
                assert item._root == root
                got.append(item.values[0])
            else:
                assert type(item) is Batch and item._roots == [root]
                assert item._counts == [len(item)]
                got.extend(item.column("n"))
        assert got == want
        assert len([i for i in inboxes[task] if type(i) is Batch]) <= 1
    acks = received(inboxes)
    value = init
    for _, _, val in acks:
        value ^= val
    assert value == 0  # every item acked: the tree is done
    for i in range(len(acks)):  # any one item unacked: it is not
        missing = init
        for j, (_, _, val) in enumerate(acks):
            if j != i:
                missing ^= val
        assert missing != 0


@settings(max_examples=100, deadline=None)
@given(batches, st.integers(0, 2**32), st.booleans())
def test_untracked_rows_carry_no_tree(
    targets_per_row: list[list[int]], seed: int, ackers: bool
) -> None:
    """msg_id None: nothing tracked. No ackers (at-most-once) but a msg_id: the spout
    hears ack at once, as from ``emit``."""
    collector, ex, inboxes = spout(seed, ackers)
    msg_id = None if ackers else "m"
    collector.emit_batch([[n, t] for n, t in enumerate(targets_per_row)], msg_id=msg_id)
    assert ex.tracked == [] and not inboxes[ACKER]
    assert ex.immediate_acks == ([] if ackers else ["m"])
    for task in (LOCAL, FAR, BATCHED):
        for item in inboxes[task]:
            if type(item) is Tuple:
                assert item._root == 0 and item._edge == 0
            else:
                assert item._roots == [0] and set(item._edges) == {0}


def test_an_empty_batch_is_acked_at_once() -> None:
    """As Storm acks a spout tuple that reaches no task: right after next_tuple, with no
    tree and no INIT (an INIT of 0 made wait_idle return before the acker acked it)."""
    collector, ex, inboxes = spout(1)
    assert collector.emit_batch([], msg_id=7) == []
    assert (ex.tracked, ex.immediate_acks, list(inboxes[ACKER])) == ([], [7], [])


@pytest.mark.parametrize(
    ("rows", "stream", "says"),
    [
        ([[1, [LOCAL]], [2]], "default", "row 1 of 2: .* emitted 1 value"),
        ([[1, [LOCAL]], {"n": 1, "to": [2]}], "default", "row 1 of 2: .* must be a list"),
        ("ab", "default", "emit_batch takes a list of rows"),
        ({"n": 1}, "default", "emit_batch takes a list of rows"),
        ([[1, [LOCAL]]], "nope", "row 0 of 1: .* undeclared stream 'nope'"),
        ([], "nope", "undeclared stream 'nope'"),
    ],
)
def test_a_bad_batch_raises_and_sends_nothing(rows: Any, stream: str, says: str) -> None:
    collector, ex, inboxes = spout(1)
    with pytest.raises(EmitError, match=says) as caught:
        collector.emit_batch(rows, msg_id=1, stream=stream)
    # No inner error above it (the compiled build kept the row's own EmitError as the
    # context of the row-numbered one, so the message was printed twice).
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert ex.tracked == []
    assert all(len(box) == 0 for box in inboxes.values())


def test_rows_may_come_as_tuples_from_any_iterable() -> None:
    collector, _, inboxes = spout(1)
    collector.emit_batch(((n, (LOCAL,)) for n in range(3)), msg_id=1)
    assert [t.values[0] for t in inboxes[LOCAL]] == [0, 1, 2]


def test_a_batchs_root_is_steered_to_this_workers_acker() -> None:
    """As ``emit`` does: with an acker here and one elsewhere, every batch's INIT (and
    so its verdict) stays on this worker."""
    far_acker = 6
    collector, _, inboxes = spout(3, acker_tasks=[far_acker, ACKER], local_ackers=[1])
    for m in range(50):
        collector.emit_batch([[m, [LOCAL]]], msg_id=m)
    assert len(inboxes[ACKER]) == 50 and inboxes[far_acker] == []
