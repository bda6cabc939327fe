"""A durable work queue in a SQLite file, and the spout that consumes it reliably.

A message is ``ready``, ``leased`` (emitted by one spout task, its tree pending) or
``done`` (its tree completed). The spout leases a message when it emits it, marks it
done on ``ack`` and ready again on ``fail``, so a failed or timed-out tree is replayed.
A lease names the spout task that took it (topology, component, task index): when that
task starts again, after its worker died, it takes back its own leases first, so a
message whose spout died with it is replayed too (Storm's "spout task dies" case,
handled the way a real broker does: unacked messages go back on the queue). A lease
also expires (a visibility timeout, as SQS's): a message leased longer than
``visibility_timeout_secs`` ago is leased again by any spout task, so the leases of a
task that never comes back under the same name (a renamed topology, a smaller
parallelism) are not stranded. A live task's lease is renewed when a bolt resets the
tree's timeout, and while the message waits in the spout's buffer (``batch`` are
leased at once, then emitted as max spout pending allows); ``check_config`` refuses
at submit a visibility timeout that a tree could outlive (twice the message timeout).
Lease times are wall-clock seconds, shared by every process using the file.

Several processes may use one file (WAL mode, a busy timeout), which is what a
SparkCluster on one machine needs; it is not meant for a real cluster's network disk.

In a stateful topology's aligned checkpoint mode (tupletree.state.aligned) the spout
rewinds instead of replaying what failed: task ``k`` of ``n`` reads the messages with
``id % n == k`` that are not done, in id order; ``position()`` is the last id it
emitted, ``rewind(position)`` goes back to just after it (None: to before its first
message not done), and ``committed(position)`` marks every one of its messages up to it
done (an ack marks one done as before: its tree completed, so its effect on the state
was committed). Leases do not decide who reads what in that mode, the id does.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from tupletree.connectors.spout import check_lease, check_messages_per_tree
from tupletree.topology.components import Spout

DEFAULT_VISIBILITY_TIMEOUT_SECS = 300.0
# Renews a message's lease, if this task (the lease) still holds it.
_RENEW = "UPDATE messages SET leased_at=? WHERE id=? AND state='leased' AND lease=?"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'ready',
    lease TEXT,
    deliveries INTEGER NOT NULL DEFAULT 0,
    leased_at REAL
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
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    if "leased_at" not in columns:  # a file written before leases expired
        conn.execute("ALTER TABLE messages ADD COLUMN leased_at REAL")
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
    ``next_tuple``. Ready messages are leased first, then messages whose lease expired.

    ``messages_per_tree`` > 1: up to that many leased messages are emitted at once as
    one tree (``emit_batch``), its msg id the tuple of their ids; its ack marks them
    all done, its fail all ready, each in one transaction. A message delivered before
    (a failed tree's, or a dead task's) is emitted in a tree of its own, so a message
    that always fails does not hold back the ones it was leased with. ``batch`` is
    raised to ``messages_per_tree`` if smaller. The aligned mode (the module's
    docstring) emits one message at a time whatever this says.
    """

    outputs = ["id", "body"]

    def __init__(
        self,
        path: str,
        batch: int = 100,
        visibility_timeout_secs: float = DEFAULT_VISIBILITY_TIMEOUT_SECS,
        messages_per_tree: int = 1,
    ) -> None:
        if not isinstance(visibility_timeout_secs, int | float) or visibility_timeout_secs <= 0:
            raise ValueError(
                "visibility_timeout_secs must be a positive number, got "
                f"{visibility_timeout_secs!r}"
            )
        check_messages_per_tree(messages_per_tree)
        self.messages_per_tree = messages_per_tree
        self.path = path
        self.batch = max(batch, messages_per_tree)
        self.visibility_timeout_secs = float(visibility_timeout_secs)

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        check_lease(
            f"SQLiteQueueSpout {component!r}",
            conf,
            "visibility_timeout_secs",
            self.visibility_timeout_secs,
            "the visibility timeout",
        )

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.lease = f"{context.topology_name}/{context.component_id}/{context.this_task_index}"
        self.conn = connect(self.path)
        # (id, body, deliveries before this lease), emitted from the end.
        self.buffer: list[tuple[int, str, int]] = []
        self._leased_at = 0.0  # when the buffer's messages were leased (or renewed)
        self.tasks = len(context.this_component_tasks())
        self.index = context.this_task_index
        # The aligned mode's: the last id emitted (None until the first rewind).
        self.cursor: int | None = None
        # Leases held by an earlier life of this task died with it: replay them.
        self._write("UPDATE messages SET state='ready', lease=NULL WHERE lease=?", (self.lease,))

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        with immediate(self.conn):
            self.conn.execute(sql, args)

    def next_tuple(self) -> None:
        if self.cursor is not None:
            self._next_in_order()
            return
        if self.buffer and time.time() - self._leased_at >= self.visibility_timeout_secs / 2:
            self._keep_buffer()
        if not self.buffer:
            self._lease()
        if not self.buffer:
            return
        if self.messages_per_tree == 1:
            msg_id, body, _ = self.buffer.pop()
            self.collector.emit([msg_id, body], msg_id=msg_id)
            return
        buffer = self.buffer
        rows = []
        while buffer and len(rows) < self.messages_per_tree:
            if buffer[-1][2] and rows:
                break  # delivered before: it goes in a tree of its own, next time
            row = buffer.pop()
            rows.append(row)
            if row[2]:
                break
        self.collector.emit_batch(
            [[msg_id, body] for msg_id, body, _ in rows], msg_id=tuple(r[0] for r in rows)
        )

    def _lease(self) -> None:
        """Lease up to ``batch`` messages into the buffer (emitted from its end): ready
        ones first, then ones whose lease expired."""
        now = time.time()
        with immediate(self.conn):
            rows = self.conn.execute(
                "SELECT id, body, deliveries FROM messages WHERE state='ready' ORDER BY id LIMIT ?",
                (self.batch,),
            ).fetchall()
            if len(rows) < self.batch:
                rows += self.conn.execute(
                    "SELECT id, body, deliveries FROM messages WHERE state='leased' "
                    "AND leased_at < ? ORDER BY id LIMIT ?",
                    (now - self.visibility_timeout_secs, self.batch - len(rows)),
                ).fetchall()
            self.conn.executemany(
                "UPDATE messages SET state='leased', lease=?, leased_at=?, "
                "deliveries=deliveries+1 WHERE id=?",
                [(self.lease, now, row[0]) for row in rows],
            )
        self.buffer = rows[::-1]
        self._leased_at = now

    def _keep_buffer(self) -> None:
        """Renew the leases of the messages waiting in the buffer, and drop those this
        task no longer holds. Max spout pending can keep ``next_tuple`` from being
        called for as long as a stall lasts; a lease that expired meanwhile may have
        gone to another task, which delivers the message: emitting it here too would
        deliver it twice."""
        now = time.time()
        kept = []
        with immediate(self.conn):
            for row in self.buffer:
                if self.conn.execute(_RENEW, (now, row[0], self.lease)).rowcount:
                    kept.append(row)
        self.buffer = kept
        self._leased_at = now

    # -- the aligned checkpoint mode (see the module docstring) --------------------------

    def position(self) -> int | None:
        return self.cursor

    def rewind(self, position: int | None) -> None:
        self.buffer = []
        if position is None:
            (first,) = self.conn.execute(
                "SELECT MIN(id) FROM messages WHERE state != 'done' AND id % ? = ?",
                (self.tasks, self.index),
            ).fetchone()
            position = 0 if first is None else first - 1
        self.cursor = position

    def committed(self, position: int | None) -> None:
        if position is not None:
            self._write(
                "UPDATE messages SET state='done', lease=NULL WHERE id <= ? AND id % ? = ? "
                "AND state != 'done'",
                (position, self.tasks, self.index),
            )

    def _next_in_order(self) -> None:
        if not self.buffer:
            now = time.time()
            with immediate(self.conn):
                rows = self.conn.execute(
                    "SELECT id, body, deliveries FROM messages WHERE id > ? AND id % ? = ? "
                    "AND state != 'done' ORDER BY id LIMIT ?",
                    (self.cursor, self.tasks, self.index, self.batch),
                ).fetchall()
                self.conn.executemany(
                    "UPDATE messages SET state='leased', lease=?, leased_at=?, "
                    "deliveries=deliveries+1 WHERE id=?",
                    [(self.lease, now, row[0]) for row in rows],
                )
            self.buffer = rows[::-1]
        if self.buffer:
            msg_id, body, _ = self.buffer.pop()
            self.cursor = msg_id
            self.collector.emit([msg_id, body], msg_id=msg_id)

    def reset_timeout(self, msg_id: int | tuple[int, ...]) -> None:
        """A bolt reset the tree's timeout: renew the leases (if this task still holds
        them)."""
        now = time.time()
        self._write_each(_RENEW, [(now, one, self.lease) for one in _ids(msg_id)])

    def ack(self, msg_id: int | tuple[int, ...]) -> None:
        self._write_each(
            "UPDATE messages SET state='done', lease=NULL WHERE id=?",
            [(one,) for one in _ids(msg_id)],
        )

    def fail(self, msg_id: int | tuple[int, ...]) -> None:
        # Only a lease this task still holds: one that expired may be another task's now.
        self._write_each(
            "UPDATE messages SET state='ready', lease=NULL WHERE id=? AND state='leased' "
            "AND lease=?",
            [(one, self.lease) for one in _ids(msg_id)],
        )

    def _write_each(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One transaction for a tree's messages."""
        with immediate(self.conn):
            self.conn.executemany(sql, rows)

    def deactivate(self) -> None:
        # Give back what was leased but not emitted yet.
        if self.buffer:
            self.fail(tuple(row[0] for row in self.buffer))
        self.buffer = []

    def close(self) -> None:
        self.deactivate()
        self.conn.close()


def _ids(msg_id: int | tuple[int, ...]) -> tuple[int, ...]:
    """A message's id, or a tree's ids (``messages_per_tree``), as a tuple."""
    return msg_id if type(msg_id) is tuple else (msg_id,)  # type: ignore[return-value]
