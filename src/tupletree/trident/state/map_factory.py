"""MapStateFactory: what every durable map state shares (Storm's RedisMapState.Factory
and friends): the layout it picks (``.opaque(...)``, ``.transactional(...)``,
``.non_transactional(...)``), the serializer, an optional cache, and the stack it
builds in each worker::

    SnapshottableMap(                      get/update/set for global aggregations
      OpaqueMap | TransactionalMap | NonTransactionalMap(
        CachedMap(                         only with cache_size > 0
          backing)))                       the subclass's: one multi_get, one multi_put

A factory holds only plain values (it is pickled to the workers); ``make_state`` opens
the connection, inside the worker. ``cache_size`` is 0 (no cache) by default, unlike
Storm's 1000: a cache is right only where this state instance is the one writer *and*
reader of its keys (Trident's colocated query), and a query from another topology or
task would answer from a stale cache.

``store_kind`` names the backend as ``tupletree.store`` does ("sqlite", "redis",
"postgresql"): a cluster whose workers may be on several hosts refuses a state that only
one host can see (``tupletree.store.require_shared``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from tupletree.trident.state.base import IBackingMap, MapState, State, StateFactory, StateType
from tupletree.trident.state.cached_map import CachedMap
from tupletree.trident.state.non_transactional_map import NonTransactionalMap
from tupletree.trident.state.opaque_map import OpaqueMap
from tupletree.trident.state.snapshottable_map import SnapshottableMap
from tupletree.trident.state.store_backing import SERIALIZERS, ValueCodec
from tupletree.trident.state.transactional_map import TransactionalMap


class MapStateFactory(StateFactory):
    store_kind: ClassVar[str]

    def __init__(
        self, state_type: StateType, *, serializer: str = "json", cache_size: int = 0
    ) -> None:
        if not isinstance(state_type, StateType):
            raise ValueError(f"{type(self).__name__}: state_type must be a StateType")
        if serializer not in SERIALIZERS:
            raise ValueError(
                f"{type(self).__name__}: unknown serializer {serializer!r}; choose one of "
                f"{sorted(SERIALIZERS)}"
            )
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 0:
            raise ValueError(
                f"{type(self).__name__}: cache_size must be an int >= 0, got {cache_size!r}"
            )
        self.state_type = state_type
        self.serializer = serializer
        self.cache_size = cache_size

    @classmethod
    def opaque(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Values ``{"currTxid", "curr", "prev"}``: exactly once behind any
        transactional or opaque spout."""
        return cls(*args, state_type=StateType.OPAQUE, **kwargs)

    @classmethod
    def transactional(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Values ``{"txid", "val"}``: exactly once behind a transactional spout."""
        return cls(*args, state_type=StateType.TRANSACTIONAL, **kwargs)

    @classmethod
    def non_transactional(cls, *args: Any, **kwargs: Any) -> MapStateFactory:
        """Bare values: a replay counts again."""
        return cls(*args, state_type=StateType.NON_TRANSACTIONAL, **kwargs)

    def codec(self) -> ValueCodec:
        return ValueCodec(self.state_type, self.serializer)

    def open_backing(self, conf: dict[str, Any], partition_index: int) -> IBackingMap:
        """The backing map of one partition, connected (in the worker)."""
        raise NotImplementedError

    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        backing = self.open_backing(conf, partition_index)
        if self.cache_size:
            backing = CachedMap(backing, self.cache_size)
        inner: MapState
        if self.state_type is StateType.OPAQUE:
            inner = OpaqueMap.build(backing, partition=partition_index, partitions=num_partitions)
        elif self.state_type is StateType.TRANSACTIONAL:
            inner = TransactionalMap.build(backing)
        else:
            inner = NonTransactionalMap.build(backing)
        return SnapshottableMap(inner)
