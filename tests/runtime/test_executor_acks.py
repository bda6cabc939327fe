"""The runtime's own ack path, against the reference arithmetic.

BoltExecutor.run_batch inlines a BasicBolt's auto-ack and XOR-combines a turn's acks:
per tree within a run of consecutive inputs, then per tree across the turn (flush).
Combining must be exact: for every tree, the XOR of the ACK values the executor sends
equals the XOR of what acking each input on its own would send (reliability/anchoring's
``ack_values``), and a failed input sends FAIL for each of its trees and no ack.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree import BasicBolt
from tupletree.errors import FailedException
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import ACK, FAIL
from tupletree.runtime.collectors import TaskWiring
from tupletree.runtime.executors import BoltExecutor
from tupletree.runtime.routing import ShuffleRouter, StreamRoute
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import TupleSource, in_trees

BOLT, SINK, ACKER = 1, 2, 3
ROOTS = [0x1111, 0x2222, 0x3333, 0x4444]


class Plan(BasicBolt):
    """Input values ``[index, children, fail]``: emit ``children`` tuples tagged with the
    input's index, then fail the input or let it be acked."""

    outputs = ["parent"]

    def execute(self, tup: Any, collector: Any) -> None:
        index, children, fail = tup.values
        for _ in range(children):
            collector.emit([index])
        if fail:
            raise FailedException("planned")


def make_executor(seed: int) -> tuple[BoltExecutor, dict[int, deque]]:
    inboxes: dict[int, deque] = {SINK: deque(), ACKER: deque()}
    ex = BoltExecutor(BOLT, "plan", Plan(), True, lambda *a: None)
    inboxes[BOLT] = ex.inbox
    src = TupleSource("plan", "default", BOLT, Fields(["parent"]))
    route = StreamRoute(
        src, StreamSpec(src.fields, False), [ShuffleRouter([SINK], random.Random(0))], frozenset()
    )
    ex.connect(
        TaskWiring(
            "plan",
            BOLT,
            {"default": route},
            inboxes,
            acker_tasks=[ACKER],
            ids=IdGenerator(seed),
            metrics=ex.metrics,
        )
    )
    return ex, inboxes


inputs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(range(len(ROOTS))), max_size=3, unique=True),  # its trees
        st.integers(0, 3),  # children
        st.booleans(),  # fails
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), plan=inputs, limits=st.lists(st.integers(1, 9), min_size=1))
def test_combined_auto_acks_equal_one_ack_per_input(seed, plan, limits):
    ex, inboxes = make_executor(seed)
    ids = IdGenerator(seed + 1)
    src = TupleSource("s", "default", 9, Fields(["i", "c", "f"]))
    input_edges = [{ROOTS[r]: ids.next_id() for r in trees} for trees, _, _ in plan]
    sent = [
        in_trees([index, children, fail], src, input_edges[index])
        for index, (_, children, fail) in enumerate(plan)
    ]
    ex.inbox.extend(sent)
    turn = 0
    while ex.inbox:
        ex.run_batch(limits[turn % len(limits)])
        turn += 1

    # What acking each input on its own sends (anchoring.ack_values): per tree, the
    # input's edge ^ the XOR of its children's edges. Each child names its input.
    children_xor: dict[int, int] = {}
    for child in inboxes[SINK]:
        edges = set(child._tree_edges().values())
        if not edges:
            continue  # the child of an untracked input is untracked
        (edge,) = edges  # one edge per emit, the same in each of the child's trees
        children_xor[child[0]] = children_xor.get(child[0], 0) ^ edge
    expected_acks: dict[int, int] = {}
    expected_fails: list[int] = []
    for index, (_, _, fail) in enumerate(plan):
        if fail:
            expected_fails.extend(input_edges[index])
            continue
        for root, edge in input_edges[index].items():
            value = edge ^ children_xor.get(index, 0)
            expected_acks[root] = expected_acks.get(root, 0) ^ value

    got_acks: dict[int, int] = {}
    got_fails: list[int] = []
    for kind, root, val, _ in inboxes[ACKER]:
        if kind == ACK:
            assert val != 0, "a combined value of 0 is never sent"
            got_acks[root] = got_acks.get(root, 0) ^ val
        else:
            assert kind == FAIL
            got_fails.append(root)
    assert got_acks == {r: v for r, v in expected_acks.items() if v}
    assert sorted(got_fails) == sorted(expected_fails)
    assert ex.metrics.acked == sum(1 for _, _, fail in plan if not fail)
    assert all(t.is_settled() for t in sent)


