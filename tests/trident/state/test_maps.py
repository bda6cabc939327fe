"""The map states on Storm's worked values
(https://storm.apache.org/releases/current/Trident-state.html), their I/O promise (one
multi-get and one multi-put per batch), and the cases Storm's own code gets wrong here."""

from __future__ import annotations

import pickle

import pytest

from tests.trident.state.dict_backing import DictBacking, WriteFailed
from tupletree.trident.state import (
    BatchBehindError,
    CachedMap,
    CombinerValueUpdater,
    MemoryMapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    ReducerValueUpdater,
    SnapshottableMap,
    StateType,
    TransactionalMap,
    TransactionalValue,
)
from tupletree.trident.state.opaque_map import BATCH_RECORD


def plus(n):
    return lambda old: (old or 0) + n


class Count:
    """A CombinerAggregator as trident-core's builtin Count: one per tuple, summed."""

    def init(self, tup):
        return 1

    def combine(self, a, b):
        return a + b

    def zero(self):
        return 0


def storm_transactional_db() -> DictBacking:
    return DictBacking(
        {
            ("man",): TransactionalValue(1, 3),
            ("dog",): TransactionalValue(3, 4),
            ("apple",): TransactionalValue(2, 10),
        }
    )


STORM_TRANSACTIONAL_AFTER = {
    ("man",): TransactionalValue(3, 5),
    ("dog",): TransactionalValue(3, 4),
    ("apple",): TransactionalValue(2, 10),
}


def test_transactional_worked_vector_with_partial_counts() -> None:
    """Storm's docs: {man:[3,1], dog:[4,3], apple:[10,2]} + batch 3 [man, man, dog]
    (partial counts man 2, dog 1) -> {man:[5,3], dog:[4,3], apple:[10,2]}; dog already
    holds txid 3, so it is skipped. One multi-get and one multi-put."""
    db = storm_transactional_db()
    state = TransactionalMap.build(db)
    state.begin_commit(3)
    out = state.multi_update(
        [("man",), ("dog",)], [CombinerValueUpdater(Count(), 2), CombinerValueUpdater(Count(), 1)]
    )
    state.commit(3)
    assert out == [5, 4]
    assert db.data == STORM_TRANSACTIONAL_AFTER
    assert db.calls() == (1, 1)


def test_transactional_worked_vector_tuple_by_tuple_and_replayed() -> None:
    """The same batch given tuple by tuple (a key repeated in one call composes), then
    txid 3 applied again, as a replay does: nothing changes, and nothing is written."""
    db = storm_transactional_db()
    state = TransactionalMap.build(db)
    for _attempt in range(2):
        state.begin_commit(3)
        state.multi_update([("man",), ("man",), ("dog",)], [plus(1)] * 3)
        state.commit(3)
        assert db.data == STORM_TRANSACTIONAL_AFTER
    assert db.calls() == (2, 1)  # the replay reads, and has nothing to write


def test_transactional_builds_on_what_this_batch_wrote() -> None:
    """Storm's CachedBatchReadsMap rule: a key this batch already wrote carries the
    batch's txid but is built on, not skipped."""
    db = storm_transactional_db()
    state = TransactionalMap.build(db)
    state.begin_commit(3)
    state.multi_update([("man",)], [plus(1)])
    state.multi_update([("man",)], [plus(1)])
    assert state.multi_get([("man",)]) == [5]
    state.commit(3)
    assert db.data[("man",)] == TransactionalValue(3, 5)


def opaque_db() -> DictBacking:
    return DictBacking({("count",): OpaqueValue(2, 4, 1)})


def test_opaque_worked_vector_next_batch() -> None:
    """{value 4, prev 1, txid 2} + partial count 2 at txid 3 -> {6, 4, 3}."""
    db = opaque_db()
    state = OpaqueMap.build(db)
    state.begin_commit(3)
    assert state.multi_update([("count",)], [plus(2)]) == [6]
    state.commit(3)
    assert db.data[("count",)] == OpaqueValue(3, 6, 4)


