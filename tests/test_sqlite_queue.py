"""The SQLite-backed queue and its spout, on LocalCluster (the Spark tests kill a worker
under it)."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, FailedException, LocalCluster, TopologyBuilder
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout, immediate


class FailFirstDelivery(BasicBolt):
    """Fails each message the first time it sees it: every one is replayed once."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.seen: set[int] = set()

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] not in self.seen:
            self.seen.add(tup[0])
            raise FailedException("first delivery")


def test_every_message_is_done_after_a_replay(tmp_path: Any) -> None:
    """The spout opens on the submitting thread and runs on the worker's: its connection
    must work on both; failed trees go back to ready and are delivered again."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"message {i}" for i in range(300))
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20))
    b.set_bolt("sink", FailFirstDelivery()).shuffle_grouping("queue")
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {}, b.create_topology())
        assert cluster.wait_idle(60)
        assert cluster.errors("q") == []
    assert queue.counts() == {"ready": 0, "leased": 0, "done": 300}
    assert set(queue.deliveries().values()) == {2}
    queue.close()


def test_a_failed_write_is_rolled_back(tmp_path: Any) -> None:
    queue = SQLiteQueue(str(tmp_path / "queue.db"))
    queue.put(["a"])
    conn = queue._conn
    with pytest.raises(RuntimeError), immediate(conn):
        conn.execute("UPDATE messages SET state='done'")
        raise RuntimeError("the body failed")
    assert queue.counts() == {"ready": 1, "leased": 0, "done": 0}
    queue.close()
