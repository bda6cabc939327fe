"""Reliability transcripts: tuple trees written as data, with the outcome Storm promises.

A plan is ``[action, children]`` or ``[action, children, "dup"]``: the tuple emits one
child per entry of ``children`` (each with its own plan), anchored to itself (twice, to
``[t, t]``, with ``"dup"``), then ``action``s itself: ``"ack"``, ``"fail"`` or
``"hold"`` (never acks nor fails). A spout tuple's tree is acked when every tuple in it
acks, failed as soon as one fails, and timed out otherwise.

The same transcripts are played on the pure AckerLedger (``play_on_ledger``, every
message order a seed gives, init included) and on every cluster by test_transcripts.py
beside it (ScriptBolts at three levels execute the plans), so the core and both runtimes
are held to one table of expectations.
"""

from __future__ import annotations

import random
from typing import Any

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import ACKED, ACKER_BUCKETS, FAILED, TIMED_OUT

ACK, FAIL, HOLD = "ack", "fail", "hold"
EXPECTED_NAMES = {ACKED: "acked", FAILED: "failed", TIMED_OUT: "timed_out"}
MAX_DEPTH = 3  # the cluster topology has three levels of ScriptBolts


def leaf(action: str) -> list[Any]:
    return [action, []]


TRANSCRIPTS: dict[str, tuple[list[Any], str]] = {
    "lone tuple acked": (leaf(ACK), "acked"),
    "chain acked": ([ACK, [[ACK, [leaf(ACK)]]]], "acked"),
    "fan-out acked": ([ACK, [[ACK, [leaf(ACK), leaf(ACK)]], leaf(ACK), leaf(ACK)]], "acked"),
    "duplicate anchor acked": ([ACK, [[ACK, [leaf(ACK)], "dup"]], "dup"], "acked"),
    "lone tuple failed": (leaf(FAIL), "failed"),
    "one leaf fails": ([ACK, [leaf(ACK), leaf(FAIL)]], "failed"),
    "root fails after emitting": ([FAIL, [leaf(ACK), leaf(ACK)]], "failed"),
    "deep leaf fails": ([ACK, [[ACK, [leaf(ACK), leaf(FAIL)]], leaf(ACK)]], "failed"),
    "a fail beats a hold": ([ACK, [leaf(HOLD), leaf(FAIL)]], "failed"),
    "lone tuple held": (leaf(HOLD), "timed_out"),
    "one leaf held": ([ACK, [leaf(ACK), leaf(HOLD)]], "timed_out"),
    "root held, children acked": ([HOLD, [leaf(ACK), leaf(ACK)]], "timed_out"),
}


def _depth(plan: list[Any]) -> int:
    return 1 + max((_depth(child) for child in plan[1]), default=0)


assert all(_depth(plan) <= MAX_DEPTH for plan, _ in TRANSCRIPTS.values())


def play_on_ledger(plan: list[Any], seed: int) -> str:
    """The outcome the pure ledger reaches for one tree whose messages arrive in the order
    ``seed`` shuffles them into (the init among them), then through its timeouts."""
    rng = random.Random(seed)
    next_id = IdGenerator(rng.getrandbits(64)).next_id
    root, spout_task = next_id(), 7
    edge = next_id()
    messages: list[tuple[str, int]] = [("init", edge)]

    def walk(node: list[Any], edge: int) -> None:
        action, children = node[0], node[1]
        dup = len(node) > 2
        ack_val = 0
        for child in children:
            child_edge = next_id()
            if dup:  # anchored to [t, t]: two edges, XORed into both sides
                second = next_id()
                ack_val ^= child_edge ^ second
                walk(child, child_edge ^ second)
            else:
                ack_val ^= child_edge
                walk(child, child_edge)
        if action == ACK:
            messages.append(("ack", edge ^ ack_val))
        elif action == FAIL:
            messages.append(("fail", 0))

    walk(plan, edge)
    rng.shuffle(messages)
    ledger = AckerLedger()
    for kind, val in messages:
        if kind == "init":
            outcome = ledger.init(root, val, spout_task)
        elif kind == "ack":
            outcome = ledger.ack(root, val)
        else:
            outcome = ledger.fail(root)
        if outcome is not None:
            assert outcome[1:] == (root, spout_task)
            return EXPECTED_NAMES[outcome[0]]
    for _ in range(ACKER_BUCKETS):
        for outcome, settled_root, task in ledger.rotate():
            assert (settled_root, task) == (root, spout_task)
            return EXPECTED_NAMES[outcome]
    raise AssertionError("the tree was never settled, not even by a timeout")