def test_opaque_worked_vector_replayed_batch() -> None:
    """The same partial count replayed at txid 2 builds on prev: {3, 1, 2}."""
    db = opaque_db()
    state = OpaqueMap.build(db)
    state.begin_commit(2)
    assert state.multi_update([("count",)], [plus(2)]) == [3]
    state.commit(2)
    assert db.data[("count",)] == OpaqueValue(2, 3, 1)


def test_opaque_batch_behind_the_state_is_refused_naming_the_key() -> None:
    db = opaque_db()
    state = OpaqueMap.build(db)
    state.begin_commit(1)
    with pytest.raises(BatchBehindError, match=r"Current batch \(1\) is behind state's batch") as e:
        state.multi_update([("count",)], [plus(2)])
    assert (e.value.batch_txid, e.value.state_txid, e.value.key) == (1, 2, ("count",))
    assert db.data == opaque_db().data
    again = pickle.loads(pickle.dumps(e.value))
    assert (again.batch_txid, again.key, str(again)) == (1, ("count",), str(e.value))


def test_opaque_value_arithmetic() -> None:
    """OpaqueValue.update/get, Storm's three cases, and a txid of None (DRPC, or a value
    set outside a batch) taken as older than any batch."""
    v = OpaqueValue(2, 4, 1)
    assert (v.get(3), v.update(3, 6)) == (4, OpaqueValue(3, 6, 4))
    assert (v.get(2), v.update(2, 3)) == (1, OpaqueValue(2, 3, 1))
    for behind in (lambda: v.get(1), lambda: v.update(1, 0)):
        with pytest.raises(BatchBehindError, match=r"batch \(1\) is behind state's batch \(2\)"):
            behind()
    assert (v.get(None), v.update(None, 9)) == (4, OpaqueValue(None, 9, 4))
    assert OpaqueValue(None, 7).get(1) == 7


def test_opaque_multi_get_during_a_replay_answers_the_value_before_it() -> None:
    db = opaque_db()
    state = OpaqueMap.build(db)
    assert state.multi_get([("count",)]) == [4]  # outside a batch: curr
    state.begin_commit(2)
    assert state.multi_get([("count",), ("never",)]) == [1, None]


def test_one_multi_get_and_one_multi_put_per_batch_with_the_batch_record() -> None:
    """The opaque batch record rides in the batch's one get and one put."""
    db = DictBacking()
    state = OpaqueMap.build(db, partition=0)
    for txid in (1, 2, 3):
        state.begin_commit(txid)
        state.multi_update([("a",), ("b",), ("a",)], [plus(1)] * 3)
        state.commit(txid)
        assert db.calls() == (1, 1)
    assert db.data[(BATCH_RECORD, 0, 1)] == OpaqueValue(3, [["a"], ["b"]])
    assert db.user_data() == {("a",): OpaqueValue(3, 6, 4), ("b",): OpaqueValue(3, 3, 2)}


def test_opaque_replay_that_drops_a_key_reverts_it() -> None:
    """Attempt 1 of txid 2 counts a and b; the final attempt has only a (b's tuple moved
    to txid 3, as an opaque spout may do). b must not keep attempt 1's count: at txid 3
    it counts once. Storm's OpaqueMap (no partition, no record) counts it twice."""

    def run(state, db):
        state.begin_commit(1)
        state.multi_update([("a",), ("b",)], [plus(1), plus(1)])
        state.commit(1)
        state.begin_commit(2)  # attempt 1: fails after writing
        state.multi_update([("a",), ("b",)], [plus(1), plus(1)])
        state.begin_commit(2)  # final attempt
        state.multi_update([("a",)], [plus(1)])
        state.commit(2)
        after_2 = state.multi_get([("a",), ("b",)])
        state.begin_commit(3)
        state.multi_update([("b",)], [plus(1)])
        state.commit(3)
        return after_2, state.multi_get([("a",), ("b",)])

    db = DictBacking()
    assert run(OpaqueMap.build(db, partition=7), db) == ([2, 1], [2, 2])
    storm = DictBacking()
    assert run(OpaqueMap.build(storm), storm) == ([2, 2], [2, 3])


