"""Trident under failure: Kafka -> word count -> PostgreSQL on SparkCluster, a random
worker killed with SIGKILL every few seconds. Exits 1 unless the table's counts equal
the true counts.

    python bench/trident_chaos.py 120                 # two minutes of chaos, then a drain
    python bench/trident_chaos.py 20 --kill-every 6   # what tests/trident/test_chaos.py does

A producer writes sentences to a new topic (3 partitions) at ``--rate`` per second while
the chaos lasts. The topology is examples/trident_kafka_postgres.py's: the opaque Kafka
spout (2 tasks), split, group by word, ``persistent_aggregate`` into
``PostgresMapState.opaque``, the coordinator's progress in PostgreSQL; 2 workers. Every
``--kill-every`` seconds one worker (the coordinator's, a spout's, a state's: whichever
the dice pick) is killed; Spark restarts it, the coordinator resumes at the first
uncommitted txid, replayed batches are recomputed by the opaque state. After the chaos
the producer stops and the run waits (up to ``--drain`` seconds) for the table to hold
the true counts of everything written. Prints samples (sentences written, words counted,
the coordinator's txid, restarts) and the verdict.

Broker: $TUPLETREE_KAFKA or a throwaway tansu; PostgreSQL: $TUPLETREE_POSTGRES or
``postgresql://postgres@127.0.0.1:5432/test``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
NAME = "trident-chaos"


def example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "trident_kafka_postgres", ROOT / "examples" / "trident_kafka_postgres.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["trident_kafka_postgres"] = module
    spec.loader.exec_module(module)
    return module


class Producer(threading.Thread):
    """Writes ``rate`` sentences a second (sentence i of the example) until stopped."""

    def __init__(self, ex: Any, rate: float) -> None:
        super().__init__(daemon=True)
        self.ex, self.rate = ex, rate
        self.written = 0
        self.stop = threading.Event()

    def run(self) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": self.ex.servers(), "linger.ms": 5}
        )
        start = time.monotonic()
        while not self.stop.wait(0.1):
            due = int((time.monotonic() - start) * self.rate) - self.written
            for i in range(self.written, self.written + max(0, due)):
                producer.produce(self.ex.TOPIC, self.ex.sentence(i).encode(), partition=i % 3)
            producer.flush(30)
            self.written += max(0, due)


def coordinator(cluster: Any) -> dict[str, Any]:
    custom = cluster.metrics(NAME).get("__mastercoord-bg0", {}).get("custom", {})
    views = list(custom.get("trident", {}).values())
    return views[0] if views else {}


def sample(cluster: Any, ex: Any, producer: Producer, t0: float) -> str:
    got = ex.table_counts()
    c = coordinator(cluster)
    restarts = cluster.worker_restarts(NAME)
    return (
        f"{time.monotonic() - t0:6.0f} s  sentences {producer.written:>7,}  words counted "
        f"{sum(got.values()):>8,}  txid {c.get('currentTxid', '-')} (resumed at "
        f"{c.get('resumedAt', '-')}, replayed {c.get('replayed', '-')})  restarts "
        f"{dict(sorted(restarts.items()))}"
    )


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    """The run; ``spark``: a session to use (and leave running), else one of its own."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("duration", type=float, help="seconds of chaos")
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=200.0, help="sentences written per second")
    parser.add_argument("--drain", type=float, default=180.0)
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)

    from tupletree.spark.cluster import SparkCluster
    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import build_local_session

    own = spark is None
    if own:
        try:
            spark = build_local_session(2)
        except SparkUnavailableError as exc:
            print(f"trident chaos: skipped: {exc}")
            return 0
        spark.sparkContext.setLogLevel("FATAL")
    ex = example()
    ex.TABLE = f"trident_chaos_{ex.RUN}"  # a table of this run's own
    ex.fill(0)  # the topic, an empty table
    rng = random.Random(args.seed)
    conf = {
        **ex.CONF,
        "topology.acker.executors": 2,
        "topology.message.timeout.secs": 10,
    }
    producer = Producer(ex, args.rate)
    kills = 0
    exact = False
    with SparkCluster(spark) as cluster:
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules["trident_kafka_postgres"])
        built = _topology(ex)
        cluster.submit_topology(NAME, conf, built)
        t0 = time.monotonic()
        print(
            f"trident chaos: {args.duration:.0f} s, a worker killed every {args.kill_every:g} s, "
            f"{args.rate:g} sentences/s",
            flush=True,
        )
        producer.start()
        next_kill, next_sample, end = t0 + args.kill_every, t0, t0 + args.duration
        while (now := time.monotonic()) < end:
            if now >= next_kill:
                workers = cluster.workers(NAME)
                victim = rng.choice(sorted(workers))
                try:
                    os.kill(workers[victim].pid, signal.SIGKILL)
                    kills += 1
                except ProcessLookupError:
                    pass  # being restarted already
                next_kill = now + args.kill_every
            if now >= next_sample:
                print(sample(cluster, ex, producer, t0), flush=True)
                next_sample = now + args.sample_every
            time.sleep(0.1)
        producer.stop.set()
        producer.join()
        want = dict(Counter(w for i in range(producer.written) for w in ex.sentence(i).split()))
        print(f"chaos over: {kills} kills; draining (up to {args.drain:g} s)", flush=True)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline:
            if ex.table_counts() == want:
                exact = True
                break
            if time.monotonic() >= next_sample:
                print(sample(cluster, ex, producer, t0), flush=True)
                next_sample = time.monotonic() + args.sample_every
            time.sleep(0.5)
        print(sample(cluster, ex, producer, t0), flush=True)
        restarts = cluster.worker_restarts(NAME)
        cluster.kill_topology(NAME)
    if own:
        spark.stop()
    got = ex.table_counts()
    ex.drop_table()
    over = {w: got.get(w, 0) - n for w, n in want.items() if got.get(w, 0) > n}
    under = {w: n - got.get(w, 0) for w, n in want.items() if got.get(w, 0) < n}
    print(
        f"sentences {producer.written:,}, words {sum(want.values()):,}, counted "
        f"{sum(got.values()):,}; kills {kills}, restarts {dict(sorted(restarts.items()))}; "
        f"counted twice {sum(over.values())}, missing {sum(under.values())}: "
        f"{'EXACT' if exact else 'NOT EXACT'}"
    )
    return 0 if exact else 1


def _topology(ex: Any) -> Any:
    """The example's topology, without writing sentences up front (the producer does)."""
    from tupletree import Fields
    from tupletree.connectors.kafka import KafkaTridentSpoutOpaque
    from tupletree.trident import TridentTopology
    from tupletree.trident.builtin import Count
    from tupletree.trident.state import PostgresMapState

    spout = KafkaTridentSpoutOpaque(ex.TOPIC, ex.GROUP, ex.servers(), max_batch_size=500)
    t = TridentTopology()
    (
        t.new_stream(f"sentences-{ex.RUN}", spout)
        .parallelism_hint(2)
        .each(Fields("message"), ex.Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(PostgresMapState.opaque(ex.dsn(), ex.TABLE), Count(), Fields("count"))
        .parallelism_hint(2)
    )
    return t.build()


if __name__ == "__main__":
    sys.exit(main())
