"""The store: one durable key-value layer for Trident, stateful bolts and windows
(base.py says why it looks as it does). ``open_store(kind, config)`` opens a backend by
the names the topology config uses: ``"memory"``, ``"sqlite"`` (``{"path", "prefix"}``),
``"redis"`` (``{"url", "prefix"}``), ``"postgresql"`` (``{"dsn", "prefix"}``); one
module each. ``require_shared(kind, master)`` refuses a store only one host can see on
a master that may run workers on several (hosts.py). docs/state-backends.md is the
user's page: guarantees and layouts."""

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
from tupletree.store.hosts import is_one_host, require_shared
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
    "check_store_config",
    "is_one_host",
    "open_store",
    "require_shared",
]


def _memory(config: Mapping[str, Any]) -> Store:
    return MemoryStore(config.get("name"))


# The other backends are imported when opened: `import tupletree.store` needs neither
# redis-py nor psycopg (the latter is the optional extra `postgresql`).
def _sqlite(config: Mapping[str, Any]) -> Store:
    from tupletree.store.sqlite import open_sqlite

    return open_sqlite(config)


def _redis(config: Mapping[str, Any]) -> Store:
    from tupletree.store.redis import open_redis

    return open_redis(config)


def _postgresql(config: Mapping[str, Any]) -> Store:
    from tupletree.store.postgres import open_postgres

    return open_postgres(config)


# kind -> the config keys it cannot open without
REQUIRED: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"path"}),
    "postgresql": frozenset({"dsn"}),
}

# kind -> (opener, the config keys it accepts)
BACKENDS: dict[str, tuple[Callable[[Mapping[str, Any]], Store], frozenset[str]]] = {
    "memory": (_memory, frozenset({"name"})),
    "sqlite": (_sqlite, frozenset({"path", "prefix"})),
    "redis": (_redis, frozenset({"url", "prefix"})),
    "postgresql": (_postgresql, frozenset({"dsn", "prefix"})),
}


def open_store(kind: str, config: Mapping[str, Any] | None = None, *, what: str = "store") -> Store:
    """Open the backend ``kind`` with ``config``. ``what`` names the config key the
    values came from, for the error (e.g. ``'topology.state.provider'``): an unknown
    kind or config key is a ValueError naming it and listing what is accepted."""
    config = dict(config or {})
    check_store_config(kind, config, what=what)
    return BACKENDS[kind][0](config)


def check_store_config(
    kind: str, config: Mapping[str, Any] | None = None, *, what: str = "store"
) -> None:
    """What ``open_store`` would refuse before it connects (an unknown kind, a config
    key the backend does not take, one it needs and is not given), as a ValueError
    naming it: for checks at submit, where no store should be opened yet."""
    config = config or {}
    if kind not in BACKENDS:
        raise ValueError(f"{what}: unknown store {kind!r}; choose one of {sorted(BACKENDS)}")
    accepted = BACKENDS[kind][1]
    unknown = sorted(set(config) - accepted)
    if unknown:
        raise ValueError(
            f"{what}: the {kind} store takes no {unknown} (it takes {sorted(accepted)})"
        )
    missing = sorted(REQUIRED.get(kind, frozenset()) - set(config))
    if missing:
        needs = " and ".join(repr(key) for key in missing)
        raise ValueError(f"{what}: the {kind} store's config needs {needs}")
