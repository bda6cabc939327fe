"""The SQLite store: one file on one host (``shared_across_hosts = False``).

Config ``{"path": "state.db", "prefix": ""}``: the file (created with its table if
missing; its directory must exist) and a prefix for the table's name, so several
stores can share a file. Layout (sql.py): one table ``<prefix>tupletree_store``
(namespace, key, value BLOB, primary key (namespace, key)), WITHOUT ROWID, so a
namespace's rows lie together in key order.

Rules:

- ``apply`` is one transaction, ``BEGIN IMMEDIATE``: it takes the file's write lock
  before reading the expectations, so no other writer can change them between the check
  and the commit. Expectations that do not hold roll it back (nothing written).
- Several processes (workers of a SparkCluster on one machine, each task with its own
  ``SQLiteStore``) may share the file. WAL mode: readers never wait for a writer and
  never block one; a read sees the last commit before it began (a multi-key ``get`` is
  one snapshot). Writers take turns: one holds the write lock while its ``apply`` runs
  (a few milliseconds, bench/store.py); another waits for it up to
  ``BUSY_TIMEOUT_SECS``, then gets a StoreError naming the file (its ``apply`` wrote
  nothing). WAL needs shared memory between the processes: one host, a local disk, not
  a network file system.
- ``synchronous=FULL``: a commit is on disk when ``apply`` returns (WAL's default,
  NORMAL, may lose the last commits in a power cut; exactly-once must not).
- A killed process leaves no partial ``apply``: SQLite ignores the uncommitted end of
  the WAL at the next open, and the lock dies with the process.

Cost: a 100-key ``get`` is one indexed query; a 100-key ``apply`` one statement per
run of writes of one kind plus an fsync at commit (figures in notes/performance.md).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

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

BUSY_TIMEOUT_SECS = 30.0
# Keys per query in a multi-get: under SQLite's oldest limit of 999 bound variables.
GET_CHUNK = 500


class SQLiteStore(Store):
    shared_across_hosts = False

    def __init__(self, path: str | os.PathLike[str], prefix: str = "") -> None:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise ValueError(f"sqlite store: path must be a file name, got {path!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.name = f"sqlite store {self.path!r}"
        self.table = table_name(prefix, store=self.name)
        if prefix:
            self.name += f" table {self.table!r}"
        t = f'"{self.table}"'  # a checked identifier (sql.py)
        self._sql_get1 = f"SELECT value FROM {t} WHERE namespace = ? AND key = ?"
        self._sql_items = f"SELECT key, value FROM {t} WHERE namespace = ? ORDER BY key"
        self._sql_put = f"INSERT OR REPLACE INTO {t} (namespace, key, value) VALUES (?, ?, ?)"
        self._sql_delete = f"DELETE FROM {t} WHERE namespace = ? AND key = ?"
        self._sql_clear = f"DELETE FROM {t} WHERE namespace = ?"
        # Namespaces by an index skip-scan: one seek per namespace, however many keys.
        self._sql_namespaces = f"""
            WITH RECURSIVE ns(n) AS (
                SELECT (SELECT namespace FROM {t} WHERE namespace >= ?1
                        ORDER BY namespace LIMIT 1)
                UNION ALL
                SELECT (SELECT namespace FROM {t} WHERE namespace > ns.n
                        ORDER BY namespace LIMIT 1)
                FROM ns WHERE ns.n IS NOT NULL AND substr(ns.n, 1, ?2) = ?1
            )
            SELECT n FROM ns WHERE n IS NOT NULL AND substr(n, 1, ?2) = ?1"""
        self._conn = self._open(t)

    def _open(self, t: str) -> sqlite3.Connection:
        conn = None
        try:
            # check_same_thread=False: a task's store is opened on one thread and used on
            # the worker's; one thread uses it at a time (base.py). isolation_level=None:
            # transactions are ours (BEGIN IMMEDIATE ... COMMIT).
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_SECS, isolation_level=None, check_same_thread=False
            )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise StoreError(
                    f"{self.name}: the file cannot be in WAL mode (it is {mode!r}), which "
                    "several processes need: use a file on a local disk",
                    store=self.name,
                )
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {t} (namespace TEXT NOT NULL, key TEXT NOT NULL, "
                "value BLOB NOT NULL, PRIMARY KEY (namespace, key)) WITHOUT ROWID"
            )
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            folder = os.path.dirname(self.path)
            why = "" if os.path.isdir(folder) else f" (its folder {folder!r} does not exist)"
            raise StoreError(f"{self.name}: cannot open: {exc}{why}", store=self.name) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    def _error(self, doing: str, exc: sqlite3.Error) -> StoreError:
        why = str(exc)
        if "locked" in why or "busy" in why:
            why += (
                f" (another connection held the write lock; waited up to {BUSY_TIMEOUT_SECS:g} s)"
            )
        return StoreError(f"{self.name}: {doing} failed: {why}", store=self.name)

    def get(self, namespace: str, keys: Sequence[str]) -> list[bytes | None]:
        conn = self._conn
        t = f'"{self.table}"'
        found: dict[str, bytes] = {}
        distinct = list(dict.fromkeys(keys))
        try:
            snapshot = len(distinct) > GET_CHUNK  # several queries: one read transaction
            if snapshot:
                conn.execute("BEGIN")
            try:
                for i in range(0, len(distinct), GET_CHUNK):
                    chunk = distinct[i : i + GET_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    found.update(
                        conn.execute(
                            f"SELECT key, value FROM {t} WHERE namespace = ? AND key IN ({marks})",
                            [namespace, *chunk],
                        ).fetchall()
                    )
            finally:
                if snapshot and conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error("get", exc) from exc
        return [found.get(k) for k in keys]

    def items(self, namespace: str) -> Iterator[tuple[str, bytes]]:
        try:
            rows = self._conn.execute(self._sql_items, (namespace,)).fetchall()
        except sqlite3.Error as exc:
            raise self._error("items", exc) from exc
        return iter(rows)

    def namespaces(self, prefix: str) -> list[str]:
        try:
            rows = self._conn.execute(self._sql_namespaces, (prefix, len(prefix))).fetchall()
        except sqlite3.Error as exc:
            raise self._error("namespaces", exc) from exc
        return [r[0] for r in rows]

    def apply(self, writes: Sequence[Write], expect: Sequence[Expect] = ()) -> bool:
        check_writes(writes, expect)
        if not writes and not expect:
            return True
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if not self._holds(expect):
                    conn.execute("ROLLBACK")
                    return False
                for kind, run in runs(writes):
                    self._write(kind, run)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._error("apply", exc) from exc
        return True

    def _holds(self, expect: Sequence[Expect]) -> bool:
        for e in expect:
            row = self._conn.execute(self._sql_get1, (e.namespace, e.key)).fetchone()
            if (row[0] if row else None) != e.value:
                return False
        return True

    def _write(self, kind: type, run: list[Write]) -> None:
        """One run of writes of one kind, inside apply's transaction."""
        if kind is Put:
            self._conn.executemany(self._sql_put, puts_last_wins(run))
        elif kind is Delete:
            self._conn.executemany(self._sql_delete, deleted_keys(run))
        elif kind is Clear:
            self._conn.executemany(self._sql_clear, [(ns,) for ns in cleared(run)])

    def close(self) -> None:
        self._conn.close()


def open_sqlite(config: Mapping[str, Any]) -> SQLiteStore:
    if "path" not in config:
        raise ValueError("sqlite store: config needs 'path' (the file)")
    return SQLiteStore(config["path"], config.get("prefix", ""))
