"""KeyValueState on every provider: Storm's InMemoryKeyValueStateTest vectors, the
prepare-hash layout, what survives a restart, and the guards."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from tupletree.state.kv import KeyValueState, StateError, decode_key, encode_key
from tupletree.store import MemoryStore, Put

from .conftest import Provider


def values(state: KeyValueState) -> list[str | None]:
    return [state.get("a"), state.get("b"), state.get("c")]


def test_put_and_get(provider: Provider) -> None:
    """Storm's testPutAndGet."""
    state = KeyValueState(provider.open(), "kv")
    state.put("a", "1")
    state.put("b", "2")
    assert values(state) == ["1", "2", None]
    assert state.get("c", "default") == "default"


def test_put_and_delete(provider: Provider) -> None:
    """Storm's testPutAndDelete: delete returns the value it removed."""
    state = KeyValueState(provider.open(), "kv")
    state.put("a", "1")
    state.put("b", "2")
    assert state.delete("a") == "1"
    assert values(state) == [None, "2", None]


def test_prepare_commit_rollback(provider: Provider) -> None:
    """Storm's testPrepareCommitRollback, step by step."""
    state = KeyValueState(provider.open(), "kv")
    state.put("a", "1")
    state.put("b", "2")
    state.prepare_commit(1)
    state.put("c", "3")
    assert values(state) == ["1", "2", "3"]
    state.rollback()
    assert values(state) == [None, None, None]
    state.put("a", "1")
    state.put("b", "2")
    state.prepare_commit(1)
    state.commit(1)
    state.put("c", "3")
    assert values(state) == ["1", "2", "3"]
    state.rollback()
    assert values(state) == ["1", "2", None]
    state.put("c", "3")
    assert state.delete("b") == "2"
    assert state.delete("c") == "3"
    assert values(state) == ["1", None, None]
    state.prepare_commit(2)
    assert values(state) == ["1", None, None]
    state.commit(2)
    assert values(state) == ["1", None, None]
    state.put("b", "2")
    state.prepare_commit(3)
    state.put("c", "3")
    assert values(state) == ["1", "2", "3"]
    state.rollback()
    assert values(state) == ["1", None, None]


def test_rollback_restores_a_copy_not_the_committed_map_itself(provider: Provider) -> None:
    """Storm's InMemoryKeyValueState.rollback makes the committed map the live one, so
    the next puts change the committed snapshot and a second rollback keeps them. Here
    a rollback always comes back to the committed values, and a value read after a
    rollback is a copy: changing it does not change what is committed."""
    state = KeyValueState(provider.open(), "kv")
    state.put("a", [1])
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", [2])
    state.rollback()
    assert state.get("a") == [1]
    state.put("a", [3])
    state.rollback()
    assert state.get("a") == [1]
    state.get("a").append(99)  # changed without put: not saved (put what you change)
    state.rollback()
    assert state.get("a") == [1]


def test_the_prepare_hash_layout(provider: Provider) -> None:
    """Storm's Redis layout on every backend: prepare writes the changes to
    ``<ns>$prepare`` (a tombstone for a delete) and the prepare txid; commit applies
    them to ``<ns>``, records the commit txid and removes ``<ns>$prepare``; rollback
    removes ``<ns>$prepare``."""
    store = provider.open()
    state = KeyValueState(store, "count-0")
    state.put("x", 1)
    state.prepare_commit(5)
    state.commit(5)
    state.put("y", 2)
    state.delete("x")
    state.prepare_commit(6)
    assert dict(store.items("count-0$prepare")) == {
        encode_key("x"): b"",
        encode_key("y"): pickle.dumps(2, protocol=pickle.HIGHEST_PROTOCOL),
    }
    assert dict(store.items("count-0$txid")) == {"commit": b"5", "prepare": b"6"}
    assert [decode_key(k) for k, _ in store.items("count-0")] == ["x"]
    state.commit(6)
    assert [decode_key(k) for k, _ in store.items("count-0")] == ["y"]
    assert list(store.items("count-0$prepare")) == []
    assert dict(store.items("count-0$txid")) == {"commit": b"6", "prepare": b"6"}
    state.put("z", 3)
    state.prepare_commit(7)
    state.rollback()
    assert list(store.items("count-0$prepare")) == []
    assert dict(store.items("count-0$txid")) == {"commit": b"6", "prepare": b"6"}


