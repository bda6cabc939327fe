"""A BatchBolt's acking, against the acker's arithmetic (runtime/batch_collector.py).

Whatever a batch bolt emits, to whichever kind of target (a Tuple bolt of its worker,
a Tuple bolt of another worker, a BatchBolt anywhere, which gets one edge per run of a
tree's rows), and whichever rows it fails or whether it raises: once the bolt's ACKs
and then every receiver's acks have reached the acker, every tree that was not failed
is back to 0, a failed tree got a FAIL, and every row a target got is in the trees of
the input row it was anchored to. The acker starts each tree at the XOR of the input
rows' edges, as the spout's and upstream bolts' messages would have left it. A turn
runs one to three input batches whose rows share trees, and delivers what they emitted
once, at its end (a tree's run of rows may continue from one input batch into the next
with no edge of its own).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.errors import EmitError
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import ACK, FAIL
from tupletree.runtime.batch_collector import BatchCollector
from tupletree.runtime.collectors import OutputCollector, TaskWiring
from tupletree.runtime.routing import StreamRoute
from tupletree.runtime.target_kinds import BATCH, PEER, TUPLES
from tupletree.topology.batch import Batch
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

BOLT, LOCAL, FAR, BATCHED, ACKER = 1, 2, 3, 4, 5
KINDS = [TUPLES, TUPLES, TUPLES, PEER, BATCH, TUPLES]
OUT = TupleSource("bolt", "default", BOLT, Fields(["n", "to"]))
IN = TupleSource("up", "default", 7, Fields(["w"]))
ids = st.integers(min_value=1, max_value=2**64 - 1)


class ByValue:
    """A router that sends each emit to the tasks its second value names."""

    def choose(self, values: list[Any]) -> list[int]:
        return list(values[1])


@st.composite
def input_rows(draw: Any, roots: list[int] | None = None) -> list[Tuple]:
    if roots is None:
        roots = draw(st.lists(ids, min_size=2, max_size=3, unique=True))
    rows = []
    for i in range(draw(st.integers(2, 8))):
        kind = draw(st.sampled_from(["one", "one", "one", "none", "several"]))
        if kind == "none":
            rows.append(Tuple([i], IN))
        elif kind == "one":  # neighbours in different trees, unless drawn otherwise
            root = roots[(i + draw(st.integers(0, 1))) % len(roots)]
            rows.append(Tuple([i], IN, root, draw(ids)))
        else:
            trees = draw(st.dictionaries(st.sampled_from(roots) | ids, ids, min_size=2))
            rows.append(in_trees([i], IN, trees))
    return rows


@st.composite
def plans(draw: Any, roots: list[int] | None = None) -> tuple[list[Tuple], list[Any], bool]:
    rows = draw(input_rows(roots))
    steps: list[Any] = []
    for _ in range(draw(st.integers(2, 30))):
        # (one_of would merge equal branches: weights are drawn by hand)
        if draw(st.sampled_from([0, 1, 2, 3, 4])) == 0:
            steps.append(("fail", draw(st.integers(0, len(rows) - 1))))
            continue
        untracked = draw(st.sampled_from([0, 1, 2, 3])) == 0
        row = None if untracked else draw(st.integers(0, len(rows) - 1))
        targets = draw(st.lists(st.sampled_from([LOCAL, FAR, BATCHED]), min_size=1, max_size=3))
        steps.append(("emit", row, targets))
    return rows, steps, draw(st.sampled_from([0, 1, 2, 3])) == 0


def wiring(seed: int, metrics: Any = None) -> tuple[TaskWiring, dict[int, Any]]:
    """The bolt's wiring (one route, the three kinds of target, one acker) and the
    inboxes it delivers to."""
    inboxes: dict[int, Any] = {LOCAL: deque(), FAR: [], BATCHED: [], ACKER: deque()}
    route = StreamRoute(OUT, StreamSpec(OUT.fields, False), [ByValue()], frozenset())
    wired = TaskWiring(
        "bolt",
        BOLT,
        {"default": route},
        inboxes,
        acker_tasks=[ACKER],
        ids=IdGenerator(seed),
        metrics=metrics,
        target_kinds=KINDS,
    )
    return wired, inboxes


def collector(seed: int) -> tuple[BatchCollector, OutputCollector, dict[int, Any]]:
    wired, inboxes = wiring(seed)
    out = OutputCollector(wired)
    return BatchCollector(out, KINDS), out, inboxes


def xor_into(trees: dict[int, int], root: int, val: int) -> None:
    trees[root] = trees.get(root, 0) ^ val


@st.composite
def turns(draw: Any) -> list[tuple[list[Tuple], list[Any], bool]]:
    """One to three input batches, their rows in the same few trees."""
    roots = draw(st.lists(ids, min_size=2, max_size=3, unique=True))
    return [draw(plans(roots)) for _ in range(draw(st.integers(1, 3)))]


@settings(max_examples=400, deadline=None)
@given(turns(), st.integers(0, 2**32))
def test_every_tree_a_batch_bolt_touches_balances_or_fails(turn: Any, seed: int) -> None:
    bc, out, inboxes = collector(seed)
    trees: dict[int, int] = {}  # the acker's value per tree
    failed_trees: set[int] = set()
    sent: dict[int, list[Any]] = {LOCAL: [], FAR: [], BATCHED: []}
    trees_of_emit: dict[int, set[int]] = {}  # emit's number -> its anchor row's trees
    n = 0  # every emit's own number, over the whole turn
    for rows, steps, raises in turn:
        batch = Batch.of_tuples(rows)
        for tup in rows:
            for root, edge in tup._tree_edges().items():
                xor_into(trees, root, edge)
        bc.begin(batch)
        failed_rows: set[int] = set()
        for step in steps:
            n += 1
            if step[0] == "fail":
                bc.fail(step[1])
                failed_rows.add(step[1])
                continue
            _, row, targets = step
            if row in failed_rows:
                with pytest.raises(EmitError, match="which it already failed"):
                    bc.emit([n, targets], row=row)
                continue
            assert bc.emit([n, targets], row=row) == targets
            # A tree failed through another row is dropped from the anchors (the emit
            # goes out untracked if none is left): a spout's batch is one tree.
            trees_of_emit[n] = set() if row is None else set(batch._trees_of(row)) - bc._failed
            for t in targets:
                sent[t].append(n)
        bc.finish(not raises)
        failed_trees |= {r for i in failed_rows for r in batch._trees_of(i)}
        if raises:
            failed_trees |= set(batch._all_roots())
    assert not inboxes[FAR] and not inboxes[BATCHED]  # buffered until the turn's end
    bc.deliver()
    out.flush()
    messages = list(inboxes[ACKER])
    assert {m[1] for m in messages if m[0] == FAIL} == failed_trees
    for kind, root, val, _ in messages:
        if kind == ACK:
            if root in failed_trees:
                # Acked by one batch of the turn, failed by a later one: the acker has
                # settled it by then and swallows the ACK. Within one batch, never.
                assert len(turn) > 1
                continue
            xor_into(trees, root, val)
    # Every receiver acks all it got; each target got every emit, in order.
    got: dict[int, list[Any]] = {LOCAL: [], FAR: [], BATCHED: []}
    for tup in inboxes[LOCAL]:
        got[LOCAL].append(tup.values[0])
        assert set(tup._tree_edges()) == trees_of_emit[tup.values[0]]
        for root, edge in tup._tree_edges().items():
            xor_into(trees, root, edge)
    assert len(inboxes[FAR]) <= 1 and len(inboxes[BATCHED]) <= 1  # one Batch a turn
    for task in (FAR, BATCHED):
        for item in inboxes[task]:
            assert type(item) is Batch
            got[task].extend(item.column("n"))
            # Each row is in its anchor's trees: a run that went on into another
            # tree's rows (with their edge 0) would balance every XOR and still leave
            # those trees free to complete before their child.
            for i, emitted in enumerate(item.column("n")):
                assert set(item._trees_of(i)) == trees_of_emit[emitted]
            acks: dict[int, int] = {}
            item.tree_acks(acks)
            for root, val in acks.items():
                xor_into(trees, root, val)
    assert got == sent
    assert {r: v for r, v in trees.items() if v and r not in failed_trees} == {}


def test_rows_of_one_tree_share_one_edge_only_in_a_batch_bolts_batch() -> None:
    """To a BatchBolt, a tree's run of rows carries one edge, on its first row; to a
    Tuple bolt of another worker every row has its own."""
    bc, _, inboxes = collector(random.randrange(2**32))
    bc.begin(Batch.of_tuples([Tuple(["s"], IN, 99, 5)]))
    for n in range(4):
        bc.emit([n, [FAR, BATCHED]], row=0)
    bc.finish(True)
    bc.deliver()
    (far,) = inboxes[FAR]
    (batched,) = inboxes[BATCHED]
    assert far._roots == batched._roots == [99] and far._counts == batched._counts == [4]
    assert all(far._edges) and len(set(far._edges)) == 4
    assert batched._edges[0] and batched._edges[1:] == [0, 0, 0]


def test_reset_timeout_and_fail_name_each_tree_of_the_row_once() -> None:
    """reset_timeout(row) sends RESET for each of the row's trees, fail(row) one FAIL
    each (a second fail of the row sends nothing), and a reset of a failed tree none."""
    from tupletree.reliability.protocol import RESET

    bc, _, inboxes = collector(3)
    rows = [Tuple(["a"], IN, 11, 5), in_trees(["b"], IN, {11: 6, 12: 7}), Tuple(["c"], IN)]
    bc.begin(Batch.of_tuples(rows))
    bc.reset_timeout(1)
    bc.reset_timeout(2)  # untracked: nothing to reset
    assert list(inboxes[ACKER]) == [(RESET, 11, 0, 0), (RESET, 12, 0, 0)]
    inboxes[ACKER].clear()
    bc.fail(0)
    bc.fail(0)
    bc.fail(1)  # 11 already failed: only 12 is left to fail
    bc.reset_timeout(1)
    assert list(inboxes[ACKER]) == [(FAIL, 11, 0, 0), (FAIL, 12, 0, 0)]
    assert bc.finish(True) == 2  # rows 0 and 1 failed; row 2 acked


def test_a_turn_delivers_one_batch_per_target_for_all_its_input_batches() -> None:
    """Two input batches (two sources) in one turn of the executor: what both emit to a
    batch bolt reaches it as one Batch, at the turn's end, a tree's rows from both in
    one run with one edge, and every tree balances."""
    from tupletree import BatchBolt
    from tupletree.runtime.batch_executor import BatchBoltExecutor

    class Echo(BatchBolt):
        def execute_batch(self, batch: Batch, collector: Any) -> None:
            for i, w in enumerate(batch.column("w")):
                collector.emit([w, [BATCHED]], row=i)

    ex = BatchBoltExecutor(BOLT, "bolt", Echo(), lambda *a: None)
    wired, inboxes = wiring(1, ex.metrics)
    ex.connect(wired)
    other = TupleSource("up2", "default", 8, Fields(["w"]))
    ex.inbox.extend(
        [
            Tuple(["a"], IN, 11, 1),
            Tuple(["b"], IN, 11, 2),
            Tuple(["c"], other, 11, 4),
            Tuple(["d"], other, 12, 8),
        ]
    )
    assert ex.run_batch(100) == 4
    (out,) = inboxes[BATCHED]
    assert out.column("n") == ["a", "b", "c", "d"]
    assert out._roots == [11, 12] and out._counts == [3, 1]
    assert out._edges[0] and out._edges[1:3] == [0, 0] and out._edges[3]
    trees = {11: 1 ^ 2 ^ 4, 12: 8}  # what the upstream messages left at the acker
    for kind, root, val, _ in inboxes[ACKER]:
        assert kind == ACK
        trees[root] ^= val
    acks: dict[int, int] = {}
    out.tree_acks(acks)
    for root, val in acks.items():
        trees[root] ^= val
    assert trees == {11: 0, 12: 0}


def test_what_a_turn_emitted_is_delivered_when_a_batch_raises_or_the_worker_stops() -> None:
    """Nothing an emit accepted is dropped: the turn's emits reach their target at the
    turn's end though its batch raised after emitting, and though a stop (``halt``)
    came while a batch ran and ended the turn early."""
    from tupletree import BatchBolt
    from tupletree.runtime.batch_executor import BatchBoltExecutor

    class EmitThen(BatchBolt):
        def execute_batch(self, batch: Batch, collector: Any) -> None:
            w = batch.column("w")[0]
            collector.emit([w, [BATCHED]], row=0)
            if w == "raise":
                raise ValueError("after the emit")
            if w == "halt":
                ex.halt = True  # what Worker.stop sets

    errors: list[Any] = []
    ex = BatchBoltExecutor(BOLT, "bolt", EmitThen(), lambda *a: errors.append(a))
    wired, inboxes = wiring(2, ex.metrics)
    ex.connect(wired)
    other = TupleSource("up2", "default", 8, Fields(["w"]))
    ex.inbox.extend([Tuple(["raise"], IN, 11, 1), Tuple(["halt"], other, 12, 2), Tuple(["x"], IN)])
    assert ex.run_batch(100) == 2  # the halt ends the turn; "x" stays queued
    (out,) = inboxes[BATCHED]
    assert out.column("n") == ["raise", "halt"]
    assert len(errors) == 1 and list(ex.inbox) and ex.inbox[0].values == ["x"]
