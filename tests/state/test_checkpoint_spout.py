"""The checkpoint spout: its state table, its decisions (CheckpointCoordinator) and the
spout itself, with Storm's CheckpointSpoutTest vectors and the recoveries the issue names."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.config import validate
from tupletree.state.coordinator import CheckpointCoordinator, Step
from tupletree.state.kv import StateError
from tupletree.state.protocol import (
    CHECKPOINT_STREAM,
    COMMIT,
    COMMITTED,
    COMMITTING,
    INITSTATE,
    PREPARE,
    PREPARING,
    ROLLBACK,
    TX_STATE_KEY,
    CheckPointState,
)
from tupletree.state.spout import CheckpointSpout
from tupletree.store import MemoryStore, Put
from tupletree.store.codec import dumps_json, loads_json
from tupletree.store.memory import forget

from .fakes import FakeCollector, FakeContext

NS = "$checkpointspout-0"


# -- the table ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "recovering", "action", "after_ack"),
    [
        (CheckPointState(5, COMMITTED), False, PREPARE, CheckPointState(6, PREPARING)),
        (CheckPointState(5, COMMITTED), True, INITSTATE, CheckPointState(5, COMMITTED)),
        (CheckPointState(5, PREPARING), False, PREPARE, CheckPointState(5, COMMITTING)),
        (CheckPointState(5, PREPARING), True, ROLLBACK, CheckPointState(4, COMMITTED)),
        (CheckPointState(5, COMMITTING), False, COMMIT, CheckPointState(5, COMMITTED)),
        (CheckPointState(5, COMMITTING), True, COMMIT, CheckPointState(5, COMMITTED)),
    ],
)
def test_state_table(state, recovering, action, after_ack):
    """Storm's CheckPointState.nextAction / nextState, cell by cell."""
    assert state.next_action(recovering) == action
    assert state.next_state(recovering) == after_ack


def test_a_stored_state_round_trips_and_nonsense_is_refused():
    """The stored JSON reads back as itself; an unknown state or a missing field is an
    error naming what was found."""
    s = CheckPointState(7, COMMITTING)
    assert CheckPointState.from_json(loads_json(dumps_json(s.to_json()))) == s
    with pytest.raises(ValueError, match="DONE"):
        CheckPointState(1, "DONE")
    with pytest.raises(ValueError, match="txid"):
        CheckPointState.from_json({"state": COMMITTED})


# -- the coordinator, pure ------------------------------------------------------------


def drive(coord: CheckpointCoordinator, script: list[tuple[str, int]], now: float = 0.0):
    """Run ``script`` (("next", _), ("ack", txid), ("fail", txid)); return the steps
    emitted and the states saved."""
    emitted: list[tuple[int, str]] = []
    saved: list[CheckPointState] = []
    for what, arg in script:
        if what == "next":
            now += 10.0
            step = coord.poll(now)
            if step is not None:
                if step.save is not None:
                    saved.append(step.save)
                emitted.append((step.txid, step.action))
        elif what == "ack":
            save = coord.ack(arg)
            if save is not None:
                saved.append(save)
        else:
            coord.fail(arg, now)
    return emitted, saved


def test_fresh_topology_initializes_then_prepares_txid_0():
    """Storm's testInitState and testPrepare: (-1, INITSTATE), acked, then (0, PREPARE)."""
    coord = CheckpointCoordinator(None, 1.0)
    emitted, saved = drive(coord, [("next", 0), ("ack", -1), ("next", 0)])
    assert emitted == [(-1, INITSTATE), (0, PREPARE)]
    assert saved == [CheckPointState(0, PREPARING)]


def test_prepare_with_fail_storm_vector():
    """Storm's testPrepareWithFail: PREPARE 1 fails, ROLLBACK 1 fails and is sent again,
    then INITSTATE 0 and PREPARE 1 again: eight emits, the last (1, PREPARE)."""
    coord = CheckpointCoordinator(CheckPointState(-1, COMMITTED), 1.0)
    script = [("next", 0), ("ack", -1), ("next", 0), ("ack", 0), ("next", 0), ("ack", 0)]
    script += [("next", 0), ("fail", 1), ("next", 0), ("fail", 1), ("next", 0), ("ack", 1)]
    script += [("next", 0), ("ack", 0), ("next", 0)]
    emitted, _ = drive(coord, script)
    assert emitted == [
        (-1, INITSTATE),
        (0, PREPARE),
        (0, COMMIT),
        (1, PREPARE),
        (1, ROLLBACK),
        (1, ROLLBACK),
        (0, INITSTATE),
        (1, PREPARE),
    ]


