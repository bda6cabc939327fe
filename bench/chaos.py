"""Soak under failure: a durable queue on SparkCluster, bolts that fail and raise at random,
and a random worker killed with SIGKILL every few seconds. Exits 1 if a message is lost.

    python bench/chaos.py 600                 # ten minutes of chaos, then a drain
    python bench/chaos.py 50 --drain 45 --standalone   # what .ci/run does
    python bench/chaos.py 30 --drain 45 --standalone --batch   # .ci/run's second soak

``--standalone`` runs it on a Spark standalone cluster of two "hosts" (a master and two
workers on 127.0.0.2 and 127.0.0.3, ``tupletree.spark.standalone``) whose executors'
own Python has no tupletree: it reaches them in the archive ``tupletree pack`` writes,
shipped with ``spark.archives``. Without it, on a local master (``local[2,4]``).

Messages go into the SQLite queue (``tupletree.connectors.sqlite_queue``) at ``--rate``
per second while the chaos lasts; the spout leases them, ``flaky`` fails some trees,
``raiser`` raises on some tuples (each fails its tree: replayed from the queue), and
``sink`` records every id it processes in a table of its own. With ``--batch`` the
raiser is a BatchBolt (docs/batch-bolts.md), fed Tuples by ``flaky`` and feeding Tuples
to ``sink``: a raise fails every tree of its batch, and batches cross workers as frame
runs, in and out. After the chaos the
producer and the killer stop and the run waits (up to ``--drain`` seconds) for the queue
to settle. Then:

- in: messages put; out: distinct ids the sink processed; lost: ids put that are not
  done in the queue or that the sink never saw (must be 0);
- duplicates: sink executions beyond the first for an id (at least once allows them);
- per sample: restarts per worker, the ackers' ledger size (trees held) and each
  current worker process's resident memory (at its last report).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tupletree import BasicBolt, BatchBolt, Bolt, Config, TopologyBuilder
from tupletree.cluster import RESTART
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout
from tupletree.distributed.processes import pid_alive

NAME = "chaos"


class Flaky(Bolt):
    """Fails a fraction of its tuples (their trees are replayed), passes on the rest."""

    outputs = ["id", "body"]

    def __init__(self, fail_rate: float) -> None:
        self.fail_rate = fail_rate

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.random = random.Random()

    def execute(self, tup: Any) -> None:
        if self.random.random() < self.fail_rate:
            self.collector.fail(tup)
            return
        self.collector.emit([tup[0], tup[1]], anchors=[tup])
        self.collector.ack(tup)


class Raiser(BasicBolt):
    """Raises on a fraction of its tuples (reported; the tree fails and is replayed)."""

    outputs = ["id", "body"]

    def __init__(self, raise_rate: float) -> None:
        self.raise_rate = raise_rate

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.random = random.Random()

    def execute(self, tup: Any, collector: Any) -> None:
        if self.random.random() < self.raise_rate:
            raise ValueError(f"chaos: refusing message {tup[0]}")
        collector.emit([tup[0], tup[1]])


class BatchRaiser(BatchBolt):
    """Raiser as a BatchBolt: a fraction of its batches raise (every tree in the batch
    fails and is replayed); the others pass every row on, anchored to it."""

    outputs = ["id", "body"]

    def __init__(self, raise_rate: float) -> None:
        self.raise_rate = raise_rate

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.random = random.Random()

    def execute_batch(self, batch: Any, collector: Any) -> None:
        if self.random.random() < self.raise_rate:
            raise ValueError(f"chaos: refusing a batch of {len(batch)} message(s)")
        for i, (msg_id, body) in enumerate(batch):
            collector.emit([msg_id, body], row=i)


class Sink(BasicBolt):
    """Records each id it processes (with its process) in the sink's own SQLite file."""

    outputs: list[str] = []

    def __init__(self, path: str) -> None:
        self.path = path

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS seen (id INTEGER, pid INTEGER)")

    def execute(self, tup: Any, collector: Any) -> None:
        self.conn.execute("INSERT INTO seen VALUES (?, ?)", (tup[0], os.getpid()))


