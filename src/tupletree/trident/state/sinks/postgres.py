"""PostgresSinkFactory: an exactly-once sink into a PostgreSQL table (sinks/base.py has
the rules). The table is the user's, created beforehand with the columns named (its
types are the user's to choose; a missing table is refused, naming it). Bookkeeping,
created when missing::

    tupletree_sink_txids (sink text, partition integer, txid bigint,
                          partitions integer, PRIMARY KEY (sink, partition))

(``partitions``: the partition count the txid was committed under, sinks/base.py; added
to a table made before it was kept.)

``commit(txid)`` is one transaction: make sure the partition's row exists (``INSERT ...
ON CONFLICT DO NOTHING``), lock it (``SELECT ... FOR UPDATE``: a second writer of the
same partition, a zombie, waits here and then sees the txid this one recorded), decide,
insert the rows (pipelined), record the txid, commit. A failing row, a dropped
connection or a killed process leaves neither rows nor txid: PostgreSQL rolls back what
was not committed. Partitions lock different rows and never wait on one another.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from tupletree.store import StoreError
from tupletree.trident.state.base import State
from tupletree.trident.state.postgres_map import (
    CONNECT_TIMEOUT_SECS,
    describe_dsn,
    import_psycopg,
    safe_error,
    table_parts,
)
from tupletree.trident.state.sinks.base import Mark, SinkFactory, SinkState, check_identifier

TXIDS = "tupletree_sink_txids"


class PostgresSinkState(SinkState):
    def __init__(
        self,
        dsn: str,
        table: str,
        columns: Sequence[str] | None,
        sink: str,
        partition: int,
        partitions: int = 1,
    ) -> None:
        psycopg = import_psycopg("PostgresSinkFactory")
        sql = psycopg.sql
        where = f"PostgreSQL sink {table!r} at {describe_dsn(dsn)}"
        super().__init__(where, columns, partition, partitions)
        self._psycopg, self._sql = psycopg, sql
        self.table = sql.Identifier(*table_parts(table))
        self.sink, self.dsn = sink, dsn
        self._conn: Any = None
        conn = self._connection()
        with conn.transaction():
            found = conn.execute(
                "SELECT to_regclass(%s)", [".".join(f'"{p}"' for p in table_parts(table))]
            ).fetchone()
        if found is None or found[0] is None:
            raise ValueError(f"{self.where}: no such table; create it with its columns first")
        # another partition may create it at the same moment
        with contextlib.suppress(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TXIDS} (sink text NOT NULL, partition integer "
                "NOT NULL, txid bigint, partitions integer, PRIMARY KEY (sink, partition))"
            )
        with conn.transaction():
            conn.execute(f"ALTER TABLE {TXIDS} ADD COLUMN IF NOT EXISTS partitions integer")

    def _connection(self) -> Any:
        """The connection, opened again if it dropped (the batch that saw it drop failed)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = self._psycopg.connect(self.dsn, connect_timeout=CONNECT_TIMEOUT_SECS)
            except self._psycopg.Error as exc:
                message = f"{self.where}: cannot connect: {safe_error(exc, self.dsn)}"
                raise StoreError(message, store=self.where) from None
        return self._conn

    def _insert(self) -> Any:
        assert self.columns is not None
        sql = self._sql
        return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self.table,
            sql.SQL(", ").join(sql.Identifier(check_identifier("column", c)) for c in self.columns),
            sql.SQL(", ").join(sql.Placeholder() * len(self.columns)),
        )

    def last_committed_txid(self) -> int | None:
        conn = self._connection()
        with conn.transaction():
            row = conn.execute(
                f"SELECT txid FROM {TXIDS} WHERE sink = %s AND partition = %s",
                [self.sink, self.partition],
            ).fetchone()
        return None if row is None else row[0]

    def write(self, txid: int | None, rows: list[list[Any]]) -> bool:
        conn = self._connection()
        try:
            with conn.transaction():
                key = [self.sink, self.partition]
                conn.execute(
                    f"INSERT INTO {TXIDS} (sink, partition, txid) VALUES (%s, %s, NULL) "
                    "ON CONFLICT DO NOTHING",
                    key,
                )
                conn.execute(
                    f"SELECT txid FROM {TXIDS} WHERE sink = %s AND partition = %s FOR UPDATE",
                    key,
                )
                marks = {
                    q: Mark(t, n)
                    for q, t, n in conn.execute(
                        f"SELECT partition, txid, partitions FROM {TXIDS} WHERE sink = %s",
                        [self.sink],
                    )
                }
                if not self.decide(txid, marks):
                    return False
                if rows:
                    with conn.cursor() as cur:
                        cur.executemany(self._insert(), rows)
                if txid is not None:
                    conn.execute(
                        f"UPDATE {TXIDS} SET txid = %s, partitions = %s "
                        "WHERE sink = %s AND partition = %s",
                        [txid, self.partitions, *key],
                    )
            return True
        except self._psycopg.OperationalError as exc:
            message = f"{self.where}: batch {txid} not written: {safe_error(exc, self.dsn)}"
            raise StoreError(message, store=self.where) from None
        except self._psycopg.Error as exc:
            message = f"{self.where}: batch {txid} not written: {safe_error(exc, self.dsn)}"
            raise RuntimeError(message) from None


class PostgresSinkFactory(SinkFactory):
    store_kind = "postgresql"

    def __init__(
        self,
        dsn: str,
        table: str,
        columns: Sequence[str] | None = None,
        *,
        sink_id: str | None = None,
    ) -> None:
        table_parts(table)
        self.dsn, self.table = dsn, table
        self.columns = None if columns is None else [check_identifier("column", c) for c in columns]
        self.sink_id = sink_id or table

    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        return PostgresSinkState(
            self.dsn, self.table, self.columns, self.sink_id, partition_index, num_partitions
        )
