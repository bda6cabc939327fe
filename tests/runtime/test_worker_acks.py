"""A worker's bolt tasks combine their acks per tree for a whole round
(runtime/worker_acks.py): one ACK message a tree a round, not one per task, and the
acker ends each tree exactly as it would with every ack sent on its own."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.protocol import ACK, ACKED, FAILED
from tupletree.runtime.executors import AckerExecutor
from tupletree.runtime.worker import Worker
from tupletree.runtime.worker_acks import WorkerAcks


class Trees(Spout):
    """Emits ``n`` tracked tuples, then nothing; remembers what was acked and failed."""

    outputs = ["i"]

    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0
        self.acked: list[Any] = []
        self.failed: list[Any] = []

    def next_tuple(self) -> None:
        if self.sent < self.n:
            self.collector.emit([self.sent], msg_id=self.sent)
            self.sent += 1

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)


class Take(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def run_fan_out(trees: int, tasks: int) -> tuple[Worker, Trees, AckerExecutor]:
    """One spout task, ``tasks`` bolt tasks that each get every tuple (all grouping),
    one acker, all on one worker, run until nothing is left to do."""
    b = TopologyBuilder()
    b.set_spout("trees", Trees(trees))
    b.set_bolt("take", Take(), parallelism=tasks).all_grouping("trees")
    conf = validate({Config.TOPOLOGY_WORKERS: 1, Config.TOPOLOGY_ACKER_EXECUTORS: 1})
    w = Worker("w", b.create_topology(), conf, lambda: 0.0)
    w.start()
    assert w.run_until_idle()
    (spout_ex,) = w.spouts
    (acker,) = [ex for ex in w.bolts if isinstance(ex, AckerExecutor)]
    spout: Trees = spout_ex.spout  # type: ignore[assignment]
    return w, spout, acker


def test_the_tasks_of_a_worker_send_one_ack_a_tree_a_round() -> None:
    _, spout, acker = run_fan_out(trees=20, tasks=4)
    assert sorted(spout.acked) == list(range(20))
    assert spout.failed == []
    # Per tree: its INIT and one combined ACK. Each of the 4 tasks acking on its own
    # would make it an INIT and 4 ACKs. The spout emits several trees a round, and a
    # round's turns take every tree's tuple, so no tree needs a second round.
    assert acker.metrics.executed == 2 * 20


def test_a_collector_with_the_worker_acks_leaves_the_sending_to_the_round() -> None:
    w, _, _ = run_fan_out(trees=0, tasks=2)
    bolt = next(ex for ex in w.bolts if not isinstance(ex, AckerExecutor))
    out = bolt.collector
    assert out is not None
    assert out.acks is w.acks.acks
    out.acks[7] = 5
    out.flush()  # a turn's end: not sent yet
    (acker_task,) = w.acker_tasks
    assert len(w.inboxes[acker_task]) == 0
    w.acks.flush()  # the round's end
    assert list(w.inboxes[acker_task]) == [(ACK, 7, 5, 0)]
    assert w.acks.acks == {}


def tree_acks(rng: random.Random, size: int) -> tuple[int, list[int]]:
    """A random tuple tree of ``size`` tuples: the spout's INIT value and each tuple's
    ack value (its edge XOR its children's edges), as collectors compute them."""
    edges = [rng.getrandbits(64) | 1 for _ in range(size)]
    parent = [-1] + [rng.randrange(i) if rng.random() < 0.7 else -1 for i in range(1, size)]
    init = 0
    acks = list(edges)
    for i, p in enumerate(parent):
        if p < 0:
            init ^= edges[i]  # a child of the spout tuple
        else:
            acks[p] ^= edges[i]
    return init, acks


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(1, 30),
    rounds=st.integers(1, 8),
    fail_at=st.one_of(st.none(), st.integers(0, 7)),
)
def test_combined_rounds_end_a_tree_as_separate_acks_do(
    seed: int, size: int, rounds: int, fail_at: int | None
) -> None:
    rng = random.Random(seed)
    root = rng.getrandbits(64) | 1
    init, acks = tree_acks(rng, size)
    # Each tuple's ack lands in some round, from one of 3 tasks of the worker.
    plan: list[list[int]] = [[] for _ in range(rounds)]
    for val in acks:
        plan[rng.randrange(rounds)].append(val)

    inbox: deque[Any] = deque()
    worker_acks = WorkerAcks({9: inbox.append}, [9])
    ledger = AckerLedger()
    assert ledger.init(root, init, spout_task=0) is None
    outcomes = []
    for r, vals in enumerate(plan):
        for val in vals:  # the tasks' turns: each adds its ack to the shared dict
            d = worker_acks.acks
            d[root] = d.get(root, 0) ^ val
        if fail_at == r:  # a fail is sent at once, before the round's acks
            out = ledger.fail(root)
            if out is not None:
                outcomes.append(out[0])
        worker_acks.flush()
        sent = list(inbox)
        inbox.clear()
        assert len(sent) <= 1  # one message a tree a round, or none
        for kind, msg_root, val, _ in sent:
            assert kind == ACK and msg_root == root
            out = ledger.ack(root, val)
            if out is not None:
                outcomes.append(out[0])
        if not outcomes and r < rounds - 1:
            # Acks still to come: the tree must not read done early.
            later = [v for vs in plan[r + 1 :] for v in vs]
            if later:
                assert ledger.value(root) not in (None, 0)
    last = max(r for r, vals in enumerate(plan) if vals)
    if fail_at is not None and fail_at <= last:
        # The fail came before the round that completes the tree: failed once, and the
        # acks after it are swallowed.
        assert outcomes == [FAILED]
    else:
        # Every ack arrived (a fail after the tree was done changes nothing).
        assert outcomes == [ACKED]
