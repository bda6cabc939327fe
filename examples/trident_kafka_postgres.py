"""Sentences from Kafka counted by word into PostgreSQL, exactly once.

    python examples/trident_kafka_postgres.py           # LocalCluster, prints the check
    tupletree run examples/trident_kafka_postgres.py     # on local Spark, 2 workers

``topology()`` writes SENTENCES sentences to a new topic (3 partitions) and builds:
KafkaTridentSpoutOpaque (2 tasks, read_committed) -> split into words -> group by word
-> ``persistent_aggregate`` into ``PostgresMapState.opaque`` (the table
``trident_word_counts``: one row per word, Storm's opaque value ``{"currTxid", "curr",
"prev"}``). An opaque spout with an opaque state is exactly once: a batch replayed after
a failure (a worker killed, a database hiccup) is recomputed from the value before it,
never added twice. The coordinator's progress (txids, each partition's offsets per
batch) is kept in PostgreSQL too, so it outlives any worker.

``report()`` reads the table and compares it with the true counts of what was written.

Where things are: the broker at $TUPLETREE_KAFKA (``host:port``) if set, else a
throwaway tansu broker started for this run; PostgreSQL at $TUPLETREE_POSTGRES (a DSN),
else ``postgresql://postgres@127.0.0.1:5432/test``.
"""

from __future__ import annotations

import atexit
import json
import os
import time
import uuid
from collections import Counter
from typing import Any

from tupletree import Config, Fields, LocalCluster
from tupletree.connectors.kafka import KafkaTridentSpoutOpaque
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.operation import BaseFunction
from tupletree.trident.state import PostgresMapState

SENTENCES = 20_000
TABLE = "trident_word_counts"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "dwarfs",
    "sing",
]
RUN = uuid.uuid4().hex[:8]  # a topic, group and progress of this run's own
TOPIC, GROUP = f"tupletree-sentences-{RUN}", f"tupletree-{RUN}"
_servers: list[str] = []


def servers() -> str:
    if not _servers:
        if "TUPLETREE_KAFKA" in os.environ:
            _servers.append(os.environ["TUPLETREE_KAFKA"])
        else:
            from tupletree.connectors.kafka.local_broker import LocalKafkaBroker

            broker = LocalKafkaBroker().start()
            atexit.register(broker.stop)
            _servers.append(broker.bootstrap_servers)
    return _servers[0]


def dsn() -> str:
    return os.environ.get("TUPLETREE_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def sentence(i: int) -> str:
    return " ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(1 + i % 7))


def true_counts(n: int = SENTENCES) -> dict[str, int]:
    return dict(Counter(w for i in range(n) for w in sentence(i).split()))


def fill(n: int) -> None:
    """Create this run's topic and write ``n`` sentences; start with an empty table."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers()})
    for future in admin.create_topics([NewTopic(TOPIC, 3)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": servers(), "linger.ms": 5})
    for i in range(n):
        producer.produce(TOPIC, sentence(i).encode(), partition=i % 3)
        if i % 2000 == 1999:
            producer.flush(30)
    producer.flush(30)
    drop_table()


def drop_table() -> None:
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


class Split(BaseFunction):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup.get("message").split():
            collector.emit([word])


def topology(sentences: int = SENTENCES) -> Any:
    fill(sentences)
    spout = KafkaTridentSpoutOpaque(TOPIC, GROUP, servers(), max_batch_size=500)
    t = TridentTopology()
    (
        t.new_stream(f"sentences-{RUN}", spout)
        .parallelism_hint(2)
        .each(Fields("message"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(PostgresMapState.opaque(dsn(), TABLE), Count(), Fields("count"))
        .parallelism_hint(2)
    )
    return t.build()


CONF = {
    Config.TOPOLOGY_WORKERS: 2,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
    Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 50,
    Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: "postgresql",
    Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: {"dsn": dsn(), "prefix": "tupletree_trident_"},
}


def table_counts() -> dict[str, int]:
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        try:
            rows = conn.execute(f"SELECT key, value FROM {TABLE}").fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
    out = {}
    for key, value in rows:
        word = json.loads(key)[0]
        if str(word).startswith("$tupletree"):
            continue  # the opaque map's own record of the current batch's keys
        value = value if isinstance(value, dict) else json.loads(value)
        out[word] = value["curr"]
    return out


def report(metrics: dict[str, Any] | None = None, n: int = SENTENCES) -> str:
    got, want = table_counts(), true_counts(n)
    verdict = "exact" if got == want else "NOT exact"
    return f"{TABLE}: {sum(got.values()):,} words counted of {sum(want.values()):,}: {verdict}"


def main(n: int = SENTENCES) -> bool:
    want = true_counts(n)
    with LocalCluster() as cluster:
        cluster.submit_topology("kafka-postgres", CONF, topology(n))
        deadline = time.monotonic() + 300
        while table_counts() != want and time.monotonic() < deadline:
            time.sleep(0.5)
    print(report(n=n))
    return table_counts() == want


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
