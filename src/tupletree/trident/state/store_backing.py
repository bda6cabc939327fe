"""StoreBackingMap: a backing map over a namespace of ``tupletree.store``, and the value
layouts the durable map states write.

- Keys: the key tuple as JSON text of its list (``["man"]``, ``["us", 2024]``), with
  dict members sorted and True or an integral float written as the int it equals
  (keys equal in Python are one key), so one key always encodes the same way and a
  person can read it.
  A key that JSON cannot hold (bytes, a set, an object) is refused, naming it.
- Values: Storm's layouts, by state type: transactional ``{"txid": 3, "val": 5}``,
  opaque ``{"currTxid": 3, "curr": 6, "prev": 4}``, non-transactional the bare value;
  encoded as JSON (``serializer="json"``, the default: readable in the backend, but a
  tuple comes back as a list) or pickle (``serializer="pickle"``: any Python value,
  types kept; read back only from the topology's own store, see store/codec.py).

I/O: one ``Store.get`` per ``multi_get``, one atomic ``Store.apply`` per ``multi_put``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tupletree.store import Put, Store
from tupletree.store.codec import dumps_json, dumps_pickle, loads_json, loads_pickle
from tupletree.trident.state.base import Key, StateType
from tupletree.trident.state.opaque_map import BATCH_RECORD, freeze
from tupletree.trident.state.values import OpaqueValue, TransactionalValue

SERIALIZERS: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
    "json": (dumps_json, loads_json),
    "pickle": (dumps_pickle, loads_pickle),
}


# One encoder for every key: json.dumps with options builds a new one per call
# (timeit, min of 5 x 20,000, ('word-123',): 3.5 -> 2.6 us per key).
_KEYS = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, sort_keys=True
).encode


def _canonical(value: Any) -> Any:
    """``value`` as the one representative of the values equal to it that JSON would
    otherwise write apart: True and 1.0 as 1 (Python's equality, which the grouping
    and every dict of a batch go by: 1, 1.0 and True are one group, so they must be one
    stored key too), recursively in tuples and lists."""
    cls = type(value)
    if cls is str or cls is int or value is None:
        return value
    if cls is bool:
        return int(value)
    if cls is float:
        return int(value) if value.is_integer() else value
    if cls is tuple or cls is list:
        return [_canonical(v) for v in value]
    return value


def encode_key(key: Key) -> str:
    """The stable text of a key tuple (equal keys alike: ``(1,)``, ``(1.0,)`` and
    ``(True,)`` are ``[1]``); ValueError naming a key JSON cannot hold."""
    try:
        return _KEYS([_canonical(v) for v in key])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"map state key {key!r} cannot be stored: {exc}") from None


def decode_key(text: str) -> Key:
    return freeze(json.loads(text))


def _layout_of(state_type: StateType) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    if state_type is StateType.OPAQUE:
        return OpaqueValue.to_layout, OpaqueValue.from_layout
    if state_type is StateType.TRANSACTIONAL:
        return TransactionalValue.to_layout, TransactionalValue.from_layout
    return (lambda v: v), (lambda v: v)


class ValueCodec:
    """Bytes <-> the stored value objects of one state type and serializer."""

    __slots__ = ("_dump", "_from", "_load", "_to", "serializer", "state_type")

    def __init__(self, state_type: StateType, serializer: str = "json") -> None:
        if serializer not in SERIALIZERS:
            raise ValueError(
                f"unknown serializer {serializer!r}; choose one of {sorted(SERIALIZERS)}"
            )
        self.state_type, self.serializer = state_type, serializer
        self._dump, self._load = SERIALIZERS[serializer]
        self._to, self._from = _layout_of(state_type)

    def encode(self, key: Key, value: Any) -> bytes:
        try:
            return self._dump(self._to(value))
        except (TypeError, ValueError) as exc:
            hint = ' (serializer="pickle" stores any Python value)'
            raise ValueError(
                f"the value of map state key {key!r} cannot be stored: {exc}"
                f"{hint if self.serializer == 'json' else ''}"
            ) from None

    def decode(self, data: bytes) -> Any:
        return self._from(self._load(data))


class StoreBackingMap:
    """A backing map kept in ``namespace`` of ``store`` (keys and values as above)."""

    def __init__(self, store: Store, namespace: str, codec: ValueCodec) -> None:
        self.store, self.namespace, self.codec = store, namespace, codec

    def __repr__(self) -> str:
        return f"StoreBackingMap({self.store.name}, {self.namespace!r})"

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        raw = self.store.get(self.namespace, [encode_key(k) for k in keys])
        decode = self.codec.decode
        return [None if b is None else decode(b) for b in raw]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        ns, encode = self.namespace, self.codec.encode
        self.store.apply(
            [Put(ns, encode_key(k), encode(k, v)) for k, v in zip(keys, vals, strict=True)]
        )

    def items(self) -> Iterator[tuple[Key, Any]]:
        """Every (key, stored value) but the opaque maps' batch records, in key order."""
        for text, data in self.store.items(self.namespace):
            key = decode_key(text)
            if key and key[0] == BATCH_RECORD:
                continue
            yield key, self.codec.decode(data)
