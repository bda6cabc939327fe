"""MemoryMapState: an opaque map state held in this process (Storm's testing
MemoryMapState), for tests and LocalCluster.

Each ``MemoryMapState.Factory()`` gets a random id; its partitions keep one map in the
shared memory store ``trident-memory-map/<id>`` (store/memory.py), as a durable map's
partitions share one table, so every state the factory makes in this process sees the
same map: the DRPC query side of ``state_query``, a task restarted in the same process,
and a topology submitted again with another parallelism (whose keys move to other
partitions) find what the updating side wrote. Across processes (workers of a
SparkCluster) nothing is shared, and nothing survives the process. Values are pickled
(types kept, and a caller can never change a stored value by changing what it read).

It is an opaque ``SnapshottableMap`` (``get``/``update``/``set`` on the global key for
ungrouped aggregations) over an ``OpaqueMap`` with the batch record (opaque_map.py).
Bound: every key ever written, until ``Factory.forget()``: a memory state is for data
that fits in memory, as Storm's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from tupletree.store.memory import MemoryStore, forget
from tupletree.trident.state.base import State, StateFactory, StateType
from tupletree.trident.state.opaque_map import OpaqueMap
from tupletree.trident.state.snapshottable_map import GLOBAL_KEY, SnapshottableMap
from tupletree.trident.state.store_backing import StoreBackingMap, ValueCodec

_PREFIX = "trident-memory-map/"


class MemoryMapState(SnapshottableMap):
    state_type = StateType.OPAQUE

    def __init__(self, id: str, partition: int = 0, partitions: int = 1) -> None:
        self.backing = StoreBackingMap(
            MemoryStore(_PREFIX + id), "map", ValueCodec(StateType.OPAQUE, "pickle")
        )
        inner = OpaqueMap.build(self.backing, partition=partition, partitions=partitions)
        super().__init__(inner, GLOBAL_KEY)

    def get_tuples(self) -> Iterator[list[Any]]:
        """Each key's values followed by its current value (Storm's ITupleCollection)."""
        for key, value in self.backing.items():
            yield [*key, value.curr]

    class Factory(StateFactory):
        """Makes the partitions of one memory map. ``name`` (default: random) lets a
        later factory in the same process open the same map."""

        state_type = StateType.OPAQUE
        shared_across_hosts = False

        def __init__(self, name: str | None = None) -> None:
            self.id = name if name is not None else uuid.uuid4().hex

        def location(self) -> tuple[Any, ...]:
            return ("memory map", self.id)

        def make_state(
            self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
        ) -> State:
            return MemoryMapState(self.id, partition_index, num_partitions)

        def forget(self, num_partitions: int | None = None) -> None:
            """Drop the map from this process (``num_partitions``: unused, kept for
            callers of the map per partition it was)."""
            forget(_PREFIX + self.id)