def test_opaque_empty_final_attempt_reverts_what_an_earlier_attempt_wrote() -> None:
    """A final attempt that sends this partition nothing: the committer still frames it
    (commit_empty_batches), and commit puts the earlier attempt's key back."""
    db = DictBacking({("k",): OpaqueValue(1, 10, 0)})
    state = OpaqueMap.build(db, partition=0)
    assert state.commit_empty_batches
    state.begin_commit(2)
    state.multi_update([("k",), ("new",)], [plus(5), plus(5)])
    db.calls()
    state.begin_commit(2)
    state.commit(2)
    assert db.calls() == (2, 1)  # the record, the stale values; their revert
    assert state.multi_get([("k",), ("new",)]) == [10, None]
    state.begin_commit(3)
    assert state.multi_update([("k",)], [plus(1)]) == [11]
    state.commit(3)


def test_a_failed_write_writes_nothing_and_the_replay_applies() -> None:
    """An updater or a backing write that fails leaves the state as it was; the replay
    of the txid then applies in full (transactional and opaque)."""
    for build in (TransactionalMap.build, OpaqueMap.build):
        db = DictBacking()
        state = build(db)
        state.begin_commit(1)
        with pytest.raises(ZeroDivisionError):
            state.multi_update([("a",), ("b",)], [plus(1), lambda old: 1 / 0])
        db.fail_puts = 1
        with pytest.raises(WriteFailed):
            state.multi_update([("a",)], [plus(1)])
            state.commit(1)  # a transactional map writes at its commit
        assert db.data == {}
        state.begin_commit(1)
        assert state.multi_update([("a",)], [plus(1)]) == [1]
        state.commit(1)
        assert state.multi_get([("a",)]) == [1]


def test_a_transactional_batch_is_stored_whole_or_not_at_all() -> None:
    """An updater that calls multi_update once per tuple, and fails part-way: nothing
    reaches the backing map before the batch's commit, so the replay applies every
    update once (written through, the first update was stored with the txid, and the
    replay skipped it and every later one of the key as already applied)."""
    db = DictBacking()
    state = TransactionalMap.build(db)
    state.begin_commit(1)
    assert state.multi_update([("a",)], [plus(1)]) == [1]
    assert state.multi_get([("a",)]) == [1]  # the batch reads its own writes
    assert db.data == {}
    state.begin_commit(1)  # the attempt failed before its commit; the replay:
    for expected in (1, 2):
        assert state.multi_update([("a",)], [plus(1)]) == [expected]
    state.commit(1)
    assert db.data == {("a",): TransactionalValue(1, 2)}
    state.begin_commit(1)  # committed, but the coordinator did not hear: skipped whole
    assert state.multi_update([("a",)], [plus(1)]) == [2]
    state.commit(1)
    assert db.data == {("a",): TransactionalValue(1, 2)}


def test_cached_map_serves_from_memory_bounded_lru() -> None:
    db = DictBacking({(k,): k for k in "abcd"})
    cached = CachedMap(db, cache_size=2)
    assert cached.multi_get([("a",), ("b",)]) == ["a", "b"]
    assert cached.multi_get([("b",), ("a",)]) == ["b", "a"]
    assert db.calls() == (1, 0)
    cached.multi_get([("c",)])  # evicts b, the least recently used
    assert len(cached) == 2
    cached.multi_get([("a",), ("b",)])
    assert db.calls() == (2, 0)
    with pytest.raises(ValueError, match="cache_size must be an int >= 1, got 0"):
        CachedMap(db, cache_size=0)


def test_cached_map_keeps_no_value_the_backing_refused() -> None:
    """A transactional replay after a failed write must apply the batch: Storm's
    CachedMap cached the refused value, and the replay then skipped it as applied."""
    db = DictBacking({("a",): TransactionalValue(1, 1)})
    state = TransactionalMap.build(CachedMap(db))
    state.begin_commit(2)
    db.fail_puts = 1
    with pytest.raises(WriteFailed):
        state.multi_update([("a",)], [plus(1)])
        state.commit(2)
    state.begin_commit(2)
    state.multi_update([("a",)], [plus(1)])
    state.commit(2)
    assert db.data[("a",)] == TransactionalValue(2, 2)