def test_a_new_instance_sees_the_committed_state_and_commits_what_was_prepared(
    provider: Provider,
) -> None:
    """A task that starts again: the committed state, minus what was not prepared; a
    COMMIT sent while recovering commits what its earlier life prepared."""
    state = KeyValueState(provider.open(), "kv")
    state.put("a", 1)
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 2)
    state.prepare_commit(2)
    state.put("a", 3)  # never prepared: lost with the task
    again = KeyValueState(provider.open(), "kv")
    assert again.get("a") == 2  # the prepared value, read as the bolt would see it
    again.commit(2)
    assert KeyValueState(provider.open(), "kv").get("a") == 2
    assert KeyValueState(provider.open(), "kv").commit_txid == 2


def test_iteration_merges_committed_prepared_and_new(provider: Provider) -> None:
    state = KeyValueState(provider.open(), "kv")
    for k in ("a", "b", "c"):
        state.put(k, k.upper())
    state.prepare_commit(1)
    state.commit(1)
    state.delete("a")
    state.put(("t", 1), "tuple key")
    state.prepare_commit(2)
    state.put("b", "new")
    assert dict(state) == {"b": "new", "c": "C", ("t", 1): "tuple key"}
    assert "a" not in state and ("t", 1) in state


def test_txids_out_of_order_are_refused(provider: Provider) -> None:
    state = KeyValueState(provider.open(), "kv")
    state.put("a", 1)
    state.prepare_commit(3)
    with pytest.raises(StateError, match="prepared changes are for txid 3"):
        state.commit(4)
    state.commit(3)
    with pytest.raises(StateError, match="txid 3 is already committed"):
        state.prepare_commit(3)


def test_another_instance_of_the_same_task_is_refused(provider: Provider) -> None:
    """Two instances of one task (a worker thought dead still running): the second to
    write finds the txids moved and is refused, naming the namespace."""
    first = KeyValueState(provider.open(), "kv")
    second = KeyValueState(provider.open(), "kv")
    first.put("a", 1)
    first.prepare_commit(1)
    second.put("a", 2)
    with pytest.raises(StateError, match=r"'kv'.*another instance"):
        second.prepare_commit(1)


def test_keys_that_cannot_be_stored_are_refused_at_put() -> None:
    state = KeyValueState(MemoryStore(), "kv")
    with pytest.raises(TypeError, match="state keys must be"):
        state.put(["a"], 1)
    with pytest.raises(TypeError, match="frozenset"):
        state.put(frozenset(), 1)
    state.put(("a", (1, None)), 1)
    assert state.get(("a", (1, None))) == 1


def test_a_value_that_cannot_be_saved_names_its_key() -> None:
    state = KeyValueState(MemoryStore(), "kv")
    state.put("lock", lambda: None)
    with pytest.raises(StateError, match="'lock'"):
        state.prepare_commit(1)


def test_the_cache_is_bounded_and_stays_true() -> None:
    """At most ``cache_entries`` committed values cached; a value read after the cache
    dropped it comes from the store, right."""
    store = MemoryStore()
    store.apply([Put("kv", encode_key(i), pickle.dumps(i)) for i in range(50)])
    state = KeyValueState(store, "kv", cache_entries=8)
    assert [state.get(i) for i in range(50)] == list(range(50))
    assert len(state._cache) <= 8
    assert [state.get(i) for i in range(50)] == list(range(50))