def test_commit_that_fails_is_committed_again():
    """Storm's testCommit: after a failed COMMIT 0 the spout sends COMMIT 0 again."""
    coord = CheckpointCoordinator(None, 1.0)
    script = [("next", 0), ("ack", -1), ("next", 0), ("ack", 0), ("next", 0), ("fail", 0)]
    emitted, _ = drive(coord, [*script, ("next", 0)])
    assert emitted == [(-1, INITSTATE), (0, PREPARE), (0, COMMIT), (0, COMMIT)]


def test_recovery_from_preparing_100_rolls_back_reinitializes_and_prepares_again():
    """The issue's vector (Storm's testRecoveryRollback/RollbackAck): ROLLBACK 100,
    INITSTATE 99, PREPARE 100, with COMMITTED(99) and PREPARING(100) saved on the way."""
    coord = CheckpointCoordinator(CheckPointState(100, PREPARING), 1.0)
    emitted, saved = drive(
        coord, [("next", 0), ("ack", 100), ("next", 0), ("ack", 99), ("next", 0)]
    )
    assert emitted == [(100, ROLLBACK), (99, INITSTATE), (100, PREPARE)]
    assert saved == [CheckPointState(99, COMMITTED), CheckPointState(100, PREPARING)]


def test_recovery_from_committing_100_commits_it():
    """The issue's vector (Storm's testRecoveryCommit): COMMIT 100, then INITSTATE 100
    ends the recovery and PREPARE 101 follows."""
    coord = CheckpointCoordinator(CheckPointState(100, COMMITTING), 1.0)
    emitted, saved = drive(
        coord, [("next", 0), ("ack", 100), ("next", 0), ("ack", 100), ("next", 0)]
    )
    assert emitted == [(100, COMMIT), (100, INITSTATE), (101, PREPARE)]
    assert saved[0] == CheckPointState(100, COMMITTED)


def test_one_step_in_flight_and_prepare_waits_for_the_interval():
    """Nothing is emitted while a step is out; a new PREPARE only once the interval
    passed since the last one began; a stale ack changes nothing."""
    coord = CheckpointCoordinator(None, interval_secs=1.0)
    assert coord.poll(0.0) == Step(-1, INITSTATE)
    assert coord.poll(0.5) is None  # in flight
    assert coord.ack(7) is None and coord.in_flight  # another txid: ignored
    coord.ack(-1)
    assert coord.poll(0.6) == Step(0, PREPARE, save=CheckPointState(0, PREPARING))
    coord.ack(0)
    assert coord.poll(0.7) == Step(0, COMMIT)  # not COMMITTED: no waiting
    coord.ack(0)
    assert coord.poll(1.5) is None  # 0.9 s since PREPARE 0 began
    assert coord.poll(1.6) == Step(1, PREPARE, save=CheckPointState(1, PREPARING))


@given(st.lists(st.sampled_from(["next", "ack", "fail"]), max_size=60))
@settings(max_examples=300, deadline=None)
def test_any_order_of_verdicts_keeps_the_protocol(moves):
    """Whatever the verdicts: at most one step in flight; every saved state follows the
    table; PREPARE t is emitted only after PREPARING(t) was saved, COMMIT t only from
    COMMITTING(t); COMMITTED never moves backwards except by a rolled-back PREPARE."""
    coord = CheckpointCoordinator(None, 1.0)
    now = 0.0
    out: Step | None = None
    committed = -1
    for move in moves:
        now += 2.0
        if move == "next":
            step = coord.poll(now)
            if step is not None:
                assert out is None, "two steps in flight"
                out = step
                if step.action == PREPARE:
                    assert coord.state == CheckPointState(step.txid, PREPARING)
                if step.action == COMMIT:
                    assert coord.state == CheckPointState(step.txid, COMMITTING)
        elif out is not None:
            before, was_recovering = coord.state, coord.recovering
            if move == "ack":
                saved = coord.ack(out.txid)
                assert saved is None or saved == before.next_state(was_recovering)
                if saved is not None and saved.state == COMMITTED:
                    # Forwards, but for the ROLLBACK of an uncommitted PREPARE.
                    assert saved.txid >= committed
                    committed = saved.txid
                if saved is None:
                    assert was_recovering and before.state == COMMITTED
                    assert not coord.recovering
            else:
                coord.fail(out.txid, now)
                assert coord.recovering and coord.state == before
            out = None


