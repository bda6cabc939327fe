"""NonTransactionalMap: a map state that applies every update it is given (Storm's
NonTransactionalMap). A replayed batch counts again: at-least-once at best, whatever
the spout. The backing map holds the bare values; ``begin_commit``/``commit`` do
nothing. I/O per ``multi_update``: one ``multi_get``, one ``multi_put``. A key repeated
within one call sees the value its earlier occurrence produced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import (
    IBackingMap,
    Key,
    MapState,
    StateType,
    ValueUpdater,
    as_keys,
    check_lengths,
)


class NonTransactionalMap(MapState):
    state_type = StateType.NON_TRANSACTIONAL

    def __init__(self, backing: IBackingMap) -> None:
        self._backing = backing

    @classmethod
    def build(cls, backing: IBackingMap) -> NonTransactionalMap:
        return cls(backing)

    def begin_commit(self, txid: int | None) -> None:
        pass

    def commit(self, txid: int | None) -> None:
        pass

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        ks = as_keys(keys)
        return self._backing.multi_get(ks) if ks else []

    def multi_update(
        self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]
    ) -> list[Any]:
        ks = as_keys(keys)
        check_lengths("NonTransactionalMap.multi_update", ks, updaters)
        if not ks:
            return []
        distinct = list(dict.fromkeys(ks))
        stored = self._backing.multi_get(distinct)
        current: dict[Key, Any] = dict(zip(distinct, stored, strict=True))
        out = []
        for key, updater in zip(ks, updaters, strict=True):
            current[key] = updater(current[key])
            out.append(current[key])
        self._backing.multi_put(distinct, [current[k] for k in distinct])
        return out

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any]) -> None:
        ks = as_keys(keys)
        check_lengths("NonTransactionalMap.multi_put", ks, vals)
        latest = dict(zip(ks, vals, strict=True))
        if latest:
            self._backing.multi_put(list(latest), list(latest.values()))
