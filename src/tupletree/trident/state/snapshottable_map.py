"""SnapshottableMap: a map state that also holds one value under a fixed key, for global
(ungrouped) aggregations (Storm's SnapshottableMap): ``get``, ``update(updater)`` and
``set`` act on ``snapshot_key``; everything else goes to the map beneath, whose type and
``commit_empty_batches`` it takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import MapState, Snapshottable, ValueUpdater

#: The key global aggregations are kept under, as Storm's MemoryMapState.
GLOBAL_KEY = ("$MEMORY-MAP-STATE-GLOBAL$",)


class SnapshottableMap(MapState, Snapshottable):
    def __init__(self, delegate: MapState, snapshot_key: Sequence[Any] = GLOBAL_KEY) -> None:
        self.delegate = delegate
        self.snapshot_key = tuple(snapshot_key)
        self.state_type = delegate.state_type
        self.commit_empty_batches = getattr(delegate, "commit_empty_batches", False)

    def begin_commit(self, txid: int | None) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: int | None) -> None:
        self.delegate.commit(txid)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        return self.delegate.multi_get(keys)

    def multi_update(
        self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]
    ) -> list[Any]:
        return self.delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any]) -> None:
        self.delegate.multi_put(keys, vals)

    def get(self) -> Any:
        return self.delegate.multi_get([self.snapshot_key])[0]

    def update(self, updater: ValueUpdater) -> Any:
        return self.delegate.multi_update([self.snapshot_key], [updater])[0]

    def set(self, value: Any) -> None:
        self.delegate.multi_put([self.snapshot_key], [value])
