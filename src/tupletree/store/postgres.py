"""The PostgreSQL store (psycopg 3): one database, seen by every host
(``shared_across_hosts``). Needs the extra: ``pip install 'tupletree[postgresql]'``.

Config ``{"dsn": "postgresql://user@host:5432/db", "prefix": ""}``: a libpq connection
string (URL or ``key=value``; ``""`` takes libpq's ``PG*`` environment variables) and a
prefix for the table's name. Layout (sql.py): one table ``<prefix>tupletree_store``
(namespace text, key text, value bytea, primary key (namespace, key)), created when
missing. Its text columns use the "C" collation, so ``items`` come in the code-point
order every backend uses, whatever the database's locale.

Rules:

- ``apply`` is one SERIALIZABLE transaction: it reads the expectations, writes, commits.
  Not ``SELECT ... FOR UPDATE`` under READ COMMITTED: that locks rows that exist, and
  ``Expect(ns, key, None)`` ("absent": Trident's first txid, a first checkpoint) is
  about a row that does not, so two appliers could both see it absent and both write.
  SERIALIZABLE covers absent rows too (predicate locks on the primary key's index): of
  two conflicting transactions PostgreSQL aborts one with a serialization failure, and
  ``apply`` runs it again from the start (reading the expectations again), up to
  ``MAX_ATTEMPTS`` times. When an expectation does not hold it still commits (nothing
  written) before returning False: PostgreSQL vouches for a serializable read only once
  its transaction commits.
- Rows are upserted in (namespace, key) order, so concurrent appliers lock them in one
  order and do not deadlock one another.
- Reads (``get``, ``items``, ``namespaces``) are single statements: each sees one
  snapshot.
- A dropped connection is opened again by the next call (an ``apply`` whose connection
  died before its COMMIT was sent runs once more on a new one: the server rolled the
  first back). A connection lost during the commit leaves it unknown whether it
  applied: the StoreError says so.
- A killed process leaves no partial ``apply``: the server rolls back a transaction
  whose client went away.

Cost: a 100-key ``get`` is one query (``key = ANY(array)``); a 100-key ``apply`` a few
statements (expectations, one per run of writes of one kind, commit), each a round trip
(figures in notes/performance.md).
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from tupletree.extras import missing
from tupletree.redact import scrub, secrets

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict
except ImportError as exc:  # the extra is optional
    raise missing(
        "psycopg", "postgresql", "the postgresql store (tupletree.store.postgres)"
    ) from exc

from tupletree.store.base import (
    Clear,
    Delete,
    Expect,
    Put,
    Store,
    StoreError,
    Write,
    check_writes,
    runs,
)
from tupletree.store.sql import cleared, deleted_keys, puts_last_wins, table_name

CONNECT_TIMEOUT_SECS = 5
MAX_ATTEMPTS = 50
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_T = TypeVar("_T")


def describe(info: Mapping[str, Any]) -> str:
    """``user@host:port/dbname`` from parsed connection parameters, without the
    password (the parts libpq would take from its defaults are left out)."""
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or info.get("hostaddr") or ""
    port = f":{info['port']}" if info.get("port") else ""
    db = f"/{info['dbname']}" if info.get("dbname") else ""
    return f"{user}{host}{port}{db}" or "(libpq defaults)"


class PostgresStore(Store):
    shared_across_hosts = True

    def __init__(self, dsn: str, prefix: str = "") -> None:
        if not isinstance(dsn, str):
            raise ValueError(f"postgresql store: dsn must be a str, got {type(dsn).__name__}")
        try:
            info = conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's message quotes the text around the fault: it may be the password
            raise ValueError(
                "postgresql store: the dsn does not parse as a libpq connection string "
                "(not shown: it may hold a password)"
            ) from None
        self._dsn = dsn
        self._secrets = secrets(dsn) | ({info["password"]} if info.get("password") else set())
        self.name = f"postgresql store {describe(info)}"
        self.table = table_name(prefix, store=self.name)
        self.name += f" table {self.table!r}"
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in info:
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT_SECS
        if "application_name" not in info:
            self._kwargs["application_name"] = "tupletree store"
        t = sql.Identifier(self.table)
        self._sql_get = sql.SQL(
            "SELECT key, value FROM {} WHERE namespace = %s AND key = ANY(%s::text[])"
        ).format(t)
        self._sql_items = sql.SQL(
            "SELECT key, value FROM {} WHERE namespace = %s ORDER BY key"
        ).format(t)
        # Namespaces by an index skip-scan: one seek per namespace, however many keys.
        self._sql_namespaces = sql.SQL(
            """WITH RECURSIVE ns(n) AS (
                SELECT (SELECT namespace FROM {t} WHERE namespace >= %(p)s
                        ORDER BY namespace LIMIT 1)
                UNION ALL
                SELECT (SELECT namespace FROM {t} WHERE namespace > ns.n
                        ORDER BY namespace LIMIT 1)
                FROM ns WHERE ns.n IS NOT NULL AND starts_with(ns.n, %(p)s)
            )
            SELECT n FROM ns WHERE n IS NOT NULL AND starts_with(n, %(p)s)"""
        ).format(t=t)
        self._sql_put = sql.SQL(
            "INSERT INTO {} (namespace, key, value) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::bytea[]) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value"
        ).format(t)
        self._sql_delete = sql.SQL(
            "DELETE FROM {} WHERE (namespace, key) IN "
            "(SELECT * FROM unnest(%s::text[], %s::text[]))"
        ).format(t)
        self._sql_clear = sql.SQL("DELETE FROM {} WHERE namespace = ANY(%s::text[])").format(t)
        self._closed = False
        self._conn = self._connect()
        self._create_table()

    # -- connection -----------------------------------------------------------------

    def _error(self, doing: str, exc: BaseException) -> StoreError:
        # raised `from None`: the cause's text is here, scrubbed of the password
        text = scrub(f"{type(exc).__name__}: {exc}".strip(), self._secrets)
        return StoreError(f"{self.name}: {doing}: {text}", store=self.name)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self._dsn, **self._kwargs)
        except psycopg.Error as exc:
            raise self._error("cannot connect", exc) from None
        conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE  # apply's transactions
        return conn

    def _live(self) -> psycopg.Connection[Any]:
        """The connection, opened again if the server dropped it."""
        if self._closed:
            raise StoreError(f"{self.name}: the store is closed", store=self.name)
        if self._conn.broken or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _create_table(self) -> None:
        create = sql.SQL(
            'CREATE TABLE IF NOT EXISTS {} (namespace text COLLATE "C" NOT NULL, '
            'key text COLLATE "C" NOT NULL, value bytea NOT NULL, PRIMARY KEY (namespace, key))'
        ).format(sql.Identifier(self.table))
        try:
            conn = self._conn
            if conn.execute("SELECT to_regclass(%s)", [f'"{self.table}"']).fetchone()[0]:
                return
            # Two processes creating the table at once collide in the catalog: take turns.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [self.table])
                conn.execute(create)
        except psycopg.Error as exc:
            self._conn.close()
            raise self._error(f"cannot create table {self.table!r}", exc) from None

    def _read(self, doing: str, fn: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        for attempt in (1, 2):
            conn = self._live()
            try:
                return fn(conn)
            except psycopg.OperationalError as exc:
                if attempt == 2 or not conn.broken:
                    raise self._error(f"{doing} failed", exc) from None
            except psycopg.Error as exc:
                raise self._error(f"{doing} failed", exc) from None
        raise AssertionError("unreachable")

    # -- reads ----------------------------------------------------------------------

    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        # text cannot hold NUL (base.check_name refuses it in writes): such a key is absent
        wanted = [k for k in dict.fromkeys(keys) if "\x00" not in k]
        if "\x00" in namespace or not wanted:
            return [None] * len(keys)
        rows = self._read("get", lambda c: c.execute(self._sql_get, [namespace, wanted]).fetchall())
        found = dict(rows)
        return [found.get(k) for k in keys]

    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        if "\x00" in namespace:
            return iter(())
        rows = self._read("items", lambda c: c.execute(self._sql_items, [namespace]).fetchall())
        return iter(rows)

    def namespaces(self, prefix: str) -> list[str]:
        if "\x00" in prefix:
            return []
        rows = self._read(
            "namespaces", lambda c: c.execute(self._sql_namespaces, {"p": prefix}).fetchall()
        )
        return [r[0] for r in rows]

    # -- apply ----------------------------------------------------------------------

    def apply(self, writes: Sequence[Write], expect: Sequence[Expect] = ()) -> bool:
        check_writes(writes, expect)
        if not writes and not expect:
            return True
        reconnected = False
        for attempt in range(1, MAX_ATTEMPTS + 1):
            conn = self._live()
            committing = False
            try:
                with conn.transaction():
                    holds = self._holds(conn, expect)
                    if holds:
                        for kind, run in runs(writes):
                            self._write(conn, kind, run)
                    committing = True
                # committed; when the expectations failed, with nothing written: the read
                # that failed them counts only now
                return holds
            except _RETRYABLE:
                # Another apply touched the same keys: run again, rereading expectations.
                # A short random pause spreads the retries of several losers.
                time.sleep(random.uniform(0, 0.002 * attempt))
            except psycopg.Error as exc:
                if conn.broken and not committing and not reconnected:
                    # The connection died before COMMIT was sent: the server rolls the
                    # transaction back, nothing applied. Once more, on a new connection.
                    reconnected = True
                    continue
                unknown = " (it may or may not have been applied)" if committing else ""
                raise self._error(f"apply failed{unknown}", exc) from None
        raise StoreError(
            f"{self.name}: apply gave up after {MAX_ATTEMPTS} serialization failures "
            "(other applies kept writing the same keys)",
            store=self.name,
        )

    def _holds(self, conn: psycopg.Connection[Any], expect: Sequence[Expect]) -> bool:
        by_ns: dict[str, list[Expect]] = defaultdict(list)
        for e in expect:
            by_ns[e.namespace].append(e)
        for ns, es in by_ns.items():
            found = dict(conn.execute(self._sql_get, [ns, [e.key for e in es]]).fetchall())
            if any(found.get(e.key) != e.value for e in es):
                return False
        return True

    def _write(self, conn: psycopg.Connection[Any], kind: type, run: list[Write]) -> None:
        """One run of writes of one kind, inside apply's transaction: one statement."""
        if kind is Put:
            rows = puts_last_wins(run)
            conn.execute(
                self._sql_put, [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]]
            )
        elif kind is Delete:
            pairs = deleted_keys(run)
            conn.execute(self._sql_delete, [[p[0] for p in pairs], [p[1] for p in pairs]])
        elif kind is Clear:
            conn.execute(self._sql_clear, [cleared(run)])

    def close(self) -> None:
        self._closed = True
        self._conn.close()


def open_postgres(config: Mapping[str, Any]) -> PostgresStore:
    if "dsn" not in config:
        raise ValueError(
            "postgresql store: config needs 'dsn' (e.g. 'postgresql://user@host:5432/db')"
        )
    return PostgresStore(config["dsn"], config.get("prefix", ""))
