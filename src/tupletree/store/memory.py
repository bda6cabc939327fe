"""The memory store: dicts in this process, for tests, LocalCluster and Storm's default
(in-memory state is lost with its worker, as in Storm).

``MemoryStore()`` is private to its instance. ``MemoryStore(name)`` shares its data with
every ``MemoryStore(name)`` of this process, for as long as the process lives: that is
how tasks of one LocalCluster, or a topology submitted again in the same process, see
what an earlier instance stored (the tests of recovery on LocalCluster use it). The
data lives until ``forget(name)``; its size is what the callers keep (see base.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from tupletree.store.base import (
    MAX_NAMESPACE_CHARS,
    Clear,
    Delete,
    Expect,
    Put,
    Store,
    Write,
    check_name,
    check_writes,
)

_Data = dict[str, dict[str, bytes]]

_shared: dict[str, tuple[threading.Lock, _Data]] = {}
_shared_lock = threading.Lock()


def forget(name: str) -> None:
    """Drop the shared memory store ``name`` (tests start from nothing this way)."""
    with _shared_lock:
        _shared.pop(name, None)


class MemoryStore(Store):
    shared_across_hosts = False

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            self._lock, self._data = threading.Lock(), {}
            self.name = "memory store"
        else:
            check_name("name", name, MAX_NAMESPACE_CHARS)
            with _shared_lock:
                self._lock, self._data = _shared.setdefault(name, (threading.Lock(), {}))
            self.name = f"memory store {name!r}"

    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        with self._lock:
            table = self._data.get(namespace, {})
            return [table.get(k) for k in keys]

    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        with self._lock:
            snapshot = sorted(self._data.get(namespace, {}).items())
        return iter(snapshot)

    def namespaces(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(ns for ns, t in self._data.items() if t and ns.startswith(prefix))

    def apply(self, writes: Sequence[Write], expect: Sequence[Expect] = ()) -> bool:
        check_writes(writes, expect)
        with self._lock:
            data = self._data
            for e in expect:
                if data.get(e.namespace, {}).get(e.key) != e.value:
                    return False
            for w in writes:
                if isinstance(w, Put):
                    data.setdefault(w.namespace, {})[w.key] = w.value
                elif isinstance(w, Delete):
                    data.get(w.namespace, {}).pop(w.key, None)
                elif isinstance(w, Clear):
                    data.pop(w.namespace, None)
            return True
