"""What every store backend promises (store/base.py): reads in order, atomic writes
guarded by expectations, namespaces apart, bad input refused by name."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
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
        (Put("n", "a\x00b", b"v"), "NUL"),
        (Delete("n\x00", "k"), "NUL"),
        (Put("n", "\udc80", b"v"), "not valid Unicode"),
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


def test_items_come_in_code_point_order(store: Store) -> None:
    """The same order on every backend, whatever a database's locale: Python's str order
    (upper case before lower, ASCII before the rest)."""
    keys = ["b", "B", "a", "é", "Z", "aa", "a-", "ü", "中", "😀"]
    store.apply([Put("o", k, k.encode()) for k in keys])
    assert [k for k, _ in store.items("o")] == sorted(keys)
    store.apply([Put(ns, "k", b"") for ns in ["o-b", "o-B", "o-é", "o-a"]])
    assert store.namespaces("o-") == sorted(["o-b", "o-B", "o-é", "o-a"])


def test_names_with_glob_or_sql_characters_are_plain_text(store: Store) -> None:
    """A prefix is a prefix: '*', '%', '_', '[' match only themselves."""
    names = ["w*", "w*x", "w%", "w_1", "w[a]", "wx", "w\\"]
    store.apply([Put(ns, "k'; --", ns.encode()) for ns in names])
    assert store.namespaces("w*") == ["w*", "w*x"]
    assert store.namespaces("w%") == ["w%"]
    assert store.namespaces("w_") == ["w_1"]
    assert store.namespaces("w[") == ["w[a]"]
    assert store.get("w_1", ["k'; --"]) == [b"w_1"]


def test_empty_apply_and_expectations_alone(store: Store) -> None:
    """No writes: True; expectations alone answer whether they hold, writing nothing."""
    assert store.apply([]) is True
    store.apply([Put("e", "k", b"1")])
    assert store.apply([], expect=[Expect("e", "k", b"1")]) is True
    assert store.apply([], expect=[Expect("e", "k", b"2")]) is False
    assert store.apply([], expect=[Expect("e", "gone", None)]) is True
    assert list(store.items("e")) == [("k", b"1")]


def test_large_multi_get_and_values(store: Store) -> None:
    """Beyond SQLite's 999 bound variables; a 1 MB value comes back whole."""
    keys = [f"k{i:05}" for i in range(1200)]
    store.apply([Put("big", k, k.encode()) for k in keys] + [Put("big", "blob", bytes(2**20))])
    got = store.get("big", [*keys, "absent"])
    assert got[:-1] == [k.encode() for k in keys] and got[-1] is None
    assert store.get("big", ["blob"]) == [bytes(2**20)]


# Examples per backend: the networked ones cost a round trip per call.
_EXAMPLES = {"memory": 60, "sqlite": 25, "redis": 15, "postgresql": 15}

_names = st.sampled_from(["n1", "n2"])
_keys = st.text(alphabet="abc$-:", min_size=1, max_size=3)
_ops = st.lists(
    st.one_of(
        st.builds(Put, _names, _keys, st.binary(max_size=3)),
        st.builds(Delete, _names, _keys),
        st.builds(Clear, _names),
    ),
    max_size=8,
)
# An expectation's value: absent, or a few bytes (often what a Put of _ops left there).
_expects = st.lists(
    st.builds(Expect, _names, _keys, st.one_of(st.none(), st.binary(max_size=3))), max_size=2
)


def test_any_sequence_of_writes_reads_back_like_a_dict_model(
    store: Store, request: pytest.FixtureRequest
) -> None:
    """Every backend against a model, a dict of dicts updated write by write; a batch
    applies only when each of its expectations matches the model, and then wholly."""
    backend = request.node.callspec.params["store"]

    @settings(
        max_examples=_EXAMPLES[backend],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(batches=st.lists(st.tuples(_ops, _expects), max_size=6))
    def run(batches) -> None:
        store.apply([Clear("n1"), Clear("n2")])
        model: dict[str, dict[str, bytes]] = {"n1": {}, "n2": {}}
        for writes, expect in batches:
            holds = all(model[e.namespace].get(e.key) == e.value for e in expect)
            assert store.apply(writes, expect=expect) is holds
            for w in writes if holds else ():
                if isinstance(w, Put):
                    model[w.namespace][w.key] = w.value
                elif isinstance(w, Delete):
                    model[w.namespace].pop(w.key, None)
                else:
                    model[w.namespace].clear()
        for ns, table in model.items():
            assert dict(store.items(ns)) == table
            assert store.get(ns, sorted(table)) == [table[k] for k in sorted(table)]
        assert store.namespaces("n") == [ns for ns in ("n1", "n2") if model[ns]]

    run()
