"""Orders from a RabbitMQ queue, shouted, into another queue: at least once, end to end.

``topology()`` declares the queues ``tupletree-orders``, ``tupletree-shouted`` and
``tupletree-orders-dead`` (purged) and publishes MESSAGES orders, then builds:
RabbitMQSpout -> ``shout`` (upper-cases, failing one message in ten at random to show
replays) -> RabbitMQSink (publisher confirms). A message is acknowledged on the channel
that delivered it only once its shouted copy was confirmed by the broker; a failed one
is replayed after its backoff, and after 5 failures it goes to the dead-letter queue.
Needs RabbitMQ on 127.0.0.1:5672 (guest/guest).

    tupletree run --local examples/rabbitmq_queue.py   # in-process
    tupletree run examples/rabbitmq_queue.py           # on local Spark, 2 workers
"""

from __future__ import annotations

import random
from typing import Any

from tupletree import BasicBolt, Config, FailedException, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals
from tupletree.connectors.rabbitmq import RabbitMQSink, RabbitMQSpout

URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
SOURCE, OUTPUT, DEAD = "tupletree-orders", "tupletree-shouted", "tupletree-orders-dead"
MESSAGES = 10_000


class Shout(BasicBolt):
    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if self.rng.random() < 0.1:
            raise FailedException("a simulated failure: the spout replays this order")
        collector.emit([tup.get("message").upper()])


def _channel() -> Any:
    import pika

    return pika.BlockingConnection(pika.URLParameters(URL)).channel()


def fill(messages: int = MESSAGES) -> None:
    """Fresh queues; the source holding ``messages`` orders."""
    channel = _channel()
    for queue in (SOURCE, OUTPUT, DEAD):
        channel.queue_declare(queue, durable=True)
        channel.queue_purge(queue)
    for i in range(messages):
        channel.basic_publish("", SOURCE, f"order {i}".encode())
    channel.connection.close()


def topology(messages: int = MESSAGES) -> Any:
    fill(messages)
    builder = TopologyBuilder()
    spout = RabbitMQSpout(
        SOURCE,
        URL,
        retry=RetryPolicy(max_retries=5, initial_delay_secs=0.05, max_delay_secs=1.0),
        dead_letter=DEAD,
    )
    builder.set_spout("orders", spout, parallelism=2)
    builder.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("orders")
    builder.set_bolt("shouted", RabbitMQSink(OUTPUT, URL), parallelism=2).shuffle_grouping("shout")
    return builder.create_topology()


CONF = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000}


def report(metrics: dict[str, Any]) -> str:
    channel = _channel()
    counts = {
        q: channel.queue_declare(q, passive=True).method.message_count
        for q in (SOURCE, OUTPUT, DEAD)
    }
    channel.connection.close()
    return "\n".join(
        [
            f"queues (ready messages): {counts}",
            f"spout: {connector_totals(metrics['orders'])}",
            f"sink: {connector_totals(metrics['shouted'])}",
        ]
    )
