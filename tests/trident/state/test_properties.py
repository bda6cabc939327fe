"""Exactly once, as a property: for any sequence of batches with replays, the stored
result equals applying each txid's final batch once.

Each txid is attempted one or more times; every attempt but the last fails after
writing some of its ``multi_update`` calls (perhaps all of them, commit included: a
batch can fail after its state committed), and the last one commits. A transactional
state sees the same batch in every attempt (a transactional spout); an opaque state
sees any batch per attempt (an opaque spout), and only the last one counts, including
an empty one (the committer frames empty batches for an opaque map,
``commit_empty_batches``)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trident.state.dict_backing import DictBacking
from tupletree.store.memory import MemoryStore
from tupletree.trident.state import (
    CachedMap,
    OpaqueMap,
    StateType,
    StoreBackingMap,
    TransactionalMap,
    ValueCodec,
)

KEYS = ["a", "b", ("c", 1), "d"]


def plus(n):
    return lambda old: (old or 0) + n


# An attempt: its multi_update calls, each a list of (key, delta).
_call = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(1, 5)), min_size=1, max_size=4)
_batch = st.lists(_call, max_size=3)


@st.composite
def transactional_txids(draw):
    """Per txid: the batch (its calls; a key in one call only: see TransactionalMap),
    and where each failed attempt stopped (calls written; -1 = all, then commit)."""
    out = []
    for _ in range(draw(st.integers(1, 5))):
        calls: dict[str, list] = {}
        for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=4)):
            where = draw(st.integers(0, 2))
            for d in draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)):
                calls.setdefault(where, []).append((key, d))
        batch = [calls[i] for i in sorted(calls)]
        stops = draw(st.lists(st.integers(-1, len(batch)), max_size=3))
        out.append([(batch, stop) for stop in stops] + [(batch, -1)])
    return out


@st.composite
def opaque_txids(draw):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        failed = draw(st.integers(0, 3))
        attempts = [(draw(_batch), draw(st.integers(-1, 3))) for _ in range(failed)]
        out.append([*attempts, (draw(_batch), -1)])
    return out


def run(state, txids) -> dict:
    """Drive ``state`` through the attempts; return the model: each key's sum over the
    final attempts."""
    expected: dict = {}
    for txid, attempts in enumerate(txids, start=1):
        for batch, stop in attempts:
            state.begin_commit(txid)
            calls = batch if stop == -1 else batch[:stop]
            for call in calls:
                state.multi_update([(k,) for k, _ in call], [plus(d) for _, d in call])
            if stop == -1:
                state.commit(txid)
        for call in attempts[-1][0]:
            for k, d in call:
                expected[(k,)] = expected.get((k,), 0) + d
    return expected


def _dict():
    return DictBacking()


def _cached():
    return CachedMap(DictBacking(), cache_size=2)


def _store(state_type):
    def make():
        return StoreBackingMap(MemoryStore(), f"p-{uuid.uuid4().hex}", ValueCodec(state_type))

    return make


BACKINGS = {
    "dict": lambda _t: _dict,
    "cached": lambda _t: _cached,
    "json-store": _store,
}


@pytest.mark.parametrize("backing", sorted(BACKINGS))
@settings(max_examples=60, deadline=None)
@given(txids=transactional_txids())
def test_transactional_map_applies_each_txid_once(backing, txids) -> None:
    state = TransactionalMap.build(BACKINGS[backing](StateType.TRANSACTIONAL)())
    expected = run(state, txids)
    keys = [(k,) for k in KEYS]
    assert state.multi_get(keys) == [expected.get(k) for k in keys]


@pytest.mark.parametrize("backing", sorted(BACKINGS))
@settings(max_examples=60, deadline=None)
@given(txids=opaque_txids())
def test_opaque_map_counts_only_the_last_attempt_of_each_txid(backing, txids) -> None:
    state = OpaqueMap.build(BACKINGS[backing](StateType.OPAQUE)(), partition=3)
    expected = run(state, txids)
    keys = [(k,) for k in KEYS]
    assert state.multi_get(keys) == [expected.get(k) for k in keys]


@settings(max_examples=50, deadline=None)
@given(txids=opaque_txids())
def test_every_committed_batch_costs_one_get_and_one_put_per_call(txids) -> None:
    """The I/O promise across replays: a batch of one call reads once and writes once,
    plus (only in a replay that dropped keys, or an empty batch) one read of the batch
    record and one read and write of the keys to revert."""
    db = DictBacking()
    state = OpaqueMap.build(db, partition=0)
    for txid, attempts in enumerate(txids, start=1):
        for batch, stop in attempts:
            state.begin_commit(txid)
            calls = batch if stop == -1 else batch[:stop]
            for call in calls:
                state.multi_update([(k,) for k, _ in call], [plus(d) for _, d in call])
            gets, puts = db.calls()
            assert gets <= len(calls) and puts == len(calls)
            if stop == -1:
                state.commit(txid)
                gets, puts = db.calls()
                assert gets <= 2 - bool(calls) and puts <= 1
