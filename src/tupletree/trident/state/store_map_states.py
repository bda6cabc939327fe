"""Durable map states over ``tupletree.store``: ``SqliteMapState`` and
``RedisMapState`` (factories; ``.opaque(...)``, ``.transactional(...)``,
``.non_transactional(...)`` pick the layout, map_factory.py).

Where the values are (store_backing.py has the key and value encodings):

- SQLite: the store's table ``tupletree_store`` in the file ``path``, the rows whose
  ``namespace`` is ``name``: ``SELECT key, CAST(value AS TEXT) FROM tupletree_store
  WHERE namespace = 'trident_map'``.
- Redis: the hash ``<key_prefix><name>`` (``HGETALL tupletree:trident_map``), one field
  per key.

Each partition reads its batch's keys in one ``get`` and writes them in one atomic
``apply`` (an SQLite transaction, a Redis MULTI/EXEC). Every partition of a state
shares the namespace (a key belongs to one partition, by the grouping). Two states in
one store need two names.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from tupletree.store import open_store
from tupletree.trident.state.base import IBackingMap, StateType
from tupletree.trident.state.map_factory import MapStateFactory
from tupletree.trident.state.store_backing import StoreBackingMap

DEFAULT_NAME = "trident_map"


class SqliteMapState(MapStateFactory):
    """A map state in an SQLite file: workers on one host only (``store_kind``)."""

    store_kind: ClassVar[str] = "sqlite"
    shared_across_hosts = False

    def __init__(
        self,
        path: str,
        *,
        name: str = DEFAULT_NAME,
        state_type: StateType = StateType.OPAQUE,
        serializer: str = "json",
        cache_size: int = 0,
    ) -> None:
        super().__init__(state_type, serializer=serializer, cache_size=cache_size)
        self.path, self.name = str(path), name

    def location(self) -> tuple[Any, ...]:
        return ("SQLite file", os.path.abspath(self.path), "name", self.name)

    def __repr__(self) -> str:
        return f"SqliteMapState({self.path!r}, name={self.name!r}, {self.state_type.value})"

    def open_backing(self, conf: dict[str, Any], partition_index: int) -> IBackingMap:
        store = open_store("sqlite", {"path": self.path}, what=repr(self))
        return StoreBackingMap(store, self.name, self.codec())


class RedisMapState(MapStateFactory):
    """A map state in one Redis hash, ``<key_prefix><name>``."""

    store_kind: ClassVar[str] = "redis"

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        key_prefix: str = "tupletree:",
        *,
        name: str = DEFAULT_NAME,
        state_type: StateType = StateType.OPAQUE,
        serializer: str = "json",
        cache_size: int = 0,
    ) -> None:
        super().__init__(state_type, serializer=serializer, cache_size=cache_size)
        self.url, self.key_prefix, self.name = url, key_prefix, name

    def location(self) -> tuple[Any, ...]:
        return ("Redis", self.url, "key prefix", self.key_prefix, "name", self.name)

    def __repr__(self) -> str:
        return f"RedisMapState(hash {self.key_prefix + self.name!r}, {self.state_type.value})"

    def open_backing(self, conf: dict[str, Any], partition_index: int) -> IBackingMap:
        store = open_store("redis", {"url": self.url, "prefix": self.key_prefix}, what=repr(self))
        return StoreBackingMap(store, self.name, self.codec())
