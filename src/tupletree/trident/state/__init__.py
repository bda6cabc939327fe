"""Trident's states: where a stream's aggregates and outputs are kept, exactly once.

Map states by what they do with a replayed txid (base.py, values.py): ``OpaqueMap``,
``TransactionalMap``, ``NonTransactionalMap``, each ``.build(backing)`` over a backing
map (``multi_get``/``multi_put``: the only I/O, once each per batch); ``CachedMap`` (an
LRU in front of a backing map); ``SnapshottableMap`` (one value under a fixed key, for
global aggregations); ``MemoryMapState`` (opaque, in this process). Durable map states
and exactly-once sinks come in their own modules. docs/trident-state.md has the layouts
and the guarantees behind each kind of spout.
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
from tupletree.trident.state.memory import MemoryMapState
from tupletree.trident.state.non_transactional_map import NonTransactionalMap
from tupletree.trident.state.opaque_map import OpaqueMap
from tupletree.trident.state.operations import (
    BaseQueryFunction,
    BaseStateUpdater,
    CombinerValueUpdater,
    ReducerValueUpdater,
)
from tupletree.trident.state.snapshottable_map import GLOBAL_KEY, SnapshottableMap
from tupletree.trident.state.store_backing import StoreBackingMap, ValueCodec
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
    "MemoryMapState",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "ReducerValueUpdater",
    "Snapshottable",
    "SnapshottableMap",
    "State",
    "StateFactory",
    "StateType",
    "StoreBackingMap",
    "TransactionalMap",
    "TransactionalValue",
    "ValueCodec",
    "ValueUpdater",
]
