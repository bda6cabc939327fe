"""The backing map over tupletree.store: Storm's JSON layouts a person can read, stable
key text, pickle on request, and values or keys it cannot hold refused by name."""

from __future__ import annotations

import pytest

from tupletree.store.memory import MemoryStore
from tupletree.trident.state import (
    OpaqueValue,
    StateType,
    StoreBackingMap,
    TransactionalMap,
    ValueCodec,
)
from tupletree.trident.state.store_backing import decode_key, encode_key


def test_values_are_storms_json_layouts_under_readable_keys() -> None:
    store = MemoryStore()
    t = StoreBackingMap(store, "t", ValueCodec(StateType.TRANSACTIONAL))
    state = TransactionalMap.build(t)
    state.begin_commit(3)
    state.multi_put([("man",), ("us", 2024)], [5, {"b": 1, "a": [1]}])
    state.commit(3)
    assert dict(store.items("t")) == {
        '["man"]': b'{"txid":3,"val":5}',
        '["us",2024]': b'{"txid":3,"val":{"a":[1],"b":1}}',
    }
    o = StoreBackingMap(store, "o", ValueCodec(StateType.OPAQUE))
    o.multi_put([("k",)], [OpaqueValue(3, 6, 4)])
    assert store.get("o", ['["k"]']) == [b'{"curr":6,"currTxid":3,"prev":4}']
    assert o.multi_get([("k",), ("absent",)]) == [OpaqueValue(3, 6, 4), None]
    n = StoreBackingMap(store, "n", ValueCodec(StateType.NON_TRANSACTIONAL))
    n.multi_put([("k",)], [7])
    assert store.get("n", ['["k"]']) == [b"7"]


def test_key_text_is_stable_and_reads_back_as_the_key() -> None:
    key = ("é", 1, 2.5, None, True, ("x", 1.0), "")
    text = encode_key(key)
    # True and 1.0 are written as the int they equal: keys equal in Python are one key.
    assert text == '["é",1,2.5,null,1,["x",1],""]'
    assert decode_key(text) == key
    assert encode_key((1,)) == encode_key((1.0,)) == encode_key((True,))
    assert encode_key(({"b": 1, "a": 2},)) == '[{"a":2,"b":1}]'


@pytest.mark.parametrize("key", [(b"raw",), (float("nan"),), ({1, 2},)])
def test_a_key_json_cannot_hold_is_refused_naming_it(key) -> None:
    backing = StoreBackingMap(MemoryStore(), "n", ValueCodec(StateType.NON_TRANSACTIONAL))
    with pytest.raises(ValueError, match=r"map state key .* cannot be stored"):
        backing.multi_put([key], [1])


def test_a_value_json_cannot_hold_names_the_key_and_pickle_takes_it() -> None:
    store = MemoryStore()
    json_backing = StoreBackingMap(store, "n", ValueCodec(StateType.NON_TRANSACTIONAL))
    with pytest.raises(ValueError, match=r"key \('k',\) cannot be stored.*serializer=\"pickle\""):
        json_backing.multi_put([("ok",), ("k",)], [1, {1, 2}])
    assert list(store.items("n")) == []  # nothing of the batch went in
    pickled = StoreBackingMap(store, "p", ValueCodec(StateType.NON_TRANSACTIONAL, "pickle"))
    pickled.multi_put([("k",)], [{1, 2}])
    assert pickled.multi_get([("k",)]) == [{1, 2}]
    with pytest.raises(ValueError, match=r"unknown serializer 'yaml'; choose one of"):
        ValueCodec(StateType.OPAQUE, "yaml")
