"""BatchTable, the master batch coordinator's decisions: Storm's rules on worked
sequences, and hypothesis over random ack / fail / timeout orders (commits strictly in
txid order, each txid committed once, attempts only grow, the active set bounded)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.trident.attempt import TransactionAttempt as TA
from tupletree.trident.coordinator import (
    COMMITTING,
    MAX_REPLAY_DELAY_SECS,
    PROCESSED,
    PROCESSING,
    BatchTable,
    Committed,
    EmitBatch,
    EmitCommit,
    replay_delay,
)


def always(txid: int) -> bool:
    return True


def batches(out: list[Any]) -> list[TA]:
    return [o.attempt for o in out if isinstance(o, EmitBatch)]


def test_first_sync_starts_one_batch_per_interval() -> None:
    table = BatchTable(max_active=3, interval_secs=0.5)
    assert table.sync(0.0, always) == [EmitBatch(TA(1, 0))]
    assert table.sync(0.4, always) == []
    assert table.sync(0.5, always) == [EmitBatch(TA(2, 0))]
    assert table.sync(1.0, always) == [EmitBatch(TA(3, 0))]
    assert table.sync(9.0, always) == []  # 3 active: the bound


def test_commit_waits_for_the_current_txid() -> None:
    """Batch 2 processed before batch 1: nothing commits until 1 is processed, then 1,
    and only after 1's commit, 2."""
    table = BatchTable(max_active=2, interval_secs=0)
    assert batches(table.sync(0, always)) == [TA(1, 0), TA(2, 0)]
    assert table.ack(TA(2, 0), 0, always) == []
    assert table.status(2) == PROCESSED
    assert table.ack(TA(1, 0), 0, always) == [EmitCommit(TA(1, 0))]
    assert table.status(1) == COMMITTING and table.status(2) == PROCESSED
    out = table.ack(TA(1, 0), 0, always)
    assert out[:2] == [Committed(TA(1, 0)), EmitCommit(TA(2, 0))]
    assert batches(out) == [TA(3, 0)]
    assert table.current_txid == 2


def test_five_active_batch_two_delayed_then_batch_three_fails() -> None:
    """The issue's ordering case: 5 active, 2 delayed: 3, 4, 5 finish processing first
    but commit after 2; failing 3 replays 3, 4, 5 with attempt 1, never 1 or 2."""
    table = BatchTable(max_active=5, interval_secs=0)
    assert batches(table.sync(0, always)) == [TA(t, 0) for t in range(1, 6)]
    for t in (3, 4, 5, 1):
        out = table.ack(TA(t, 0), 0, always)
    assert out == [EmitCommit(TA(1, 0))]
    out = table.ack(TA(1, 0), 0, always)  # 1 committed; 2 still processing
    assert out[0] == Committed(TA(1, 0))
    assert not [o for o in out if isinstance(o, EmitCommit)]
    assert [table.status(t) for t in (2, 3, 4, 5)] == [PROCESSING, PROCESSED, PROCESSED, PROCESSED]
    assert table.ack(TA(2, 0), 0, always)[0] == EmitCommit(TA(2, 0))
    out = table.ack(TA(2, 0), 0, always)
    assert out[:2] == [Committed(TA(2, 0)), EmitCommit(TA(3, 0))]
    out = table.fail(TA(3, 0), 0, always)
    assert batches(out)[:3] == [TA(3, 1), TA(4, 1), TA(5, 1)]
    assert all(a.transaction_id > 2 for a in batches(out))
    # The replaced attempts' trees are stale now: their acks change nothing.
    assert table.ack(TA(4, 0), 0, always) == []
    assert table.status(4) == PROCESSING


def test_a_batch_failing_again_and_again_backs_off_and_its_successors_wait() -> None:
    """A txid that fails on every attempt (a poison tuple, a sink that is down) replays
    at once twice, then waits 0.5 s, 1 s, 2 s ... at most 30 s, and the txids after it
    wait with it; once it commits, the next batch starts without a delay, and a batch
    that fails once is replayed at once."""
    table = BatchTable(max_active=2, interval_secs=0)
    assert batches(table.sync(0, always)) == [TA(1, 0), TA(2, 0)]
    now, waited = 0.0, []
    for attempt in range(9):
        out = table.fail(TA(1, attempt), now, always)
        if not out:
            delay = replay_delay(attempt + 1)
            assert table.sync(now + delay - 0.01, always) == [], "started before its delay"
            now += delay
            out = table.sync(now, always)
            waited.append(delay)
        assert batches(out) == [TA(1, attempt + 1), TA(2, attempt + 1)]
    assert waited == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    table.ack(TA(1, 9), now, always)
    assert [o for o in table.ack(TA(1, 9), now, always) if not isinstance(o, EmitCommit)] == [
        Committed(TA(1, 9)),
        EmitBatch(TA(3, 0)),
    ]
    assert table.failures == {}
    # Txid 2 failed with 1 nine times, but those were 1's failures: its own first
    # failure is replayed at once.
    assert batches(table.fail(TA(2, 9), now, always)) == [TA(2, 10), TA(3, 1)]


