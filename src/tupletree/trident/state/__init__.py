"""Trident's states: where a stream's aggregates and outputs are kept, exactly once.

Map states by what they do with a replayed txid (base.py, values.py): ``OpaqueMap``,
``TransactionalMap``, ``NonTransactionalMap``, each ``.build(backing)`` over a backing
map (``multi_get``/``multi_put``: the only I/O, once each per batch); ``CachedMap`` (an
LRU in front of a backing map); ``SnapshottableMap`` (one value under a fixed key, for
global aggregations); ``MemoryMapState`` (opaque, in this process); the durable
``SqliteMapState``, ``RedisMapState`` and ``PostgresMapState`` (factories:
``.opaque(...)``, ``.transactional(...)``, ``.non_transactional(...)``).
docs/trident-state.md has the layouts and the guarantees behind each kind of spout.
"""

from tupletree.trident.state.base import (
    IBackingMap,
    MapState,
    Snapshottable,
    State,
    StateFactory,
    StateType,
    ValueUpdater,
)
from tupletree.trident.state.cached_map import CachedMap
from tupletree.trident.state.map_factory import MapStateFactory
from tupletree.trident.state.memory import MemoryMapState
from tupletree.trident.state.non_transactional_map import NonTransactionalMap
from tupletree.trident.state.opaque_map import OpaqueMap
from tupletree.trident.state.operations import (
    BaseQueryFunction,
    BaseStateUpdater,
    CombinerValueUpdater,
    ReducerValueUpdater,
)
from tupletree.trident.state.postgres_map import PostgresMapState
from tupletree.trident.state.snapshottable_map import GLOBAL_KEY, SnapshottableMap
from tupletree.trident.state.store_backing import StoreBackingMap, ValueCodec
from tupletree.trident.state.store_map_states import RedisMapState, SqliteMapState
from tupletree.trident.state.transactional_map import TransactionalMap
from tupletree.trident.state.values import BatchBehindError, OpaqueValue, TransactionalValue

__all__ = [
    "GLOBAL_KEY",
    "BaseQueryFunction",
    "BaseStateUpdater",
    "BatchBehindError",
    "CachedMap",
    "CombinerValueUpdater",
    "IBackingMap",
    "MapState",
    "MapStateFactory",
    "MemoryMapState",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "PostgresMapState",
    "RedisMapState",
    "ReducerValueUpdater",
    "Snapshottable",
    "SnapshottableMap",
    "SqliteMapState",
    "State",
    "StateFactory",
    "StateType",
    "StoreBackingMap",
    "TransactionalMap",
    "TransactionalValue",
    "ValueCodec",
    "ValueUpdater",
]
