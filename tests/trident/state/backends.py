"""The real backends of the durable map states, each a ``Backend``: a factory maker,
the rows as a person reads them, and a count of round trips. One that cannot be had
here skips with the reason."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tupletree import store as store_pkg
from tupletree.trident.state import StateType
from tupletree.trident.state.map_factory import MapStateFactory

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"


class CountingStore:
    """A Store whose ``get`` and ``apply`` calls are counted (the backend round trips of
    a store-backed map: one HMGET or SELECT, one MULTI/EXEC or transaction)."""

    def __init__(self, inner: Any, counts: dict[str, int]) -> None:
        self._inner, self._counts = inner, counts

    def get(self, namespace, keys):
        self._counts["get"] += 1
        return self._inner.get(namespace, keys)

    def apply(self, writes, expect=()):
        self._counts["put"] += 1
        return self._inner.apply(writes, expect)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@dataclass
class Backend:
    kind: str
    make: Callable[..., MapStateFactory]  # (state_type, **options) -> factory
    rows: Callable[[], dict[str, str]]  # key text -> value text, batch records left out
    counts: dict[str, int] = field(default_factory=lambda: {"get": 0, "put": 0})

    def factory(self, state_type: StateType, **options: Any) -> MapStateFactory:
        """A factory whose states count their round trips in ``counts``."""
        factory = self.make(state_type, **options)
        counts = self.counts
        opened = factory.open_backing

        def counting(conf, partition_index):
            backing = opened(conf, partition_index)
            if hasattr(backing, "store"):
                backing.store = CountingStore(backing.store, counts)
            else:  # PostgresTableMap: one statement per call
                execute = backing._execute

                def counted(query, params=()):
                    text = query.as_string(None) if hasattr(query, "as_string") else query
                    counts["get" if text.lstrip().startswith("SELECT") else "put"] += 1
                    return execute(query, params)

                backing._execute = counted
            return backing

        factory.open_backing = counting  # type: ignore[method-assign]
        return factory

    def calls(self) -> tuple[int, int]:
        out = (self.counts["get"], self.counts["put"])
        self.counts["get"] = self.counts["put"] = 0
        return out


def _not_record(key: str) -> bool:
    return not key.startswith('["$tupletree')


def _need_store(kind: str) -> None:
    if kind not in store_pkg.BACKENDS:
        pytest.skip(f"the {kind} store has not landed on this branch (branch 'store')")


def sqlite_backend(tmp_path) -> Iterator[Backend]:
    _need_store("sqlite")
    from tupletree.trident.state.store_map_states import SqliteMapState

    path = str(tmp_path / "state.db")
    name = f"t_{uuid.uuid4().hex[:8]}"

    def rows() -> dict[str, str]:
        with sqlite3.connect(path) as db:
            got = db.execute(
                "SELECT key, CAST(value AS TEXT) FROM tupletree_store WHERE namespace = ?",
                [name],
            ).fetchall()
        return {k: v for k, v in got if _not_record(k)}

    yield Backend("sqlite", lambda t, **o: SqliteMapState(path, name=name, state_type=t, **o), rows)


def redis_backend(tmp_path) -> Iterator[Backend]:
    _need_store("redis")
    import redis

    from tupletree.trident.state.store_map_states import RedisMapState

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {REDIS_URL} is not reachable: {exc}")
    prefix = f"test-{uuid.uuid4().hex[:8]}:"

    def rows() -> dict[str, str]:
        got = client.hgetall(prefix + "trident_map")
        return {k.decode(): v.decode() for k, v in got.items() if _not_record(k.decode())}

    yield Backend("redis", lambda t, **o: RedisMapState(REDIS_URL, prefix, state_type=t, **o), rows)
    client.delete(prefix + "trident_map")
    client.close()


def postgres_backend(tmp_path) -> Iterator[Backend]:
    psycopg = pytest.importorskip("psycopg")
    from tupletree.trident.state.postgres_map import PostgresMapState

    try:
        conn = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN} is not reachable: {exc}")
    table = f"t_{uuid.uuid4().hex[:8]}"

    def rows() -> dict[str, str]:
        got = conn.execute(f"SELECT key, value::text FROM {table}").fetchall()
        return {k: v for k, v in got if _not_record(k)}

    yield Backend(
        "postgresql", lambda t, **o: PostgresMapState(PG_DSN, table, state_type=t, **o), rows
    )
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.close()


OPENERS = {"sqlite": sqlite_backend, "redis": redis_backend, "postgresql": postgres_backend}