def topology(
    queue_path: str,
    sink_path: str,
    fail_rate: float,
    raise_rate: float,
    batch: bool = False,
    trees: bool = False,
) -> Any:
    b = TopologyBuilder()
    spout = SQLiteQueueSpout(queue_path, batch=50, messages_per_tree=50 if trees else 1)
    b.set_spout("queue", spout, parallelism=2)
    b.set_bolt("flaky", Flaky(fail_rate), parallelism=2).shuffle_grouping("queue")
    raiser = BatchRaiser(raise_rate) if batch else Raiser(raise_rate)
    b.set_bolt("raiser", raiser, parallelism=2).shuffle_grouping("flaky")
    b.set_bolt("sink", Sink(sink_path), parallelism=2).fields_grouping("raiser", ["id"])
    return b.create_topology()


class Producer(threading.Thread):
    """Puts ``rate`` messages a second into the queue until stopped."""

    def __init__(self, path: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.rate = rate
        self.put = 0
        self.stop = threading.Event()

    def run(self) -> None:
        queue = SQLiteQueue(self.path)
        start = time.monotonic()
        while not self.stop.wait(0.1):
            due = int((time.monotonic() - start) * self.rate) - self.put
            if due > 0:
                queue.put(f"message {self.put + i}" for i in range(due))
                self.put += due
        queue.close()


def sink_counts(path: str) -> tuple[set[int], int]:
    """(distinct ids the sink processed, executions in all)."""
    if not Path(path).exists():
        return set(), 0
    conn = sqlite3.connect(path, timeout=30.0)
    try:
        rows = conn.execute("SELECT id FROM seen").fetchall()
    except sqlite3.OperationalError:  # no table yet
        rows = []
    conn.close()
    return {r[0] for r in rows}, len(rows)


def sample(cluster: Any, queue: SQLiteQueue, producer: Producer, t0: float, sink: str) -> str:
    counts = queue.counts()
    seen, _ = sink_counts(sink)
    restarts = cluster.worker_restarts(NAME)
    metrics = cluster.metrics(NAME)
    ledger = metrics["__acker"].get("pending", "n/a") if "__acker" in metrics else "n/a"
    memory = " ".join(
        f"w{i}:{rss / 2**20:.0f}" if (rss := w["rss_bytes"]) is not None else f"w{i}:-"
        for i, w in sorted(cluster.worker_stats(NAME).items())
    )
    return (
        f"{time.monotonic() - t0:7.0f} s  in {producer.put:>8,}  done {counts['done']:>8,}  "
        f"sink {len(seen):>8,}  restarts {dict(sorted(restarts.items()))}  "
        f"ledger {ledger}  rss MiB {memory}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("duration", type=float, help="seconds of chaos")
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between kills")
    # Under a kill every 5 s on this 2-core machine the topology keeps up with ~50/s; a
    # higher rate builds a backlog the drain may not clear (reported as lost).
    parser.add_argument("--rate", type=float, default=50.0, help="messages put per second")
    parser.add_argument("--fail-rate", type=float, default=0.03)
    parser.add_argument("--raise-rate", type=float, default=0.03)
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to settle after")
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--standalone", action="store_true", help="on a standalone cluster of two hosts"
    )
    parser.add_argument("--batch", action="store_true", help="the raiser as a BatchBolt")
    parser.add_argument(
        "--trees",
        action="store_true",
        help="the spout emits up to 50 leased messages as one tree (messages_per_tree)",
    )
    args = parser.parse_args(argv)

    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import build_local_session

    tmp = tempfile.mkdtemp(prefix="tupletree-chaos-")
    standalone = None
    try:
        if args.standalone:
            standalone, spark = start_standalone(Path(tmp))
        else:
            spark = build_local_session(2)
    except SparkUnavailableError as exc:  # as the Spark tests do: skip, with the reason
        print(f"chaos: skipped: {exc}")
        return 0
    try:
        return soak(args, spark, tmp)
    finally:
        spark.stop()
        if standalone is not None:
            standalone.stop()


def start_standalone(where: Path) -> tuple[Any, Any]:
    """A master and two 1-core workers on 127.0.0.2/.3, executors on a bare Python, and
    a session on it that ships them ``tupletree pack``'s archive."""
    import subprocess

    from tupletree.spark.pack import ARCHIVE_NAME, pack
    from tupletree.spark.session import build_session
    from tupletree.spark.standalone import StandaloneCluster

    started = time.monotonic()
    packed = pack(where / "env.tar.gz")
    bare = where / "executor-venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    cluster = StandaloneCluster(
        workers=2, cores=1, executor_python=bare / "bin" / "python3", log_dir=where / "spark"
    )
    cluster.start()
    try:
        conf = {
            **cluster.session_conf(),
            "spark.archives": f"{packed.path}#{ARCHIVE_NAME}",
            "spark.pyspark.python": f"./{ARCHIVE_NAME}/bin/python",
        }
        spark = build_session(cluster.url, conf=conf)
    except BaseException:
        cluster.stop()
        raise
    print(
        f"chaos: standalone {cluster.url}, workers on {', '.join(cluster.hosts)}, "
        f"executors on {packed.path.name} ({packed.size / 2**20:.1f} MB), "
        f"up in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    return cluster, spark


def soak(args: argparse.Namespace, spark: Any, tmp: str) -> int:
    """The chaos on ``spark``'s cluster, then the drain and the verdict."""
    from tupletree.spark.cluster import SparkCluster

    rng = random.Random(args.seed)
    queue_path, sink_path = os.path.join(tmp, "queue.db"), os.path.join(tmp, "sink.db")
    queue = SQLiteQueue(queue_path)
    spark.sparkContext.setLogLevel("FATAL")
    conf = {
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_ACKER_EXECUTORS: 2,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 200,
    }
    producer = Producer(queue_path, args.rate)
    kills = 0
    with SparkCluster(spark) as cluster:
        cluster.submit_topology(
            NAME,
            conf,
            topology(
                queue_path, sink_path, args.fail_rate, args.raise_rate, args.batch, args.trees
            ),
        )
        t0 = time.monotonic()
        print(
            f"chaos: {args.duration:.0f} s, a worker killed every {args.kill_every:g} s, "
            f"{args.rate:g} messages/s, fail {args.fail_rate:g}, raise {args.raise_rate:g}"
            f"{' (the raiser a BatchBolt)' if args.batch else ''}"
            f"{' (up to 50 messages a tree)' if args.trees else ''}",
            flush=True,
        )
        producer.start()
        next_kill = t0 + args.kill_every
        next_sample = t0
        end = t0 + args.duration
        while (now := time.monotonic()) < end:
            if now >= next_kill:
                workers = cluster.workers(NAME)
                victim = rng.choice(sorted(workers))
                pid = workers[victim].pid
                if pid_alive(pid):  # not being restarted
                    os.kill(pid, signal.SIGKILL)
                    kills += 1
                next_kill = now + args.kill_every
            if now >= next_sample:
                print(sample(cluster, queue, producer, t0, sink_path), flush=True)
                next_sample = now + args.sample_every
            time.sleep(0.1)
        producer.stop.set()
        producer.join()
        print(f"chaos over: {kills} kills; draining (up to {args.drain:g} s)", flush=True)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline:
            if queue.counts()["done"] == producer.put:
                break
            if time.monotonic() >= next_sample:
                print(sample(cluster, queue, producer, t0, sink_path), flush=True)
                next_sample = time.monotonic() + args.sample_every
            time.sleep(0.5)
        print(sample(cluster, queue, producer, t0, sink_path), flush=True)
        restarts = cluster.worker_restarts(NAME)
        task_errors = cluster.error_records(NAME)
        events = cluster.worker_events(NAME)
        hosts = sorted({w["host"] for w in cluster.worker_stats(NAME).values()})
        addresses = sorted(w.address for w in cluster.workers(NAME).values())
        cluster.kill_topology(NAME)

    done = {
        r[0]
        for r in sqlite3.connect(queue_path).execute("SELECT id FROM messages WHERE state='done'")
    }
    seen, executions = sink_counts(sink_path)
    ids = set(range(1, producer.put + 1))
    lost = ids - (done & seen)
    print(f"in {producer.put:,}  out {len(seen & ids):,}  lost {len(lost):,}")
    print(f"duplicates {executions - len(seen):,} (sink executions beyond the first per id)")
    print(f"kills {kills}  restarts per worker {dict(sorted(restarts.items()))}")
    print(f"on {spark.sparkContext.master}: workers at {', '.join(addresses)} ({', '.join(hosts)})")
    restarted = sum(1 for e in events if e.kind == RESTART)
    print(
        f"errors kept: {len(task_errors)} of tasks, {len(events) - restarted} of workers, "
        f"and {restarted} restarts"
    )
    if lost:
        print(f"LOST: {sorted(lost)[:20]} ...", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
