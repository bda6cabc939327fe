"""The SQLite queue's spout end to end, by tree size: ``python bench/sqlite_queue.py
[--messages N] [--repeat R] [--per-tree K ...]``.

N messages are put in a fresh queue file; a tracked topology (SQLiteQueueSpout ->
a bolt that acks each message -> done) on a real-time LocalCluster moves them until
the queue says every one is done. With ``--per-tree K`` the spout emits up to K leased
messages as one tree (``messages_per_tree``), so an ack marks K messages done in one
transaction. Max spout pending is 1,000 messages whatever K (1,000 / K trees). Sizes
alternate R times (this VM's speed drifts); prints the median messages/s of each and
every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupletree import BasicBolt, LocalCluster, TopologyBuilder, compiled
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout

IN_FLIGHT = 1000
DEADLINE_SECS = 600


class Done(BasicBolt):
    """Acks each message (BasicBolt acks on return)."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def rate(n: int, per_tree: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "queue.db")
        queue = SQLiteQueue(path)
        queue.put(f"message {i}" for i in range(n))
        b = TopologyBuilder()
        b.set_spout("queue", SQLiteQueueSpout(path, batch=100, messages_per_tree=per_tree))
        b.set_bolt("done", Done()).shuffle_grouping("queue")
        conf = {"topology.max.spout.pending": max(1, IN_FLIGHT // per_tree)}
        with LocalCluster() as cluster:
            start = time.perf_counter()
            cluster.submit_topology("bench", conf, b.create_topology())
            while queue.counts()["done"] < n:
                if time.perf_counter() - start > DEADLINE_SECS:
                    raise SystemExit(f"not done after {DEADLINE_SECS} s: {queue.counts()}")
                time.sleep(0.02)
            elapsed = time.perf_counter() - start
            errors = cluster.errors("bench")
        queue.close()
    if errors:
        raise SystemExit(f"the topology reported errors: {errors[:3]}")
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-tree", type=int, default=[], action="append")
    args = parser.parse_args()
    sizes = args.per_tree or [1, 100]
    print(f"tupletree SQLite queue, {compiled.describe()}, {args.messages} messages per run")
    runs: dict[int, list[float]] = {size: [] for size in sizes}
    for _ in range(args.repeat):
        for size in sizes:
            runs[size].append(rate(args.messages, size))
    for size in sizes:
        every = ", ".join(f"{r:,.0f}" for r in runs[size])
        print(
            f"{size} message(s) a tree: {statistics.median(runs[size]):,.0f} msg/s "
            f"(median; runs: {every})"
        )


if __name__ == "__main__":
    main()
