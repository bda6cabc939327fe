"""TickExpiry: per-request state that expires a message timeout after it was created.

CoordinatedBolt and JoinResult keep state per request id; a request whose tuples never
all arrive (a failed or lost tuple, a task that never gets the id tuple) must not keep
it forever. Storm uses a TimeCacheMap with its own cleaner thread; here expiry is driven
by the bolt's tick tuples, so it runs on the task's own thread (no locks) and follows
simulated time in tests.

Each tick advances the map's clock by the tick's frequency; an entry expires once it
is ``timeout_secs`` old (at the first tick at or after that), whatever happened to it
meanwhile: a request is over after the message timeout, answered or not.
Cost: put/get/pop are dict operations; ``tick`` is O(entries it expires) plus the
stale queue entries of keys already removed (each queued once per put).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class TickExpiry(Generic[V]):
    __slots__ = ("_births", "_entries", "now", "timeout_secs")

    def __init__(self, timeout_secs: float) -> None:
        self.timeout_secs = float(timeout_secs)
        self.now = 0.0
        self._entries: dict[Any, tuple[V, float]] = {}
        self._births: deque[tuple[float, Any]] = deque()

    def put(self, key: Any, value: V) -> None:
        """Add ``key`` (born now). Replacing a key restarts its countdown."""
        self._entries[key] = (value, self.now)
        self._births.append((self.now, key))

    def get(self, key: Any) -> V | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def pop(self, key: Any) -> V | None:
        entry = self._entries.pop(key, None)
        return None if entry is None else entry[0]

    def tick(self, secs: float) -> list[tuple[Any, V]]:
        """Advance the clock by ``secs``; remove and return the entries now expired."""
        self.now += secs
        limit = self.now - self.timeout_secs
        births, entries = self._births, self._entries
        expired = []
        while births and births[0][0] <= limit:
            born, key = births.popleft()
            entry = entries.get(key)
            if entry is not None and entry[1] == born:
                del entries[key]
                expired.append((key, entry[0]))
        return expired

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
