"""A durable work queue in a SQLite file, and the spout that consumes it reliably.

A message is ``ready``, ``leased`` (emitted by one spout task, its tree pending) or
``done`` (its tree completed). The spout leases a message when it emits it, marks it
done on ``ack`` and ready again on ``fail``, so a failed or timed-out tree is replayed.
A lease names the spout task that took it (topology, component, task index): when that
task starts again, after its worker died, it takes back its own leases first, so a
message whose spout died with it is replayed too (Storm's "spout task dies" case,
handled the way a real broker does: unacked messages go back on the queue).

Several processes may use one file (WAL mode, a busy timeout), which is what a
SparkCluster on one machine needs; it is not meant for a real cluster's network disk.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tupletree.topology.components import Spout

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'ready',
    lease TEXT,
    deliveries INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_state ON messages(state, id);
"""


def connect(path: str) -> sqlite3.Connection:
    # check_same_thread=False: a LocalCluster opens its spouts on the submitting thread
    # and then runs them on the worker's; each connection is still used by one thread
    # at a time (one spout task's).
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    return conn


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that takes the write lock at once (``BEGIN IMMEDIATE``, so
    concurrent spout tasks queue instead of failing on lock upgrade): committed when
    the body returns, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class SQLiteQueue:
    """The producer's and observer's side: ``put``, ``counts``, ``deliveries``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn = connect(path)

    def put(self, bodies: Iterable[str]) -> None:
        with immediate(self._conn):
            self._conn.executemany("INSERT INTO messages(body) VALUES (?)", [(b,) for b in bodies])

    def counts(self) -> dict[str, int]:
        rows = self._conn.execute("SELECT state, COUNT(*) FROM messages GROUP BY state")
        return {"ready": 0, "leased": 0, "done": 0} | dict(rows.fetchall())

    def deliveries(self) -> dict[int, int]:
        """Message id -> how many times it was emitted."""
        return dict(self._conn.execute("SELECT id, deliveries FROM messages").fetchall())

    def close(self) -> None:
        self._conn.close()


class SQLiteQueueSpout(Spout):
    """Emits ``[id, body]`` for each message of the queue at ``path``, msg id = row id.

    ``batch`` messages are leased per query (one transaction), then emitted one per
    ``next_tuple``.
    """

    outputs = ["id", "body"]

    def __init__(self, path: str, batch: int = 100) -> None:
        self.path = path
        self.batch = batch

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.lease = f"{context.topology_name}/{context.component_id}/{context.this_task_index}"
        self.conn = connect(self.path)
        self.buffer: list[tuple[int, str]] = []
        # Leases held by an earlier life of this task died with it: replay them.
        self._write("UPDATE messages SET state='ready', lease=NULL WHERE lease=?", (self.lease,))

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        with immediate(self.conn):
            self.conn.execute(sql, args)

    def next_tuple(self) -> None:
        if not self.buffer:
            with immediate(self.conn):
                rows = self.conn.execute(
                    "SELECT id, body FROM messages WHERE state='ready' ORDER BY id LIMIT ?",
                    (self.batch,),
                ).fetchall()
                self.conn.executemany(
                    "UPDATE messages SET state='leased', lease=?, deliveries=deliveries+1 "
                    "WHERE id=?",
                    [(self.lease, row[0]) for row in rows],
                )
            self.buffer = rows[::-1]
        if self.buffer:
            msg_id, body = self.buffer.pop()
            self.collector.emit([msg_id, body], msg_id=msg_id)

    def ack(self, msg_id: int) -> None:
        self._write("UPDATE messages SET state='done', lease=NULL WHERE id=?", (msg_id,))

    def fail(self, msg_id: int) -> None:
        self._write(
            "UPDATE messages SET state='ready', lease=NULL WHERE id=? AND state='leased'",
            (msg_id,),
        )

    def deactivate(self) -> None:
        # Give back what was leased but not emitted yet.
        for msg_id, _ in self.buffer:
            self.fail(msg_id)
        self.buffer = []

    def close(self) -> None:
        self.deactivate()
        self.conn.close()
