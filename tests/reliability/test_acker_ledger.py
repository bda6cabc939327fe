"""AckerLedger: Storm's acker state machine, message by message."""

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.protocol import ACKED, FAILED, RESET_TIMEOUT, TIMED_OUT


def test_init_then_acks_complete_at_zero():
    """The tree completes on the message that brings its value to zero."""
    ledger = AckerLedger()
    assert ledger.init(1, 0b1010, spout_task=3) is None
    assert ledger.ack(1, 0b1000) is None
    assert ledger.value(1) == 0b0010
    assert ledger.ack(1, 0b0010) == (ACKED, 1, 3)
    assert 1 not in ledger


def test_ack_before_init_waits_for_the_spout_task():
    """Acks may beat the init: value zero without a spout task does not complete."""
    ledger = AckerLedger()
    assert ledger.ack(1, 0b1010) is None
    assert ledger.value(1) == 0b1010
    assert ledger.init(1, 0b1010, spout_task=9) == (ACKED, 1, 9)


def test_fail_wins_and_may_arrive_before_init():
    """A fail settles the tree as failed, even before its init arrives."""
    ledger = AckerLedger()
    assert ledger.fail(1) is None
    assert ledger.init(1, 0b1, spout_task=2) == (FAILED, 1, 2)
    ledger.init(2, 0b11, spout_task=2)
    assert ledger.fail(2) == (FAILED, 2, 2)
    assert len(ledger) == 0


def test_reset_is_passed_to_the_spout_and_restarts_countdown():
    """reset_timeout keeps a record alive through rotations and tells its spout."""
    ledger = AckerLedger(num_buckets=3)
    ledger.init(1, 5, spout_task=4)
    ledger.rotate()
    ledger.rotate()
    assert ledger.reset(1) == (RESET_TIMEOUT, 1, 4)
    assert ledger.rotate() == []
    assert ledger.rotate() == []
    assert ledger.rotate() == [(TIMED_OUT, 1, 4)]


def test_untouched_tree_times_out_after_buckets_rotations():
    """A tree nobody touches expires after 3 rotations and is reported to its spout."""
    ledger = AckerLedger(num_buckets=3)
    ledger.init(1, 5, spout_task=4)
    assert ledger.rotate() == [] and ledger.rotate() == []
    assert ledger.rotate() == [(TIMED_OUT, 1, 4)]
    assert len(ledger) == 0


def test_orphan_records_expire_silently():
    """Acks for a tree whose init never comes expire without a verdict (no spout)."""
    ledger = AckerLedger(num_buckets=2)
    ledger.ack(1, 5)
    ledger.rotate()
    assert ledger.rotate() == []
    assert len(ledger) == 0


def test_capacity_guard_fails_new_trees_and_bounds_memory():
    """At the high-water mark a new tree is failed at once and not stored."""
    ledger = AckerLedger(high_water=2)
    ledger.init(1, 1, spout_task=1)
    ledger.init(2, 1, spout_task=1)
    assert ledger.init(3, 1, spout_task=1) == (FAILED, 3, 1)
    assert ledger.ack(4, 1) is None
    assert len(ledger) == 2
    # trees already held still complete
    assert ledger.ack(1, 1) == (ACKED, 1, 1)
    assert ledger.init(5, 2, spout_task=1) is None
    assert len(ledger) == 2


def test_zero_target_spout_tuple_is_acked_at_once():
    """A tracked spout tuple with no subscribers (init value 0) is complete at once."""
    assert AckerLedger().init(1, 0, spout_task=6) == (ACKED, 1, 6)
