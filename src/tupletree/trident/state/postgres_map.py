"""PostgresMapState: a map state in a PostgreSQL table of the user's naming, whose rows
a person can read (``SELECT key, value FROM wordcount``)::

    <table> (key text PRIMARY KEY, value jsonb NOT NULL)     serializer="json"
    <table> (key text PRIMARY KEY, value bytea NOT NULL)     serializer="pickle"

``key`` is the key tuple as JSON text (``["man"]``), ``value`` Storm's layout
(``{"txid": 3, "val": 5}``, ``{"currTxid": 3, "curr": 6, "prev": 4}``, or the bare
value). The table is created when missing; an existing table of another shape is
refused, naming it and the shape wanted. ``table`` may be ``schema.table``.

I/O per batch and partition: one ``SELECT ... WHERE key = ANY(...)`` and one ``INSERT
... ON CONFLICT DO UPDATE`` over ``unnest`` of the batch's keys and values: one
statement, atomic on its own (autocommit), rows locked in key order so partitions never
deadlock. A connection that drops is opened again by the next call; the failed call
raises StoreError (the batch fails and replays with its txid: a write whose reply was
lost is then skipped or recomputed, as the state type says).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from tupletree.extras import require
from tupletree.redact import redact, scrub, secrets
from tupletree.store import StoreError
from tupletree.trident.state.base import IBackingMap, Key, StateType
from tupletree.trident.state.map_factory import MapStateFactory
from tupletree.trident.state.store_backing import ValueCodec, encode_key

CONNECT_TIMEOUT_SECS = 5
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def table_parts(table: object) -> tuple[str, ...]:
    """``"t"`` or ``"schema.t"`` as its identifiers; ValueError naming anything else."""
    parts = tuple(table.split(".")) if isinstance(table, str) else ()
    if not 1 <= len(parts) <= 2 or not all(_IDENT.fullmatch(p) for p in parts):
        raise ValueError(
            f"PostgreSQL table {table!r} must be a name or schema.name of letters, digits "
            "and '_' (not starting with a digit, up to 63 characters each)"
        )
    return parts


def describe_dsn(dsn: str) -> str:
    """The DSN as it may be shown: every credential masked (tupletree.redact)."""
    return redact(dsn)


def safe_error(exc: BaseException, dsn: str) -> str:
    """A driver's error text without any secret of ``dsn`` in it."""
    return scrub(str(exc), secrets(dsn))


def import_psycopg(feature: str) -> Any:
    return require("psycopg", "postgresql", feature)


class PostgresTableMap:
    """The backing map: one table, one connection (autocommit)."""

    def __init__(self, dsn: str, table: str, codec: ValueCodec) -> None:
        self._psycopg = import_psycopg("PostgresMapState")
        self._sql = self._psycopg.sql
        self.dsn, self.codec = dsn, codec
        self.table = self._sql.Identifier(*table_parts(table))
        self.name = f"PostgreSQL table {table!r} at {describe_dsn(dsn)}"
        self._json = codec.serializer == "json"
        self._conn: Any = None
        self._ensure_table(table)

    def __repr__(self) -> str:
        return f"PostgresTableMap({self.name})"

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = self._psycopg.connect(
                    self.dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECS
                )
            except self._psycopg.Error as exc:
                message = f"{self.name}: cannot connect: {safe_error(exc, self.dsn)}"
                raise StoreError(message, store=self.name) from None
        return self._conn

    def _execute(self, query: Any, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = self._connection()
        try:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []
        except self._psycopg.OperationalError as exc:
            conn.close()
            raise StoreError(f"{self.name}: {safe_error(exc, self.dsn)}", store=self.name) from None

    def _ensure_table(self, table: str) -> None:
        sql, errors = self._sql, self._psycopg.errors
        kind = "jsonb" if self._json else "bytea"
        create = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value " + kind + " NOT NULL)"
        ).format(self.table)
        # another partition may create it at the same moment
        with contextlib.suppress(errors.UniqueViolation, errors.DuplicateTable):
            self._execute(create)
        parts = table_parts(table)
        rows = self._execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            [".".join(f'"{p}"' for p in parts)],
        )
        shape = dict(rows)
        if shape.get("key") != "text" or shape.get("value") != kind:
            raise ValueError(
                f"{self.name} has columns {shape}; a map state needs (key text, value {kind})"
            )

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        texts = [encode_key(k) for k in keys]
        value = self._sql.SQL("value::text" if self._json else "value")
        rows = self._execute(
            self._sql.SQL("SELECT key, {} FROM {} WHERE key = ANY(%s)").format(value, self.table),
            [texts],
        )
        found = {k: (v.encode() if self._json else bytes(v)) for k, v in rows}
        decode = self.codec.decode
        return [None if t not in found else decode(found[t]) for t in texts]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        rows = {encode_key(k): self.codec.encode(k, v) for k, v in zip(keys, vals, strict=True)}
        if not rows:
            return
        texts = sorted(rows)
        if self._json:
            values: list[Any] = [rows[t].decode() for t in texts]
            cast, array = "jsonb", "text[]"
        else:
            values, cast, array = [rows[t] for t in texts], "bytea", "bytea[]"
        upsert = (
            f"INSERT INTO {{}} (key, value) SELECT k, v::{cast} FROM unnest(%s::text[], "
            f"%s::{array}) AS u(k, v) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        self._execute(self._sql.SQL(upsert).format(self.table), [texts, values])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


class PostgresMapState(MapStateFactory):
    """A map state in the PostgreSQL table ``table`` (module docstring)."""

    store_kind: ClassVar[str] = "postgresql"

    def __init__(
        self,
        dsn: str,
        table: str,
        *,
        state_type: StateType = StateType.OPAQUE,
        serializer: str = "json",
        cache_size: int = 0,
    ) -> None:
        super().__init__(state_type, serializer=serializer, cache_size=cache_size)
        table_parts(table)
        self.dsn, self.table = dsn, table

    def location(self) -> tuple[Any, ...]:
        return ("PostgreSQL", describe_dsn(self.dsn), "table", self.table)

    def __repr__(self) -> str:
        where = describe_dsn(self.dsn)
        return f"PostgresMapState({self.table!r} at {where}, {self.state_type.value})"

    def open_backing(self, conf: dict[str, Any], partition_index: int) -> IBackingMap:
        return PostgresTableMap(self.dsn, self.table, self.codec())
