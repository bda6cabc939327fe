"""CachedMap: an LRU cache of decoded values in front of a backing map (Storm's
CachedMap), itself a backing map: the usual stack is ``OpaqueMap`` over ``CachedMap``
over a database.

``multi_get`` asks the backing only for the keys it does not hold (no call when it holds
them all); ``multi_put`` writes through, and caches the values only once the backing
took them (Storm caches first: a failed write then left values in the cache that the
database never got, and a transactional replay skipped them as applied).

Correct only while this task is the only writer of its keys, which Trident's
partitioning gives the updating side; a query state that is not the updating state's
own instance may answer from a stale cache. Bound: ``cache_size`` keys (>= 1); cost
O(1) per key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import IBackingMap, Key


class CachedMap:
    def __init__(self, backing: IBackingMap, cache_size: int = 1000) -> None:
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
            raise ValueError(f"CachedMap cache_size must be an int >= 1, got {cache_size!r}")
        self.backing = backing
        self.cache_size = cache_size
        self._cache: OrderedDict[Key, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def _remember(self, key: Key, value: Any) -> None:
        cache = self._cache
        cache[key] = value
        cache.move_to_end(key)
        if len(cache) > self.cache_size:
            cache.popitem(last=False)

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        cache = self._cache
        found: dict[Key, Any] = {}
        for key in keys:
            if key in cache:
                cache.move_to_end(key)
                found[key] = cache[key]
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing:
            for key, value in zip(missing, self.backing.multi_get(missing), strict=True):
                found[key] = value
                self._remember(key, value)
        return [found[k] for k in keys]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        try:
            self.backing.multi_put(keys, vals)
        except BaseException:
            for key in keys:  # the backing may hold either value now: ask it next time
                self._cache.pop(key, None)
            raise
        for key, value in zip(keys, vals, strict=True):
            self._remember(key, value)
