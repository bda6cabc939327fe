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


def test_an_ack_that_leaves_the_tree_open_restarts_its_countdown():
    """As in Storm's acker, every message about a tree restarts its countdown: a tree
    still being acked is not timed out while it is making progress."""
    ledger = AckerLedger(num_buckets=3)
    ledger.init(1, 0b11, spout_task=4)
    ledger.rotate()
    ledger.rotate()  # one more rotation would time it out
    assert ledger.ack(1, 0b01) is None
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
    """At the high-water mark a new tree is failed at once and not stored; an ack that
    beats its init waits apart and does not count against the mark."""
    ledger = AckerLedger(high_water=2)
    ledger.init(1, 1, spout_task=1)
    ledger.init(2, 1, spout_task=1)
    assert ledger.init(3, 1, spout_task=1) == (FAILED, 3, 1)
    assert ledger.ack(4, 1) is None
    assert len(ledger) == 2 and ledger.early_count() == 1
    # trees already held still complete
    assert ledger.ack(1, 1) == (ACKED, 1, 1)
    assert ledger.init(5, 2, spout_task=1) is None
    assert len(ledger) == 2


def test_guard_bounds_memory_when_bolts_never_ack():
    """Endless inits that nobody acks: at most high_water trees are held, the rest are
    failed at once, and the settled roots kept for them stay under their limit."""
    ledger = AckerLedger(high_water=10, settled_limit=30)
    outcomes = [ledger.init(root, 7, spout_task=1) for root in range(1, 1001)]
    assert outcomes[:10] == [None] * 10
    assert outcomes[10:] == [(FAILED, root, 1) for root in range(11, 1001)]
    assert len(ledger) == 10
    assert ledger.settled_count() <= 30 and ledger.early_count() == 0


def fanout_tree(ledger: AckerLedger, root: int, edges: list[int], spout_task: int = 1):
    """Init a tree whose spout tuple went to len(edges) tasks; return the outcome."""
    init = 0
    for edge in edges:
        init ^= edge
    return ledger.init(root, init, spout_task)


def test_failure_storm_does_not_fail_healthy_trees():
    """Issue 13 (3): 1000 trees each failed by one branch while the other branches ack
    late, then 600 trees fully acked: none of the 600 fails (the late acks of settled
    trees used to fill the ledger up to the guard)."""
    ledger = AckerLedger(high_water=1000)
    root = 0
    for _ in range(1000):
        root += 1
        edges = [10 * root + 1, 10 * root + 2, 10 * root + 3]
        assert fanout_tree(ledger, root, edges) is None
        assert ledger.fail(root) == (FAILED, root, 1)
        assert ledger.ack(root, edges[1]) is None  # the healthy branches, late
        assert ledger.ack(root, edges[2]) is None
    outcomes = []
    for _ in range(600):
        root += 1
        edges = [10 * root + 1, 10 * root + 2, 10 * root + 3]
        assert fanout_tree(ledger, root, edges) is None
        outcomes += [ledger.ack(root, edge) for edge in edges]
    assert [o for o in outcomes if o is not None] == [(ACKED, r, 1) for r in range(1001, 1601)]
    assert len(ledger) == 0 and ledger.early_count() == 0


def test_late_acks_past_the_settled_limit_never_crowd_out_live_trees():
    """More failed trees than settled roots are kept: the late acks of the forgotten ones
    wait as early records, apart and bounded, and new trees are still admitted."""
    ledger = AckerLedger(high_water=100, early_limit=30, settled_limit=30)
    for root in range(1, 1001):
        fanout_tree(ledger, root, [root << 8, (root << 8) + 1])
        ledger.fail(root)
    for root in range(1, 1001):
        assert ledger.ack(root, (root << 8) + 1) is None
    assert ledger.early_count() <= 30 and ledger.settled_count() <= 30
    for root in range(2001, 2101):
        assert fanout_tree(ledger, root, [5, 6]) is None
        assert ledger.ack(root, 5) is None
    assert len(ledger) == 100


