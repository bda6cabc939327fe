"""SqliteSinkFactory: an exactly-once sink into an SQLite table (sinks/base.py has the
rules). ``commit(txid)`` is one ``BEGIN IMMEDIATE`` transaction: read the partitions'
last txids from ``tupletree_sink_txids``, then insert the rows into ``table`` and
record the txid, or skip; a failing row rolls back all of it.

Layout (look with ``sqlite3 file.db``)::

    <table> (<columns>)          created, untyped, when missing
    tupletree_sink_txids (sink text, partition integer, txid integer,
                          partitions integer, PRIMARY KEY (sink, partition))

(``partitions``: the partition count the txid was committed under, sinks/base.py; added
to a table made before it was kept.)

``sink`` is ``sink_id`` (default: the table's name): two topologies writing one table
need two ids. SQLite is a file on one host: workers elsewhere cannot share it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import State
from tupletree.trident.state.sinks.base import Mark, SinkFactory, SinkState, check_identifier

TXIDS = "tupletree_sink_txids"
BUSY_TIMEOUT_SECS = 30.0


class SqliteSinkState(SinkState):
    def __init__(
        self,
        path: str,
        table: str,
        columns: Sequence[str] | None,
        sink: str,
        partition: int,
        partitions: int = 1,
    ) -> None:
        super().__init__(f"SQLite sink {table!r} in {path}", columns, partition, partitions)
        self.table, self.sink = table, sink
        # isolation_level=None: transactions are the explicit BEGIN/COMMIT below
        self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECS, isolation_level=None)
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {TXIDS} (sink TEXT NOT NULL, partition INTEGER NOT "
            "NULL, txid INTEGER, partitions INTEGER, PRIMARY KEY (sink, partition))"
        )
        columns_now = [row[1] for row in self.db.execute(f"PRAGMA table_info({TXIDS})")]
        if "partitions" not in columns_now:
            # made before partition counts were kept; another partition may add it first
            with contextlib.suppress(sqlite3.OperationalError):
                self.db.execute(f"ALTER TABLE {TXIDS} ADD COLUMN partitions INTEGER")

    def last_committed_txid(self) -> int | None:
        row = self.db.execute(
            f"SELECT txid FROM {TXIDS} WHERE sink = ? AND partition = ?",
            [self.sink, self.partition],
        ).fetchone()
        return None if row is None else row[0]

    def write(self, txid: int | None, rows: list[list[Any]]) -> bool:
        db = self.db
        db.execute("BEGIN IMMEDIATE")  # the write lock first: no writer between read and write
        try:
            marks = {
                q: Mark(t, n)
                for q, t, n in db.execute(
                    f"SELECT partition, txid, partitions FROM {TXIDS} WHERE sink = ?", [self.sink]
                )
            }
            if not self.decide(txid, marks):
                db.execute("ROLLBACK")
                return False
            if rows:
                assert self.columns is not None
                columns = [check_identifier("column", c) for c in self.columns]
                db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({', '.join(columns)})")
                marks_sql = ", ".join("?" * len(columns))
                db.executemany(
                    f"INSERT INTO {self.table} ({', '.join(columns)}) VALUES ({marks_sql})", rows
                )
            if txid is not None:
                db.execute(
                    f"INSERT INTO {TXIDS} (sink, partition, txid, partitions) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (sink, partition) DO UPDATE SET txid = excluded.txid, "
                    "partitions = excluded.partitions",
                    [self.sink, self.partition, txid, self.partitions],
                )
            db.execute("COMMIT")
            return True
        except BaseException as exc:
            db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise RuntimeError(f"{self.where}: batch {txid} not written: {exc}") from exc
            raise


class SqliteSinkFactory(SinkFactory):
    store_kind = "sqlite"
    shared_across_hosts = False

    def __init__(
        self,
        path: str,
        table: str,
        columns: Sequence[str] | None = None,
        *,
        sink_id: str | None = None,
    ) -> None:
        self.path = str(path)
        self.table = check_identifier("SQLite sink table", table)
        self.columns = None if columns is None else [check_identifier("column", c) for c in columns]
        self.sink_id = sink_id or table

    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        return SqliteSinkState(
            self.path, self.table, self.columns, self.sink_id, partition_index, num_partitions
        )