def test_a_stale_fail_is_ignored() -> None:
    table = BatchTable(max_active=2, interval_secs=0)
    table.sync(0, always)
    table.fail(TA(1, 0), 0, always)  # replays 1 and 2 as attempt 1
    assert table.fail(TA(2, 0), 0, always) == []
    assert table.active == {1: [1, PROCESSING], 2: [1, PROCESSING]}


def test_not_ready_and_not_running_start_nothing_but_commits_go_on() -> None:
    table = BatchTable(max_active=2, interval_secs=0)
    assert table.sync(0, lambda t: t != 1) == [EmitBatch(TA(2, 0))]
    table = BatchTable(max_active=1, interval_secs=0)
    table.sync(0, always)
    assert table.ack(TA(1, 0), 0, always, running=False) == [EmitCommit(TA(1, 0))]
    assert table.ack(TA(1, 0), 0, always, running=False) == [Committed(TA(1, 0))]


def test_reload_resumes_at_the_stored_txid_with_higher_attempts() -> None:
    table = BatchTable(max_active=2, interval_secs=0, current_txid=7, attempts={6: 3, 7: 2})
    assert batches(table.sync(0, always)) == [TA(7, 3), TA(8, 0)]
    assert 6 not in table.attempts
    assert table.replayed == 1


def test_a_reload_behind_the_last_commit_takes_that_commit_back() -> None:
    """The coordinator reloads when the store did not record a commit: the views said
    txid 3 committed while the current txid was 3 again."""
    table = BatchTable(max_active=1, interval_secs=0, current_txid=3)
    table.sync(0, always)
    table.ack(TA(3, 0), 0, always)
    table.ack(TA(3, 0), 0, always)  # its commit tree: committed, in the table
    assert table.snapshot()["lastCommittedTxid"] == 3
    table.reload(3, {3: 0})  # the store still says 3
    snap = table.snapshot()
    assert (snap["currentTxid"], snap["lastCommittedTxid"]) == (3, 2)
    table.reload(5, {})  # another coordinator went further: ours stays what it was
    assert table.snapshot()["lastCommittedTxid"] == 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_active"):
        BatchTable(max_active=0, interval_secs=0)
    with pytest.raises(ValueError, match="current_txid"):
        BatchTable(max_active=1, interval_secs=0, current_txid=0)


# -- hypothesis: random orders of outcomes ----------------------------------------------

step = st.one_of(
    st.tuples(st.just("tick"), st.floats(0, 2), st.booleans()),
    st.tuples(st.just("ack"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("fail"), st.integers(0, 50), st.booleans()),
)


class Checker:
    """Feeds outcomes to the table as the acker would and checks every invariant."""

    def __init__(self, table: BatchTable) -> None:
        self.table = table
        self.in_flight: list[tuple[str, TA]] = []
        self.last_attempt: dict[int, int] = {}
        self.processed: set[TA] = set()
        self.committed: list[int] = []
        self.commit_emitted: set[TA] = set()

    def take(self, out: list[Any]) -> None:
        table = self.table
        for o in out:
            a = o.attempt
            if isinstance(o, EmitBatch):
                assert a.attempt_id > self.last_attempt.get(a.transaction_id, -1)
                assert a.transaction_id not in self.committed
                self.last_attempt[a.transaction_id] = a.attempt_id
                self.in_flight.append(("batch", a))
            elif isinstance(o, EmitCommit):
                assert a in self.processed, "a commit before its batch was processed"
                assert a.transaction_id == (self.committed[-1] + 1 if self.committed else 1)
                self.commit_emitted.add(a)
                self.in_flight.append(("commit", a))
            else:
                assert a in self.commit_emitted
                expected = self.committed[-1] + 1 if self.committed else 1
                assert a.transaction_id == expected, "commits out of txid order or twice"
                self.committed.append(a.transaction_id)
        assert len(table.active) <= table.max_active

    def settle(self, index: int, ok: bool, now: float) -> None:
        if not self.in_flight:
            return
        kind, attempt = self.in_flight.pop(index % len(self.in_flight))
        table = self.table
        live = table.active.get(attempt.transaction_id)
        fresh = live is not None and live[0] == attempt.attempt_id
        if ok:
            if kind == "batch" and fresh:
                self.processed.add(attempt)
            self.take(table.ack(attempt, now, always))
        else:
            self.take(table.fail(attempt, now, always))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 5),
    st.sampled_from([0.0, 0.5]),
    st.lists(step, max_size=80),
)
def test_random_outcome_orders_keep_every_invariant(
    max_active: int, interval: float, steps: list[Any]
) -> None:
    table = BatchTable(max_active=max_active, interval_secs=interval)
    check = Checker(table)
    now = 0.0
    for kind, arg, flag in steps:
        if kind == "tick":
            now += arg
            check.take(table.sync(now, lambda t, f=flag: f or t % 2 == 0))
        else:
            check.settle(arg, kind == "ack", now)
    # Then a healthy cluster: every tree completes. Once any replay backoff has run
    # out, commits must make progress.
    before = len(check.committed)
    now += MAX_REPLAY_DELAY_SECS
    for _ in range(6 * max_active + 6):
        now += interval + 0.1
        check.take(table.sync(now, always))
        for _ in range(len(check.in_flight)):  # the trees in flight now; acks start more
            check.settle(0, True, now)
    assert len(check.committed) > before
    assert check.committed == list(range(1, len(check.committed) + 1))
