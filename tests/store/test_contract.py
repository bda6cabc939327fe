"""What every store backend promises (store/base.py): reads in order, atomic writes
guarded by expectations, namespaces apart, bad input refused by name."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.store import Clear, Delete, Expect, Put, Store, open_store


def test_get_returns_values_in_key_order_with_none_for_absent_keys(store: Store) -> None:
    """A multi-get answers key by key, in the order asked."""
    assert store.apply([Put("ns", "b", b"2"), Put("ns", "a", b"1")])
    assert store.get("ns", ["a", "missing", "b", "a"]) == [b"1", None, b"2", b"1"]


def test_namespaces_are_apart(store: Store) -> None:
    """The same key in two namespaces holds two values; clearing one leaves the other."""
    store.apply([Put("x", "k", b"x"), Put("y", "k", b"y")])
    store.apply([Clear("x")])
    assert store.get("x", ["k"]) == [None]
    assert store.get("y", ["k"]) == [b"y"]
    assert list(store.items("y")) == [("k", b"y")]


def test_items_are_sorted_and_namespaces_listed_by_prefix(store: Store) -> None:
    store.apply([Put("s-2", "b", b""), Put("s-2", "a", b"1"), Put("s-1", "z", b"")])
    store.apply([Put("other", "k", b"v"), Put("s-3", "k", b"v"), Delete("s-3", "k")])
    assert list(store.items("s-2")) == [("a", b"1"), ("b", b"")]
    assert store.namespaces("s-") == ["s-1", "s-2"]


def test_a_failed_expectation_writes_nothing(store: Store) -> None:
    """Compare-and-set: writes go in only when every expectation holds."""
    store.apply([Put("p", "currtx", b"3")])
    moved = store.apply(
        [Put("p", "currtx", b"5"), Put("p", "other", b"x")], expect=[Expect("p", "currtx", b"4")]
    )
    assert moved is False
    assert store.get("p", ["currtx", "other"]) == [b"3", None]
    assert store.apply([Put("p", "currtx", b"4")], expect=[Expect("p", "currtx", b"3")])
    assert store.apply([Put("p", "new", b"1")], expect=[Expect("p", "new", None)])
    assert not store.apply([Put("p", "new", b"2")], expect=[Expect("p", "new", None)])
    assert store.get("p", ["currtx", "new"]) == [b"4", b"1"]


def test_writes_apply_in_order(store: Store) -> None:
    """A Put after a Clear of its namespace survives; a Delete after a Put removes it."""
    store.apply([Put("n", "a", b"1"), Put("n", "b", b"1")])
    store.apply([Clear("n"), Put("n", "a", b"2"), Put("n", "c", b"3"), Delete("n", "c")])
    assert list(store.items("n")) == [("a", b"2")]


@pytest.mark.parametrize(
    ("write", "named"),
    [
        (Put("", "k", b"v"), "namespace"),
        (Put("n", "", b"v"), "key"),
        (Put("n", "k", "text"), "'n'/'k'"),
        (Put("n", "k" * 5000, b"v"), "5000 characters"),
        ("not a write", "Put, Delete or Clear"),
    ],
)
def test_bad_writes_are_refused_naming_what_is_wrong(store: Store, write, named) -> None:
    """Nothing is written when one write of the batch is malformed."""
    with pytest.raises(ValueError, match=named):
        store.apply([Put("n", "ok", b"1"), write])
    assert store.get("n", ["ok"]) == [None]


def test_open_store_names_an_unknown_kind_or_key() -> None:
    with pytest.raises(ValueError, match=r"topology.state.provider: unknown store 'mongo'"):
        open_store("mongo", {}, what="topology.state.provider")
    with pytest.raises(ValueError, match=r"takes no \['path'\]"):
        open_store("memory", {"path": "x.db"})


_keys = st.text(alphabet="abc$-:", min_size=1, max_size=3)
_ops = st.lists(
    st.one_of(
        st.builds(Put, st.sampled_from(["n1", "n2"]), _keys, st.binary(max_size=3)),
        st.builds(Delete, st.sampled_from(["n1", "n2"]), _keys),
        st.builds(Clear, st.sampled_from(["n1", "n2"])),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(_ops, max_size=6))
def test_any_sequence_of_writes_reads_back_like_a_dict_model(batches) -> None:
    """The memory store against a model: a dict of dicts updated write by write."""
    from tupletree.store.memory import MemoryStore

    store, model = MemoryStore(), {"n1": {}, "n2": {}}
    for batch in batches:
        store.apply(batch)
        for w in batch:
            if isinstance(w, Put):
                model[w.namespace][w.key] = w.value
            elif isinstance(w, Delete):
                model[w.namespace].pop(w.key, None)
            else:
                model[w.namespace].clear()
    for ns, table in model.items():
        assert dict(store.items(ns)) == table