def test_guard_refused_and_timed_out_trees_swallow_their_late_acks():
    """A tree failed by the guard or expired by rotation leaves a settled root behind:
    its late acks and fails start no early record."""
    ledger = AckerLedger(high_water=1, num_buckets=2)
    assert ledger.init(1, 3, spout_task=1) is None
    assert ledger.init(2, 3, spout_task=1) == (FAILED, 2, 1)
    assert ledger.ack(2, 1) is None and ledger.fail(2) is None
    assert ledger.rotate() == []
    assert ledger.rotate() == [(TIMED_OUT, 1, 1)]
    assert ledger.ack(1, 1) is None and ledger.fail(1) is None
    assert ledger.early_count() == 0 and 1 not in ledger and 2 not in ledger


def test_fails_before_init_are_bounded():
    """Issue 16 (b): fails (or acks) for trees whose init never comes cannot grow the
    ledger past early_limit, and they never count against the guard."""
    ledger = AckerLedger(high_water=5, early_limit=12)
    for root in range(1, 10_001):
        assert ledger.fail(root) is None
        assert ledger.ack(root + 10_000, 9) is None
        assert ledger.early_count() <= 12
    assert len(ledger) == 0
    assert [ledger.init(r, 1, spout_task=2) for r in range(30_001, 30_006)] == [None] * 5


def test_an_ack_that_beats_its_init_survives_a_storm_of_strangers():
    """Early records past the limit drop the oldest first: an ack that beat its init
    just now still completes its tree, even after a flood of orphan acks."""
    ledger = AckerLedger(early_limit=30)
    for root in range(1, 1001):
        ledger.ack(root, 1)
    assert ledger.ack(5000, 0b110) is None
    assert ledger.init(5000, 0b110, spout_task=4) == (ACKED, 5000, 4)


def test_an_early_record_meets_the_guard_at_its_init():
    """The guard applies to an init that finds early acks too: the tree is refused, its
    early record dropped, and its later acks swallowed."""
    ledger = AckerLedger(high_water=1)
    ledger.init(1, 3, spout_task=1)
    ledger.ack(2, 1)
    assert ledger.init(2, 3, spout_task=1) == (FAILED, 2, 1)
    assert ledger.early_count() == 0
    ledger.ack(2, 2)
    assert ledger.early_count() == 0


def test_reset_keeps_an_early_record_alive():
    """reset_timeout before the init restarts the early record's countdown (no verdict:
    nobody to tell yet)."""
    ledger = AckerLedger(num_buckets=2)
    ledger.ack(1, 5)
    ledger.rotate()
    assert ledger.reset(1) is None
    ledger.rotate()
    assert ledger.init(1, 5, spout_task=3) == (ACKED, 1, 3)


def test_zero_target_spout_tuple_is_acked_at_once():
    """A tracked spout tuple with no subscribers (init value 0) is complete at once."""
    assert AckerLedger().init(1, 0, spout_task=6) == (ACKED, 1, 6)


def test_membership_and_value_cover_trees_and_early_records():
    """``in`` and ``value`` see a tree and an early record alike, and nothing else."""
    ledger = AckerLedger()
    ledger.init(1, 0b11, spout_task=1)
    ledger.ack(2, 0b101)
    assert 1 in ledger and 2 in ledger and 3 not in ledger
    assert ledger.value(1) == 0b11 and ledger.value(2) == 0b101
    assert ledger.value(3) is None


def test_side_limits_default_to_a_sixteenth_of_high_water_and_at_least_1024():
    """The early and settled tables default to max(1024, high_water // 16) entries,
    rounded down to whole buckets."""
    big = AckerLedger(high_water=2**20)
    assert big.early_limit == big.settled_limit == (2**16 // 3) * 3
    small = AckerLedger(high_water=1000)
    assert small.early_limit == small.settled_limit == (1024 // 3) * 3
    assert AckerLedger(early_limit=30, settled_limit=60).early_limit == 30
