"""PartitionOffsets and the pure assignment rules, without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.connectors.kafka.assignment import (
    BEGINNING,
    END,
    partitions_for_task,
    start_offset,
)
from tupletree.connectors.kafka.offsets import PartitionOffsets

# One step of a spout driving one partition: emit the next record (after a gap of
# ``n`` missing offsets), ack / fail the ``n``-th pending one, or commit.
steps = st.lists(
    st.tuples(st.sampled_from(["emit", "ack", "fail", "commit"]), st.integers(0, 5)),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(start=st.integers(0, 50), max_uncommitted=st.integers(1, 20), ops=steps)
def test_commit_never_passes_an_unacked_offset(start, max_uncommitted, ops):
    """Whatever the order of emits, acks, fails and commits, the committed offset never
    passes an emitted record that was not acked, and moves as far as the acked prefix."""
    m = PartitionOffsets(start, max_uncommitted)
    emitted: list[int] = []
    acked: set[int] = set()
    committed = start
    nxt = start
    for op, n in ops:
        pending = [o for o in emitted if o not in acked and o >= committed]
        if op == "emit":
            if m.paused:
                continue
            nxt += n
            m.emit(nxt)
            emitted.append(nxt)
            nxt += 1
        elif op == "ack" and pending:
            o = pending[n % len(pending)]
            assert m.ack(o)
            assert not m.ack(o)  # a second ack changes nothing
            acked.add(o)
        elif op == "fail" and pending:
            o = pending[n % len(pending)]
            before = m.failures(o)
            assert m.fail(o) == before + 1
        elif op == "commit":
            c = m.next_commit()
            # One past the last of the acked records that follow the committed offset.
            expected = committed
            for o in (o for o in emitted if o >= committed):
                if o not in acked:
                    break
                expected = o + 1
            if expected > committed:
                assert c == expected
                assert all(o in acked for o in emitted if o < c)
                m.committed(c)
                committed = c
            else:
                assert c is None
        uncommitted = [o for o in emitted if o >= committed]
        assert m.uncommitted == len(uncommitted)
        assert m.in_flight == len([o for o in uncommitted if o not in acked])
        assert m.paused == (len(uncommitted) >= max_uncommitted)
        assert m.committed_offset == committed
    # Once everything emitted is acked, the commit reaches one past the last record.
    for o in emitted:
        if o >= committed:
            m.ack(o)
    c = m.next_commit()
    if emitted and emitted[-1] >= committed:
        assert c == emitted[-1] + 1
    else:
        assert c is None


def test_failed_record_holds_the_commit_until_acked():
    """A failed record keeps later acked offsets uncommitted until its replay is acked."""
    m = PartitionOffsets(10, 100)
    for o in (10, 11, 12, 13):
        m.emit(o)
    m.ack(10)
    assert m.fail(11) == 1
    m.ack(12)
    m.ack(13)
    assert m.next_commit() == 11
    m.committed(11)
    assert m.fail(11) == 2
    assert m.next_commit() is None
    m.ack(11)
    assert m.next_commit() == 14


def test_gaps_of_missing_offsets_do_not_hold_the_commit():
    """Offsets that do not exist (compaction) between emitted ones are skipped."""
    m = PartitionOffsets(0, 100)
    m.emit(3)
    m.emit(9)
    m.ack(9)
    assert m.next_commit() is None
    m.ack(3)
    assert m.next_commit() == 10


def test_partition_pauses_at_max_uncommitted_and_resumes_after_commit():
    """A partition with max_uncommitted emitted-but-uncommitted offsets is paused."""
    m = PartitionOffsets(0, 3)
    for o in range(3):
        m.emit(o)
    assert m.paused
    m.ack(0)
    assert m.paused  # acked but not committed still counts
    m.committed(m.next_commit())
    assert not m.paused
    assert m.uncommitted == 2


def test_bad_input_is_refused_naming_it():
    """Emitting out of order, or a bad start, is refused with the values."""
    m = PartitionOffsets(5, 10)
    m.emit(7)
    with pytest.raises(ValueError, match="offset 6 emitted after 7"):
        m.emit(6)
    with pytest.raises(ValueError, match="-1"):
        PartitionOffsets(-1, 10)
    with pytest.raises(ValueError, match="max_uncommitted"):
        PartitionOffsets(0, 0)
    assert not m.ack(3)  # below the start: not ours
    assert m.fail(100) == 0


@given(partitions=st.sets(st.integers(0, 200), max_size=40), tasks=st.integers(1, 8))
def test_round_robin_assignment_covers_each_partition_once(partitions, tasks):
    """Every partition goes to exactly one task, and shares differ by at most one."""
    shares = [partitions_for_task(partitions, i, tasks) for i in range(tasks)]
    flat = [p for share in shares for p in share]
    assert sorted(flat) == sorted(partitions)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_start_offset_follows_the_first_poll_strategy():
    """earliest/latest ignore an earlier run's commit; the uncommitted_* ones resume."""
    assert start_offset("earliest", 7, committed_by_this_run=False) == BEGINNING
    assert start_offset("latest", 7, committed_by_this_run=False) == END
    assert start_offset("earliest", 7, committed_by_this_run=True) == 7
    assert start_offset("uncommitted_earliest", 7, committed_by_this_run=False) == 7
    assert start_offset("uncommitted_earliest", None, committed_by_this_run=False) == BEGINNING
    assert start_offset("uncommitted_latest", None, committed_by_this_run=False) == END
    with pytest.raises(ValueError, match="first_poll must be one of"):
        start_offset("newest", None, False)
