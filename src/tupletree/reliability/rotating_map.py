"""RotatingMap: a dict whose entries expire in cohorts, Storm's timeout device.

It holds ``num_buckets`` dicts. ``put`` places a key in the newest bucket (the nursery),
removing it from any other, which restarts its countdown. ``rotate`` drops the oldest
bucket (death row), hands each of its entries to the caller, and opens a new nursery.

Bound: with rotate called every T seconds, an entry untouched since its last put is
expired after between (num_buckets - 1) * T and num_buckets * T seconds.
Cost: get/remove/put are O(num_buckets) dict operations; rotate is O(expired entries).
``touch`` is one dict operation for a key already in the nursery, as most are: an
acker's record is re-put on every message about its tree.
Pure: no clock, no threads; the owner decides when to rotate.

``dict.pop`` is not used: the compiled build has no primitive for it, and the method
call cost ~470 instructions each, more than the lookups themselves
(notes/performance.md, stop 34). A lookup with a sentinel default and a ``del`` are
primitives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Generic, TypeVar, cast

K = TypeVar("K")
V = TypeVar("V")

# What a lookup gives for an absent key: values may be anything, None included.
_MISSING: Final = object()


class RotatingMap(Generic[K, V]):
    __slots__ = ("_buckets", "_size")

    def __init__(self, num_buckets: int) -> None:
        if num_buckets < 2:
            raise ValueError(f"a RotatingMap needs at least 2 buckets, got {num_buckets}")
        # _buckets[0] is the nursery, _buckets[-1] death row.
        self._buckets: list[dict[K, V]] = [{} for _ in range(num_buckets)]
        self._size = 0  # kept, not summed: len() is on the hot path (capacity checks)

    def put(self, key: K, value: V) -> None:
        """Set ``key`` in the nursery, removing it from older buckets."""
        buckets = self._buckets
        nursery = buckets[0]
        if key not in nursery:
            for bucket in buckets[1:]:
                if key in bucket:
                    del bucket[key]
                    break
            else:
                self._size += 1
        nursery[key] = value

    def put_new(self, key: K, value: V) -> None:
        """``put`` for a key known to be absent (just removed): one dict operation."""
        self._buckets[0][key] = value
        self._size += 1

    def get(self, key: K, default: V | None = None) -> V | None:
        for bucket in self._buckets:
            value = bucket.get(key, _MISSING)
            if value is not _MISSING:
                return cast(V, value)
        return default

    def remove(self, key: K) -> V | None:
        """Remove ``key`` and return its value, or None if absent."""
        value = self._take(key)
        return None if value is _MISSING else cast(V, value)

    def touch(self, key: K) -> V | None:
        """The value of ``key``, now in the nursery (its countdown restarts, as a
        ``put`` of the same value would), or None if absent."""
        value = self._buckets[0].get(key, _MISSING)
        if value is _MISSING:
            value = self._take(key)
            if value is _MISSING:
                return None
            self.put_new(key, cast(V, value))
        return cast(V, value)

    def _take(self, key: K) -> object:
        """Remove ``key`` and return its value, or ``_MISSING`` (a stored None is a
        value: ``touch`` must put it back)."""
        for bucket in self._buckets:
            value = bucket.get(key, _MISSING)
            if value is not _MISSING:
                del bucket[key]
                self._size -= 1
                return value
        return _MISSING

    def __contains__(self, key: object) -> bool:
        return any(key in bucket for bucket in self._buckets)

    def rotate(self) -> dict[K, V]:
        """Expire death row: return its entries and open a fresh nursery."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        self._size -= len(dead)
        return dead

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[K]:
        for bucket in self._buckets:
            yield from bucket

    def __repr__(self) -> str:
        sizes = [len(b) for b in self._buckets]
        return f"RotatingMap(buckets={sizes})"


class CappedRotatingMap(RotatingMap[K, V]):
    """A RotatingMap that never holds more than ``capacity`` entries.

    Each bucket takes at most ``capacity // num_buckets`` entries: a put into a full
    nursery first rotates, dropping death row. So entries expire after
    ``num_buckets`` rotations at most, and sooner while puts arrive faster than the
    owner rotates (a storm ages the oldest cohort out early, never the newest entry).
    ``put_new``, ``put`` and ``touch`` check the cap; ``rotate`` returns the entries it
    expires, an early rotation drops them.
    """

    __slots__ = ("_per_bucket",)

    def __init__(self, num_buckets: int, capacity: int) -> None:
        if capacity < num_buckets:
            raise ValueError(
                f"a CappedRotatingMap of {num_buckets} buckets needs a capacity of at least "
                f"{num_buckets}, got {capacity}"
            )
        super().__init__(num_buckets)
        self._per_bucket = capacity // num_buckets

    def _make_room(self) -> None:
        if len(self._buckets[0]) >= self._per_bucket:
            self.rotate()

    def put_new(self, key: K, value: V) -> None:
        self._make_room()
        self._buckets[0][key] = value
        self._size += 1

    def put(self, key: K, value: V) -> None:
        if key not in self._buckets[0]:
            self.remove(key)
            self._make_room()
            self._size += 1
        self._buckets[0][key] = value

    @property
    def capacity(self) -> int:
        """The most entries held at once (``capacity`` rounded down to whole buckets)."""
        return self._per_bucket * len(self._buckets)
