"""The durable map states on real SQLite, Redis and PostgreSQL: Storm's worked vectors
through each, the rows as a person reads them, one round trip of each kind per batch,
and a state opened again (a restarted worker) finding what was committed."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator

import pytest

from tests.trident.state.backends import OPENERS, Backend
from tupletree.trident.state import (
    CombinerValueUpdater,
    OpaqueValue,
    StateType,
    TransactionalValue,
)


class Count:
    def combine(self, a, b):
        return a + b


def plus(n):
    return CombinerValueUpdater(Count(), n)


@pytest.fixture(params=sorted(OPENERS))
def backend(request, tmp_path) -> Iterator[Backend]:
    opened = OPENERS[request.param](tmp_path)
    yield next(opened)
    next(opened, None)


def rows_as_json(backend: Backend) -> dict[str, object]:
    return {k: json.loads(v) for k, v in backend.rows().items()}


def test_transactional_worked_vector(backend: Backend) -> None:
    """{man:[3,1], dog:[4,3], apple:[10,2]} + txid 3 [man, man, dog] -> man [5,3], dog
    skipped; txid 3 again changes nothing. One read and one write for the batch."""
    factory = backend.factory(StateType.TRANSACTIONAL)
    factory.open_backing({}, 0).multi_put(
        [("man",), ("dog",), ("apple",)],
        [TransactionalValue(1, 3), TransactionalValue(3, 4), TransactionalValue(2, 10)],
    )
    backend.calls()
    state = factory.make_state({}, None, 0, 1)
    after = {
        '["man"]': {"txid": 3, "val": 5},
        '["dog"]': {"txid": 3, "val": 4},
        '["apple"]': {"txid": 2, "val": 10},
    }
    for _attempt in range(2):
        state.begin_commit(3)
        state.multi_update([("man",), ("dog",)], [plus(2), plus(1)])
        state.commit(3)
        assert rows_as_json(backend) == after
    assert backend.calls() == (2, 1)  # the replay reads and writes nothing
    again = factory.make_state({}, None, 0, 1)  # a restarted worker
    assert again.multi_get([("man",), ("dog",), ("apple",), ("cat",)]) == [5, 4, 10, None]


def test_opaque_worked_vectors(backend: Backend) -> None:
    """{4, prev 1, txid 2}: +2 at txid 3 -> {6, 4, 3}; +2 replayed at txid 2 -> {3, 1, 2};
    at txid 1, behind: refused, nothing written."""
    factory = backend.factory(StateType.OPAQUE)
    seed = factory.open_backing({}, 0)
    for partition, (txid, expected) in enumerate(((3, [6, 4, 3]), (2, [3, 1, 2]))):
        seed.multi_put([("count",)], [OpaqueValue(2, 4, 1)])
        backend.calls()
        state = factory.make_state({}, None, partition, 2)  # a batch record of its own
        state.begin_commit(txid)
        state.multi_update([("count",)], [plus(2)])
        state.commit(txid)
        assert backend.calls() == (1, 1)
        curr, prev, tx = expected
        assert rows_as_json(backend) == {'["count"]': {"currTxid": tx, "curr": curr, "prev": prev}}
    state.begin_commit(1)
    with pytest.raises(RuntimeError, match=r"Current batch \(1\) is behind state's batch \(2\)"):
        state.multi_update([("count",)], [plus(2)])
    assert rows_as_json(backend) == {'["count"]': {"currTxid": 2, "curr": 3, "prev": 1}}


def test_a_batch_is_one_read_and_one_write_whatever_its_size(backend: Backend) -> None:
    """Two partitions, 200 keys each, one call each: one round trip of each kind per
    batch and partition; the batch records of the partitions stay apart."""
    factory = backend.factory(StateType.OPAQUE)
    states = [factory.make_state({}, None, p, 2) for p in range(2)]
    for txid in (1, 2):
        for p, state in enumerate(states):
            state.begin_commit(txid)
            state.multi_update([(f"k{p}-{i}",) for i in range(200)], [plus(1)] * 200)
            state.commit(txid)
            assert backend.calls() == (1, 1)
    assert len(backend.rows()) == 400
    assert states[0].multi_get([("k1-7",), ("k0-199",)]) == [2, 2]


def test_non_transactional_and_global_values(backend: Backend) -> None:
    factory = backend.factory(StateType.NON_TRANSACTIONAL)
    state = factory.make_state({}, None, 0, 1)
    for _ in range(2):  # a replay counts again: that is what it promises
        state.begin_commit(1)
        state.update(plus(5))
        state.commit(1)
    assert state.get() == 10
    assert rows_as_json(backend) == {'["$MEMORY-MAP-STATE-GLOBAL$"]': 10}


def test_pickle_serializer_keeps_python_values(backend: Backend) -> None:
    factory = backend.factory(StateType.OPAQUE, serializer="pickle")
    state = factory.make_state({}, None, 0, 1)
    state.begin_commit(1)
    state.multi_put([("k",)], [(1, frozenset({2}))])
    state.commit(1)
    assert factory.make_state({}, None, 0, 1).multi_get([("k",)]) == [(1, frozenset({2}))]
    shipped = pickle.loads(pickle.dumps(backend.make(StateType.OPAQUE, serializer="pickle")))
    assert shipped.make_state({}, None, 0, 1).multi_get([("k",)]) == [(1, frozenset({2}))]


def test_postgres_refuses_a_table_of_another_shape_or_a_bad_name(tmp_path) -> None:
    opened = OPENERS["postgresql"](tmp_path)
    backend = next(opened)
    try:
        backend.factory(StateType.OPAQUE).make_state({}, None, 0, 1)  # creates (key, jsonb)
        with pytest.raises(ValueError, match=r"has columns .*needs \(key text, value bytea\)"):
            backend.factory(StateType.OPAQUE, serializer="pickle").make_state({}, None, 0, 1)
    finally:
        next(opened, None)
    from tupletree.trident.state import PostgresMapState

    for bad in ("drop table x;", "a.b.c", "1abc", ""):
        with pytest.raises(ValueError, match=r"must be a name or schema\.name"):
            PostgresMapState.opaque("postgresql://127.0.0.1/test", bad)
    with pytest.raises(ValueError, match="cache_size must be an int >= 0, got -1"):
        PostgresMapState.opaque("postgresql://127.0.0.1/test", "t", cache_size=-1)