# -- the spout, with a store ------------------------------------------------------------


@pytest.fixture
def store_name():
    name = "test-checkpoint-spout"
    forget(name)
    yield name
    forget(name)


def open_spout(store_name: str, stored: CheckPointState | None = None) -> tuple[Any, ...]:
    store = MemoryStore(store_name)
    if stored is not None:
        store.apply([Put(NS, TX_STATE_KEY, dumps_json(stored.to_json()))])
    conf = validate({"topology.state.provider.config": {"name": store_name}})
    spout, out = CheckpointSpout(), FakeCollector()
    context = FakeContext("$checkpointspout")
    spout.open(conf, context, out)
    return spout, out, store, context


def stored(store: MemoryStore) -> CheckPointState:
    (data,) = store.get(NS, [TX_STATE_KEY])
    return CheckPointState.from_json(loads_json(data))


def test_spout_starts_fresh_at_committed_minus_1_and_emits_initstate(store_name):
    """A first run saves COMMITTED(-1) at open and emits (-1, INITSTATE) with message id
    -1 on $checkpoint; the ack alone emits nothing (Storm's testInitState)."""
    spout, out, store, _ = open_spout(store_name)
    assert stored(store) == CheckPointState(-1, COMMITTED)
    spout.step()
    assert out.emitted == [(CHECKPOINT_STREAM, [-1, INITSTATE], -1)]
    spout.ack(-1)
    assert len(out.emitted) == 1


def test_spout_recovers_from_stored_preparing_100(store_name):
    """Stored PREPARING(100): ROLLBACK 100, INITSTATE 99, PREPARE 100, and the store says
    COMMITTED(99) and then PREPARING(100) along the way."""
    spout, out, store, ctx = open_spout(store_name, CheckPointState(100, PREPARING))
    spout.step()
    spout.ack(100)
    assert stored(store) == CheckPointState(99, COMMITTED)
    spout.step()
    spout.ack(99)
    ctx.clock = 5.0
    spout.step()
    assert [values for _, values, _ in out.emitted] == [
        [100, ROLLBACK],
        [99, INITSTATE],
        [100, PREPARE],
    ]
    assert stored(store) == CheckPointState(100, PREPARING)


def test_spout_recovers_from_stored_committing_100(store_name):
    """Stored COMMITTING(100): COMMIT 100 first, COMMITTED(100) saved on its ack."""
    spout, out, store, _ = open_spout(store_name, CheckPointState(100, COMMITTING))
    spout.step()
    assert out.emitted == [(CHECKPOINT_STREAM, [100, COMMIT], 100)]
    spout.ack(100)
    assert stored(store) == CheckPointState(100, COMMITTED)


def test_a_second_spout_instance_is_fenced_off(store_name):
    """Two instances over one store (a worker thought dead that still runs): the one
    whose view is stale is refused with a StateError and starts over from the store."""
    first, _, _, _ = open_spout(store_name)
    second, _, _, _ = open_spout(store_name)
    for spout in (first, second):
        spout.step()
        spout.ack(-1)
    first.step()  # saves PREPARING(0)
    with pytest.raises(StateError, match="another instance"):
        second.step()
    assert second.coordinator.state == CheckPointState(0, PREPARING)
    assert second.coordinator.recovering


def test_a_failed_step_is_retried_after_a_growing_pause():
    """After a fail the next step waits a tenth of the interval, doubling per failure in
    a row up to the interval; an ack ends the pause (Storm retries at once, spinning)."""
    coord = CheckpointCoordinator(CheckPointState(4, PREPARING), interval_secs=1.0)
    waits = []
    now = 0.0
    for _ in range(6):
        assert coord.poll(now) == Step(4, ROLLBACK)
        coord.fail(4, now)
        waits.append(round(coord.retry_at - now, 6))
        assert coord.poll(now + waits[-1] * 0.99) is None
        now += waits[-1]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    coord.poll(now)
    coord.ack(4)
    assert coord.retry_delay() == 0.0
