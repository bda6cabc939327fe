"""The store: one durable key-value layer for Trident, stateful bolts and windows
(base.py says why it looks as it does). ``open_store(kind, config)`` opens a backend by
the names the topology config uses: ``"memory"``, ``"sqlite"``, ``"redis"``,
``"postgresql"``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tupletree.store.base import (
    Clear,
    Delete,
    Expect,
    Put,
    Store,
    StoreError,
    Write,
)
from tupletree.store.memory import MemoryStore

__all__ = [
    "BACKENDS",
    "Clear",
    "Delete",
    "Expect",
    "MemoryStore",
    "Put",
    "Store",
    "StoreError",
    "Write",
    "open_store",
]


def _memory(config: Mapping[str, Any]) -> Store:
    return MemoryStore(config.get("name"))


# kind -> (opener, the config keys it accepts). The SQLite, Redis and PostgreSQL
# backends register here as they land.
BACKENDS: dict[str, tuple[Callable[[Mapping[str, Any]], Store], frozenset[str]]] = {
    "memory": (_memory, frozenset({"name"})),
}


def open_store(kind: str, config: Mapping[str, Any] | None = None, *, what: str = "store") -> Store:
    """Open the backend ``kind`` with ``config``. ``what`` names the config key the
    values came from, for the error (e.g. ``'topology.state.provider'``): an unknown
    kind or config key is a ValueError naming it and listing what is accepted."""
    config = dict(config or {})
    if kind not in BACKENDS:
        raise ValueError(f"{what}: unknown store {kind!r}; choose one of {sorted(BACKENDS)}")
    opener, accepted = BACKENDS[kind]
    unknown = sorted(set(config) - accepted)
    if unknown:
        raise ValueError(
            f"{what}: the {kind} store takes no {unknown} (it takes {sorted(accepted)})"
        )
    return opener(config)