def test_non_transactional_map_counts_a_replay_again() -> None:
    db = DictBacking()
    state = NonTransactionalMap.build(db)
    for expected in ([1, 2], [3, 4]):
        state.begin_commit(1)
        assert state.multi_update([("a",), ("a",)], [plus(1)] * 2) == expected
        state.commit(1)
    assert db.data == {("a",): 4}
    assert db.calls() == (2, 2)


def test_snapshottable_map_holds_the_global_aggregate() -> None:
    state = SnapshottableMap(OpaqueMap.build(DictBacking(), partition=0))
    assert (state.state_type, state.commit_empty_batches) == (StateType.OPAQUE, True)
    state.begin_commit(1)
    assert state.get() is None
    assert state.update(plus(3)) == 3
    state.commit(1)
    state.begin_commit(2)
    state.set(10)
    state.commit(2)
    assert state.get() == 10


def test_reducer_value_updater_folds_the_batch() -> None:
    class Concat:
        def init(self):
            return ""

        def reduce(self, curr, tup):
            return curr + tup

    assert ReducerValueUpdater(Concat(), ["a", "b"])(None) == "ab"
    assert ReducerValueUpdater(Concat(), ["c"])("ab") == "abc"


def test_memory_map_state_is_shared_per_factory() -> None:
    """The query side's state (same factory) sees what the updating side committed, from
    any partition (a key's partition changes with the parallelism, as it would over a
    durable map's one table); another factory does not."""
    factory = MemoryMapState.Factory()
    try:
        updating, query = (factory.make_state({}, None, 1, 2) for _ in range(2))
        other_partition = factory.make_state({}, None, 0, 2)
        other_factory = MemoryMapState.Factory().make_state({}, None, 1, 2)
        updating.begin_commit(1)
        updating.multi_update([("the",), ("cow",), ("the",)], [plus(1)] * 3)
        updating.update(plus(3))
        updating.commit(1)
        assert query.multi_get([("the",), ("cow",)]) == [2, 1]
        assert query.get() == 3
        assert sorted(query.get_tuples(), key=str) == sorted(
            [["the", 2], ["cow", 1], ["$MEMORY-MAP-STATE-GLOBAL$", 3]], key=str
        )
        assert other_partition.multi_get([("the",)]) == [2]
        assert other_factory.multi_get([("the",)]) == [None]
        assert factory.state_type is query.state_type is StateType.OPAQUE
        assert factory.shared_across_hosts is False  # one process
        factory = pickle.loads(pickle.dumps(factory))  # as shipped to a worker
        assert factory.make_state({}, None, 1, 2).multi_get([("the",)]) == [2]
    finally:
        factory.forget(2)
    assert factory.make_state({}, None, 1, 2).multi_get([("the",)]) == [None]


def test_memory_map_state_keeps_value_types_and_copies() -> None:
    """Pickled values: a tuple stays a tuple, and changing what was read changes nothing."""
    state = MemoryMapState.Factory().make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_put([("k",)], [(1, [2])])
    state.commit(1)
    got = state.multi_get([("k",)])[0]
    got[1].append(3)
    assert state.multi_get([("k",)]) == [(1, [2])]


@pytest.mark.parametrize(
    "build", [OpaqueMap.build, TransactionalMap.build, NonTransactionalMap.build]
)
def test_bad_calls_are_refused_by_name(build) -> None:
    state = build(DictBacking())
    with pytest.raises(ValueError, match=r"multi_update: 2 keys but 1 values or updaters"):
        state.multi_update([("a",), ("b",)], [plus(1)])
    with pytest.raises(ValueError, match=r"multi_put: 1 keys but 2 values"):
        state.multi_put([("a",)], [1, 2])
    with pytest.raises(TypeError, match=r"got 'man'; wrap a single value as \('man',\)"):
        state.multi_get(["man"])
    assert state.multi_get([["a"]]) == [None]  # a list is the tuple of its items
