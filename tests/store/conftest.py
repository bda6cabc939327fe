"""Fixtures that run each store test on every backend that can be had here (a backend
whose server is down skips, with the reason):

- ``store``: an open store, on each backend (OPENERS);
- ``durable``: a ``Location`` on each durable backend (SQLite, Redis, PostgreSQL), from
  which a test opens as many stores as it likes (two "processes" on one file or server).

Every test gets data of its own (a temporary file, a unique Redis key prefix, a unique
PostgreSQL table), removed afterwards, so tests never see each other's data. The servers
are this machine's (HELPERS.md): Redis at TUPLETREE_TEST_REDIS (redis://127.0.0.1:6379/0),
PostgreSQL at TUPLETREE_TEST_PG (postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest

from tupletree.store import Store, StoreError, open_store
from tupletree.store.memory import MemoryStore, forget

REDIS_URL = os.environ.get("TUPLETREE_TEST_REDIS", "redis://127.0.0.1:6379/0")
PG_DSN = os.environ.get("TUPLETREE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Location:
    """Where a test's data lives on one backend: ``open()`` a store there, any number of
    times (each its own connection, as each task's would be)."""

    kind: str
    config: dict[str, Any]
    opened: list[Store] = field(default_factory=list)

    def open(self) -> Store:
        store = open_store(self.kind, self.config)
        self.opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


@cache
def redis_down() -> str | None:
    """Why Redis cannot be had here, or None (asked once per run)."""
    try:
        open_store("redis", {"url": REDIS_URL}).close()
    except ImportError as exc:
        return str(exc)
    except StoreError as exc:
        return f"no Redis server ({exc}); .ci/run starts one"
    return None


@cache
def postgres_down() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'tupletree[postgresql]')"
    try:
        with psycopg.connect(PG_DSN, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {PG_DSN} ({exc}); .ci/run starts one"
    return None


def _sqlite(request: pytest.FixtureRequest) -> Iterator[Location]:
    path = request.getfixturevalue("tmp_path") / "store.db"
    yield Location("sqlite", {"path": str(path)})  # tmp_path goes with pytest's cleanup


def _redis(request: pytest.FixtureRequest) -> Iterator[Location]:
    reason = redis_down()
    if reason:
        pytest.skip(reason)
    import redis

    prefix = f"tt-test-{uuid.uuid4().hex[:12]}:"
    yield Location("redis", {"url": REDIS_URL, "prefix": prefix})
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def _postgresql(request: pytest.FixtureRequest) -> Iterator[Location]:
    reason = postgres_down()
    if reason:
        pytest.skip(reason)
    import psycopg

    prefix = f"t{uuid.uuid4().hex[:12]}_"
    yield Location("postgresql", {"dsn": PG_DSN, "prefix": prefix})
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{prefix}tupletree_store"')


LOCATIONS: dict[str, Callable[[pytest.FixtureRequest], Iterator[Location]]] = {
    "sqlite": _sqlite,
    "redis": _redis,
    "postgresql": _postgresql,
}


def _memory(request: pytest.FixtureRequest) -> Iterator[Store]:
    name = f"test-{uuid.uuid4().hex}"
    yield MemoryStore(name)
    forget(name)


def _at(location: Callable[[pytest.FixtureRequest], Iterator[Location]]):
    def opener(request: pytest.FixtureRequest) -> Iterator[Store]:
        for loc in location(request):  # the location's cleanup runs after the store's
            yield loc.open()

    return opener


# backend -> a generator of an open store
OPENERS: dict[str, Callable[[pytest.FixtureRequest], Iterator[Store]]] = {
    "memory": _memory,
    **{kind: _at(location) for kind, location in LOCATIONS.items()},
}


@pytest.fixture(params=sorted(OPENERS))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    opened = OPENERS[request.param](request)
    s = next(opened)
    try:
        yield s
    finally:
        s.close()
        next(opened, None)


@pytest.fixture(params=sorted(LOCATIONS))
def durable(request: pytest.FixtureRequest) -> Iterator[Location]:
    made = LOCATIONS[request.param](request)
    loc = next(made)
    try:
        yield loc
    finally:
        loc.close_all()
        next(made, None)