def test_keys_equal_in_python_but_stored_apart_answer_the_same_before_and_after_a_restart(
    provider: Provider,
) -> None:
    """2, 2.0 and True == 1 are one dict key to Python but three keys in the store (JSON
    text): the state answers as the store does, live, from its cache and after a restart
    (it answered get(2) with the value put as 2.0 until a restart, then None)."""
    state = KeyValueState(provider.open(), "kv")
    state.put(2.0, "float")
    state.put(True, "bool")
    state.put((1, 2.0), "tuple")

    def answers(s: KeyValueState) -> list[Any]:
        return [s.get(2), s.get(2.0), s.get(1), s.get(True), s.get((1, 2)), s.get((1, 2.0))]

    live = answers(state)
    assert live == [None, "float", None, "bool", None, "tuple"]
    state.prepare_commit(1)
    state.commit(1)
    assert answers(state) == live
    restarted = KeyValueState(provider.open(), "kv")
    assert answers(restarted) == live  # a miss cached for 2 does not hide 2.0
    assert answers(restarted) == live
    assert sorted(map(repr, dict(restarted))) == ["(1, 2.0)", "2.0", "True"]
    restarted.put(2, "int")
    assert restarted.delete(1) is None and restarted.get(True) == "bool"
    restarted.prepare_commit(2)
    restarted.commit(2)
    again = KeyValueState(provider.open(), "kv")
    assert [again.get(2), again.get(2.0), again.get(True)] == ["int", "float", "bool"]
    assert [type(k) for k, _ in again if k == 2] == [int, float]


def test_a_key_too_long_for_the_store_is_refused_at_put_not_at_the_checkpoint(
    provider: Provider,
) -> None:
    """Refused at PREPARE, a key too long failed the whole checkpoint (every input of
    the interval) at each replay; refused at put, only its own input fails."""
    state = KeyValueState(provider.open(), "kv")
    for key in ("x" * 5000, "\U0001f600" * 400, ("a", "y" * 4100)):
        with pytest.raises(StateError, match=r"'kv': key .* over the store's 4096"):
            state.put(key, 1)
        with pytest.raises(StateError, match="over the store's 4096"):
            state.delete(key)
    state.put("x" * 4000, 1)  # fits: stored, read back after a restart
    state.put("\U0001f600" * 341, 2)
    state.prepare_commit(1)
    state.commit(1)
    restarted = KeyValueState(provider.open(), "kv")
    assert restarted.get("x" * 4000) == 1 and restarted.get("\U0001f600" * 341) == 2


def test_the_keys_checked_at_put_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Input decides how many keys ever hold an unsaveable value: the set of keys
    checked at put starts over past its bound, and a key forgotten so is caught at its
    next PREPARE again."""
    monkeypatch.setattr("tupletree.state.kv.MAX_SUSPECT_KEYS", 3)
    state = KeyValueState(MemoryStore(), "kv")
    for round_ in range(4):
        for k in range(2):
            state.put(f"bad-{round_}-{k}", lambda: None)
        with pytest.raises(StateError, match="and 1 more keys"):
            state.prepare_commit(round_ + 1)
        state.rollback()
        assert len(state._suspect) <= 3
    assert state._suspect == {"bad-3-0", "bad-3-1"}
    state.put("bad-0-0", lambda: None)  # forgotten: taken at put, refused at PREPARE
    with pytest.raises(StateError, match="'bad-0-0'"):
        state.prepare_commit(5)


def test_after_a_value_could_not_be_saved_its_key_is_checked_at_put(provider: Provider) -> None:
    """The PREPARE that meets an unsaveable value fails (all of its interval's inputs are
    replayed); from then on a put of that key with such a value raises at once, so only
    the input that makes it fails, and the next PREPARE goes through."""
    state = KeyValueState(provider.open(), "kv")
    state.put("good", 1)
    state.put("bad", lambda: None)
    with pytest.raises(StateError, match="'bad'"):
        state.prepare_commit(1)
    state.rollback()
    state.put("good", 1)
    with pytest.raises(StateError, match=r"'kv': cannot save the value of key 'bad'"):
        state.put("bad", lambda: None)
    state.put("bad", [1])  # a value that saves is taken, and changed later as ever
    state.get("bad").append(2)
    state.prepare_commit(1)
    state.commit(1)
    restarted = KeyValueState(provider.open(), "kv")
    assert restarted.get("good") == 1 and restarted.get("bad") == [1, 2]