def test_runs_of_one_tree_send_one_ack_per_tree_per_turn():
    """A fan-out of 10 leaves of one tree, in a row: one ACK message, their XOR."""
    ex, inboxes = make_executor(7)
    ids = IdGenerator(8)
    src = TupleSource("s", "default", 9, Fields(["i", "c", "f"]))
    edges = [ids.next_id() for _ in range(10)]
    for i, edge in enumerate(edges):
        ex.inbox.append(in_trees([i, 0, False], src, {ROOTS[0]: edge}))
    ex.run_batch(100)
    total = 0
    for edge in edges:
        total ^= edge
    assert list(inboxes[ACKER]) == [(ACK, ROOTS[0], total, 0)]


class Deferring:
    """A plain bolt that emits ``children`` tuples anchored to each input and defers its
    ack (a stateful bolt's way: OutputCollector.defer_ack)."""

    def execute(self, tup: Any) -> None:
        index, children, _ = tup.values
        for _ in range(children):
            self.out.emit([index], anchors=tup)
        self.out.defer_ack(tup)


def test_deferred_acks_released_equal_acking_each_input_and_failed_fail_each_tree():
    """Deferring, taking the batch and releasing it sends, per tree, the XOR acking each
    input would have sent; failing a batch sends FAIL once per tree it holds; a deferred
    tuple is settled at once (acking or failing it again does nothing)."""
    for seed in range(30):
        rng = random.Random(seed)
        ex, inboxes = make_executor(seed)
        ex.basic = False
        bolt = Deferring()
        ex.bolt = bolt
        bolt.out = ex.collector
        ids = IdGenerator(seed + 1)
        src = TupleSource("s", "default", 9, Fields(["i", "c", "f"]))
        plan = [
            (rng.sample(range(len(ROOTS)), rng.randint(0, 3)), rng.randint(0, 3))
            for _ in range(rng.randint(1, 30))
        ]
        edges = [{ROOTS[r]: ids.next_id() for r in trees} for trees, _ in plan]
        sent = [in_trees([i, c, False], src, edges[i]) for i, (_, c) in enumerate(plan)]
        ex.inbox.extend(sent)
        ex.run_batch(1000)
        assert all(t.is_settled() for t in sent)
        assert [m for m in inboxes[ACKER] if m[0] == ACK] == []  # nothing acked yet
        children_xor: dict[int, int] = {}
        for child in inboxes[SINK]:
            for edge in set(child._tree_edges().values()):
                children_xor[child[0]] = children_xor.get(child[0], 0) ^ edge
        expected: dict[int, int] = {}
        for i, tree_edges in enumerate(edges):
            for root, edge in tree_edges.items():
                expected[root] = expected.get(root, 0) ^ edge ^ children_xor.get(i, 0)
        batch = ex.collector.take_deferred()
        assert batch[1] == len(plan) and ex.collector.take_deferred() == ({}, 0)
        ex.collector.ack(sent[0])  # settled already: nothing
        ex.collector.release_deferred(batch)
        ex.collector.flush()
        got: dict[int, int] = {}
        for kind, root, val, _ in inboxes[ACKER]:
            assert kind == ACK
            got[root] = got.get(root, 0) ^ val
        assert got == {r: v for r, v in expected.items() if v}
        inboxes[ACKER].clear()
        ex.collector.fail_deferred(batch)
        assert sorted(root for _, root, _, _ in inboxes[ACKER]) == sorted(batch[0])
        assert {kind for kind, _, _, _ in inboxes[ACKER]} <= {FAIL}
