"""Property tests of the reliability core over random tuple DAGs and interleavings.

Each example is a script of abstract steps (spout emit, bolt emit with 1 or 2 anchors,
ack, deliver a random in-flight message, flush combined acks), run against the real
anchoring functions and AckerLedger, with the ground truth kept on the side.
"""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.protocol import ACKED, FAILED, TIMED_OUT

from .strategies import TreeSim, seeds, steps


def run_script(sim: TreeSim, script, rng: random.Random, fail_at: int | None = None):
    """Interpret ``script``; return the roots that had a tuple failed."""
    failed_roots: set[int] = set()
    for i, (op, a, b) in enumerate(script):
        if op == "spout":
            sim.spout_emit(1 + a % 3)
        elif op in ("emit", "emit2") and sim.live:
            anchors = [sim.live[a % len(sim.live)]]
            if op == "emit2":
                anchors.append(sim.live[b % len(sim.live)])  # may be a duplicate anchor
            sim.bolt_emit(anchors)
        elif op == "ack" and sim.live:
            t = sim.live[a % len(sim.live)]
            if fail_at is not None and i >= fail_at and not failed_roots:
                failed_roots.update(t._tree_edges())
                sim.fail(t)
            else:
                sim.ack(t)
        elif op == "deliver" and sim.in_flight:
            sim.deliver(a % len(sim.in_flight))
        elif op == "flush":
            sim.flush()
        check_never_early(sim)
    return failed_roots


def check_never_early(sim: TreeSim) -> None:
    for root, outcome in sim.outcomes.items():
        if outcome == ACKED:
            assert not sim.members[root], f"tree {root} acked with live tuples"


def finish(sim: TreeSim, rng: random.Random) -> None:
    """Ack every live tuple, flush, and deliver everything in a random order."""
    while sim.live:
        sim.ack(sim.live[rng.randrange(len(sim.live))])
        if rng.random() < 0.3:
            sim.flush()
        if sim.in_flight and rng.random() < 0.5:
            sim.deliver(rng.randrange(len(sim.in_flight)))
        check_never_early(sim)
    sim.flush()
    while sim.in_flight:
        sim.deliver(rng.randrange(len(sim.in_flight)))
        check_never_early(sim)


@settings(max_examples=300, deadline=None)
@given(seed=seeds, script=steps, ackers=st.integers(1, 3), combine=st.booleans())
def test_tree_completes_exactly_when_last_tuple_acked(seed, script, ackers, combine):
    """Over random DAGs and interleavings a tree is acked only once all its tuples are,
    and every tree is acked once everything is acked and delivered."""
    rng = random.Random(seed)
    sim = TreeSim(seed, n_ackers=ackers, combine=combine)
    run_script(sim, script, rng)
    finish(sim, rng)
    assert set(sim.outcomes) == set(sim.members)
    assert all(outcome == ACKED for outcome in sim.outcomes.values())
    assert all(len(ledger) == 0 for ledger in sim.ledgers)


@settings(max_examples=200, deadline=None)
@given(seed=seeds, script=steps, fail_at=st.integers(0, 120))
def test_any_fail_fails_the_tree(seed, script, fail_at):
    """A failed tuple fails every tree it belongs to, whatever else happens after."""
    rng = random.Random(seed)
    sim = TreeSim(seed, n_ackers=2)
    failed_roots = run_script(sim, script, rng, fail_at=fail_at)
    finish(sim, rng)
    for root in failed_roots:
        assert sim.outcomes[root] == FAILED
    for root, outcome in sim.outcomes.items():
        if root not in failed_roots:
            assert outcome == ACKED


@settings(max_examples=200, deadline=None)
@given(seed=seeds, script=steps)
def test_combined_and_uncombined_runs_complete_the_same_trees(seed, script):
    """XOR-combining a turn's acks per root changes no tree's outcome."""
    outcomes = []
    for combine in (False, True):
        rng = random.Random(seed)
        sim = TreeSim(seed, combine=combine)
        # Deliver in submission order so both runs see the same message sequence
        # apart from the combining itself.
        for op, a, b in script:
            if op == "deliver":
                while sim.in_flight:
                    sim.deliver(0)
            else:
                run_script(sim, [(op, a, b)], rng)
        sim.flush()
        while sim.in_flight:
            sim.deliver(0)
        check_never_early(sim)
        outcomes.append(dict(sim.outcomes))
    assert outcomes[0] == outcomes[1]


@settings(max_examples=100, deadline=None)
@given(seed=seeds, n_trees=st.integers(1, 30), touched=st.integers(0, 30))
def test_untouched_tree_times_out(seed, n_trees, touched):
    """Trees nobody finishes expire after 3 rotations; completed ones never do."""
    rng = random.Random(seed)
    sim = TreeSim(seed)
    roots = [sim.spout_emit(1) for _ in range(n_trees)]
    done = set(rng.sample(roots, min(touched, n_trees)))
    for t in list(sim.live):
        if next(iter(t._tree_edges())) in done:
            sim.ack(t)
    while sim.in_flight:
        sim.deliver(rng.randrange(len(sim.in_flight)))
    ledger: AckerLedger = sim.ledgers[0]
    assert ledger.rotate() == [] and ledger.rotate() == []
    expired = ledger.rotate()
    assert {root for _, root, _ in expired} == set(roots) - done
    assert all(outcome == TIMED_OUT for outcome, _, _ in expired)
    assert {r for r, o in sim.outcomes.items() if o == ACKED} == done
