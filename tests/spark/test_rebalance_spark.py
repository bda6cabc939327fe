"""SparkCluster's rebalance (Storm's): a running word count on a durable source (the
SQLite queue) goes from one worker to two and back while it runs; every message is
counted through, each word by one task, and each task runs in one process at a time."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

import pytest

from tupletree import BasicBolt, Config, TopologyBuilder
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout
from tupletree.errors import InvalidTopologyError
from tupletree.spark.cluster import SparkCluster
from tupletree.ui import views

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


class SplitWords(BasicBolt):
    outputs = ["id", "word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[1].split()[2:]:
            collector.emit([tup[0], word])


class RecordCounts(BasicBolt):
    """Counts a word by writing (message id, word, task, pid) to a table of the queue's
    file: what was counted survives the workers a rebalance replaces."""

    outputs: list[str] = []

    def __init__(self, path: str) -> None:
        self.path = path

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id
        self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS counted (id INTEGER, word TEXT, task INTEGER, pid INTEGER)"
        )

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.001)
        self.conn.execute(
            "INSERT INTO counted VALUES (?, ?, ?, ?)", (tup[0], tup[1], self.task, os.getpid())
        )


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def runs(values: list[int]) -> int:
    """How many runs of equal neighbours ``values`` has ([a, a, b, a] has 3)."""
    return sum(1 for i, v in enumerate(values) if i == 0 or values[i - 1] != v)


def test_a_running_word_count_goes_to_two_workers_and_back_losing_nothing(spark, tmp_path):
    path = str(tmp_path / "queue.db")
    n = 2000
    queue = SQLiteQueue(path)
    queue.put(
        f"message {i}: " + " ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(1 + i % 3))
        for i in range(n)
    )
    expected = sum(1 + i % 3 for i in range(n))  # words counted once each
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20), parallelism=1, tasks=2)
    b.set_bolt("split", SplitWords(), parallelism=1, tasks=2).shuffle_grouping("queue")
    b.set_bolt("count", RecordCounts(path), parallelism=1, tasks=4).fields_grouping(
        "split", ["word"]
    )
    conf = {
        Config.TOPOLOGY_WORKERS: 1,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 40,
    }
    done = lambda: queue.counts()["done"]  # noqa: E731
    with SparkCluster(spark) as cluster:
        cluster.submit_topology("wc", conf, b.create_topology())
        # More executors than tasks: refused before anything changes.
        with pytest.raises(InvalidTopologyError, match=r"'count' has 4 task\(s\).* not 5"):
            cluster.rebalance("wc", parallelism={"count": 5})
        assert cluster.topology_info("wc")["active"]
        wait_for(lambda: done() >= 300, 90, "300 messages on one worker")

        t0 = time.monotonic()
        cluster.rebalance("wc", workers=2, parallelism={"count": 2, "split": 2})
        print(f"rebalance to 2 took {time.monotonic() - t0:.1f} s at {done()} done")
        info = cluster.topology_info("wc")
        assert (info["workers"], info["active"], info["rebalancing"]) == (2, True, False)
        assert info["executors"] == {"queue": 1, "split": 2, "count": 2}
        assert sorted(cluster.workers("wc")) == [0, 1]
        summary = views.summary_entry("wc", info, cluster.metrics("wc"))
        assert (summary["workersTotal"], summary["status"]) == (2, "ACTIVE")
        at_two = done()
        wait_for(lambda: done() >= at_two + 300, 90, "300 more messages on two workers")

        t0 = time.monotonic()
        cluster.rebalance("wc", wait_secs=20, workers=1, parallelism={"count": 1, "split": 1})
        print(f"rebalance to 1 took {time.monotonic() - t0:.1f} s at {done()} done")
        assert cluster.topology_info("wc")["workers"] == 1 and len(cluster.workers("wc")) == 1
        wait_for(lambda: done() == n, 120, "every message done")
        # The metrics of every generation add up (the last report trails a little).
        wait_for(lambda: cluster.metrics("wc")["queue"]["acked"] >= n, 30, "every ack counted")
        errors = cluster.errors("wc")
    rows = sqlite3.connect(path).execute("SELECT id, word, task, pid FROM counted ORDER BY rowid")
    rows = rows.fetchall()
    queue.close()

    # Every message counted through; duplicates (a tree replayed after its timeout) are
    # bounded by what the spout may have in flight, and reported.
    assert {r[0] for r in rows} == set(range(1, n + 1))
    duplicates = len(rows) - expected
    print(f"rebalanced 1 -> 2 -> 1 workers: {len(rows)} counts, {duplicates} duplicates")
    assert 0 <= duplicates <= 2 * 2 * 40 * 3, duplicates
    # Fields grouping: a word goes to one task, before, between and after.
    tasks_of: dict[str, set[int]] = {}
    for _, word, task, _ in rows:
        tasks_of.setdefault(word, set()).add(task)
    assert all(len(t) == 1 for t in tasks_of.values()), tasks_of
    # One process at a time per task: its processes follow each other (three lives at
    # most: before, between and after the rebalances), never interleave.
    pids_of: dict[int, list[int]] = {}
    for _, _, task, pid in rows:
        pids_of.setdefault(task, []).append(pid)
    assert all(runs(pids) == len(set(pids)) <= 3 for pids in pids_of.values()), {
        t: runs(p) for t, p in pids_of.items()
    }
    assert len({pid for pids in pids_of.values() for pid in pids}) >= 3
    assert not [e for e in errors if "restarted" in e], errors
