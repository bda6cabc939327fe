"""Failure storms against the capacity guard (issue 13, item 3), property-based.

Trees fail by one branch while their other branches ack late, acks beat inits, and the
ledger's guard is small, in any interleaving. Whatever the storm: the guard refuses an
init exactly when ``high_water`` admitted trees are unsettled (settled trees and their
late messages never count), no tree is settled twice, a tree none of whose tuples
failed is never FAILED except by that refusal, and every table stays within its bound.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.protocol import ACK, ACKED, FAILED, INIT, TIMED_OUT

from .strategies import Storm, seeds, storm_trees


class Model:
    """Drives a ledger with a storm's messages and checks every verdict as it comes."""

    def __init__(self, storm: Storm, ledger: AckerLedger) -> None:
        self.storm = storm
        self.ledger = ledger
        self.admitted: set[int] = set()  # init accepted, not yet settled
        self.refused: set[int] = set()
        self.outcomes: dict[int, int] = {}
        self.fail_seen: set[int] = set()

    def _record(self, out: tuple[int, int, int] | None) -> None:
        if out is None:
            return
        outcome, root, spout_task = out
        assert spout_task == 1
        assert root not in self.outcomes, f"tree {root} settled twice"
        self.outcomes[root] = outcome
        self.admitted.discard(root)
        if outcome == FAILED:
            assert self.storm.failing(root) or root in self.refused, (
                f"healthy tree {root} failed without being refused by the guard"
            )
        elif outcome == ACKED:
            assert not self.storm.failing(root)

    def deliver(self, msg: tuple[int, int, int]) -> None:
        kind, root, val = msg
        ledger = self.ledger
        if kind == INIT:
            full = len(self.admitted) >= ledger.high_water
            out = ledger.init(root, val, 1)
            if full:
                assert out == (FAILED, root, 1), "the guard let a tree in past high water"
                self.refused.add(root)
            else:
                assert out is None or out[0] != FAILED or root in self.fail_seen, (
                    f"tree {root} refused with {len(self.admitted)} trees admitted, "
                    f"high water {ledger.high_water}"
                )
                if out is None:
                    self.admitted.add(root)
        elif kind == ACK:
            out = ledger.ack(root, val)
        else:
            self.fail_seen.add(root)
            out = ledger.fail(root)
        self._record(out)
        assert len(ledger) == len(self.admitted)

    def rotate(self) -> None:
        for out in self.ledger.rotate():
            assert out[0] == TIMED_OUT
            self._record(out)


def interleave(messages: dict[int, list], rng: random.Random, skew: float) -> list:
    """All messages in a random order; with probability ``skew`` per tree, its init is
    moved to a random place (possibly after its acks and fails)."""
    out: list = []
    for msgs in messages.values():
        init, rest = msgs[0], msgs[1:]
        rng.shuffle(rest)
        if rng.random() < skew:
            rest.insert(rng.randrange(len(rest) + 1), init)
        else:
            rest.insert(0, init)
        pos = sorted(rng.randrange(len(out) + 1) for _ in rest) if out else [0] * len(rest)
        # keep the tree's own order while spreading it among the others
        for offset, (p, m) in enumerate(zip(pos, rest, strict=True)):
            out.insert(p + offset, m)
    return out


@settings(max_examples=300, deadline=None)
@given(
    trees=storm_trees,
    seed=seeds,
    high_water=st.integers(1, 12),
    skew=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_storm_without_timeouts_settles_every_tree_right(trees, seed, high_water, skew):
    """With room for every early record: each failing tree is FAILED, each healthy tree
    ACKED unless refused at its init by a full guard, and nothing is left held."""
    storm = Storm(trees, seed)
    n = len(trees)
    model = Model(storm, AckerLedger(high_water, early_limit=3 * n, settled_limit=3 * n))
    for msg in interleave(storm.messages(), random.Random(seed), skew):
        model.deliver(msg)
    for root in range(1, n + 1):
        expected = FAILED if storm.failing(root) or root in model.refused else ACKED
        assert model.outcomes.get(root) == expected, f"tree {root}"
    assert len(model.ledger) == 0 and model.ledger.early_count() == 0


@settings(max_examples=300, deadline=None)
@given(
    trees=storm_trees,
    seed=seeds,
    high_water=st.integers(1, 12),
    limits=st.tuples(st.integers(3, 12), st.integers(3, 12)),
    rotate_every=st.integers(1, 40),
)
def test_storm_with_small_tables_and_rotations_keeps_every_bound(
    trees, seed, high_water, limits, rotate_every
):
    """With tiny side tables and rotations in between: every bound holds after every
    message, the guard counts only admitted unsettled trees, and healthy trees fail
    only by refusal (they may time out, or wait, when their early acks were dropped)."""
    storm = Storm(trees, seed)
    early_limit, settled_limit = limits
    ledger = AckerLedger(high_water, early_limit=early_limit, settled_limit=settled_limit)
    model = Model(storm, ledger)
    rng = random.Random(seed)
    for i, msg in enumerate(interleave(storm.messages(), rng, 0.3)):
        model.deliver(msg)
        if i % rotate_every == rotate_every - 1:
            model.rotate()
        assert len(ledger) <= high_water
        assert ledger.early_count() <= early_limit
        assert ledger.settled_count() <= settled_limit


@settings(max_examples=200, deadline=None)
@given(
    failed=st.integers(0, 400),
    healthy=st.integers(1, 60),
    fanout=st.integers(2, 4),
    settled_limit=st.integers(3, 200),
    early_limit=st.integers(3, 200),
    seed=seeds,
)
def test_healthy_trees_after_any_storm_all_complete(
    failed, healthy, fanout, settled_limit, early_limit, seed
):
    """Issue 13's storm at random sizes: trees failed by one branch, the acks of their
    other branches arriving after every fail (so the oldest settled roots are forgotten
    and their late acks wait as early records), then healthy trees all in flight at once
    with a guard just big enough for them: every healthy tree is ACKED. (With the late
    acks counted against the guard, the last healthy trees were refused.)"""
    trees = [(fanout, 0)] * failed + [(fanout, None)] * healthy
    storm = Storm(trees, seed)
    ledger = AckerLedger(healthy, early_limit=early_limit, settled_limit=settled_limit)
    model = Model(storm, ledger)
    rng = random.Random(seed)
    messages = storm.messages()
    storms = [messages[r] for r in range(1, failed + 1)]
    late = [msg for msgs in storms for msg in msgs[2:]]  # [init, fail, acks...]
    rng.shuffle(late)
    fine = [messages[r] for r in range(failed + 1, failed + healthy + 1)]
    acks = [msg for msgs in fine for msg in msgs[1:]]
    rng.shuffle(acks)
    for msg in [m for msgs in storms for m in msgs[:2]] + late + [m[0] for m in fine] + acks:
        model.deliver(msg)
    assert all(model.outcomes[r] == ACKED for r in range(failed + 1, failed + healthy + 1))
    assert len(ledger) == 0
