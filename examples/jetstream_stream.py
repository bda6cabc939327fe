"""Orders from a NATS JetStream stream, shouted, into another stream: at least once.

``topology()`` (re)creates the streams ``TUPLETREE_ORDERS`` (subject
``tupletree.orders``), ``TUPLETREE_SHOUTED`` and ``TUPLETREE_DEAD`` and publishes
MESSAGES orders, then builds: JetStreamSpout (the durable pull consumer ``tupletree``,
created by the spout) -> ``shout`` (upper-cases, failing one message in ten at random
to show replays) -> JetStreamSink (JetStream-acked publishes). A message is acked once
its shouted copy was stored; a failed one is nak'ed with its backoff delay and
redelivered by the server, and after 5 failures it is published to the dead-letter
subject and terminated. Needs nats-server -js on 127.0.0.1:4222.

    tupletree run --local examples/jetstream_stream.py   # in-process
    tupletree run examples/jetstream_stream.py           # on local Spark, 2 workers
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any

from tupletree import BasicBolt, Config, FailedException, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals
from tupletree.connectors.nats import JetStreamSink, JetStreamSpout

SERVER = "nats://127.0.0.1:4222"
STREAMS = {
    "TUPLETREE_ORDERS": "tupletree.orders",
    "TUPLETREE_SHOUTED": "tupletree.shouted",
    "TUPLETREE_DEAD": "tupletree.dead",
}
SOURCE, DURABLE = "TUPLETREE_ORDERS", "tupletree"
MESSAGES = 10_000


class Shout(BasicBolt):
    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if self.rng.random() < 0.1:
            raise FailedException("a simulated failure: the spout replays this order")
        collector.emit([tup.get("message").upper()])


async def _fill(messages: int) -> None:
    import nats

    nc = await nats.connect(SERVER)
    js = nc.jetstream()
    for name, subject in STREAMS.items():
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(name)
        await js.add_stream(name=name, subjects=[subject])
    for start in range(0, messages, 1000):
        await asyncio.gather(
            *(
                js.publish(STREAMS[SOURCE], f"order {i}".encode())
                for i in range(start, min(messages, start + 1000))
            )
        )
    await nc.close()


def topology(messages: int = MESSAGES) -> Any:
    asyncio.run(_fill(messages))
    builder = TopologyBuilder()
    spout = JetStreamSpout(
        SOURCE,
        DURABLE,
        SERVER,
        retry=RetryPolicy(max_retries=5, initial_delay_secs=0.05, max_delay_secs=1.0),
        dead_letter=STREAMS["TUPLETREE_DEAD"],
    )
    builder.set_spout("orders", spout, parallelism=2)
    builder.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("orders")
    sink = JetStreamSink(STREAMS["TUPLETREE_SHOUTED"], SERVER)
    builder.set_bolt("shouted", sink, parallelism=2).shuffle_grouping("shout")
    return builder.create_topology()


CONF = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000}


async def _state() -> tuple[Any, dict[str, int]]:
    import nats

    nc = await nats.connect(SERVER)
    js = nc.jetstream()
    consumer = await js.consumer_info(SOURCE, DURABLE)
    sizes = {name: (await js.stream_info(name)).state.messages for name in STREAMS}
    await nc.close()
    return consumer, sizes


def report(metrics: dict[str, Any]) -> str:
    consumer, sizes = asyncio.run(_state())
    return "\n".join(
        [
            f"source {SOURCE}: {consumer.num_pending} not yet delivered, "
            f"{consumer.num_ack_pending} delivered and unacknowledged",
            f"streams: {sizes}",
            f"spout: {connector_totals(metrics['orders'])}",
            f"sink: {connector_totals(metrics['shouted'])}",
        ]
    )
