"""Orders from a Redis Stream, shouted, into another stream: at least once, end to end.

``topology()`` puts MESSAGES entries in the stream ``tupletree-orders`` (creating it and
the consumer group ``tupletree``), then builds: RedisStreamSpout (the group) -> ``shout``
(upper-cases, failing one message in ten at random to show replays) -> RedisStreamSink
(the stream ``tupletree-shouted``). An entry is acknowledged in its group (XACK) only
once its shouted copy was written; a failed one is replayed after its backoff, and
after 5 failures it goes to ``tupletree-orders-dead``. Needs Redis on 127.0.0.1:6379.

    tupletree run --local examples/redis_streams.py   # in-process
    tupletree run examples/redis_streams.py           # on local Spark, 2 workers
"""

from __future__ import annotations

import random
from typing import Any

from tupletree import BasicBolt, Config, FailedException, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals
from tupletree.connectors.redis import RedisStreamSink, RedisStreamSpout

URL = "redis://127.0.0.1:6379/0"
SOURCE, GROUP, OUTPUT, DEAD = (
    "tupletree-orders",
    "tupletree",
    "tupletree-shouted",
    "tupletree-orders-dead",
)
MESSAGES = 10_000


class Shout(BasicBolt):
    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if self.rng.random() < 0.1:
            raise FailedException("a simulated failure: the spout replays this order")
        collector.emit([tup.get("message").upper()])


def fill(messages: int = MESSAGES) -> None:
    """A fresh source stream with its consumer group, holding ``messages`` entries."""
    import redis

    r = redis.Redis.from_url(URL)
    r.delete(SOURCE, OUTPUT, DEAD)
    r.xgroup_create(SOURCE, GROUP, id="0", mkstream=True)
    pipe = r.pipeline(transaction=False)
    for i in range(messages):
        pipe.xadd(SOURCE, {"message": f"order {i}"})
    pipe.execute()
    r.close()


def topology(messages: int = MESSAGES) -> Any:
    fill(messages)
    builder = TopologyBuilder()
    spout = RedisStreamSpout(
        SOURCE,
        GROUP,
        URL,
        retry=RetryPolicy(max_retries=5, initial_delay_secs=0.05, max_delay_secs=1.0),
        dead_letter=DEAD,
        claim_idle_secs=90,
    )
    builder.set_spout("orders", spout, parallelism=2)
    builder.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("orders")
    builder.set_bolt("shouted", RedisStreamSink(OUTPUT, URL), parallelism=2).shuffle_grouping(
        "shout"
    )
    return builder.create_topology()


CONF = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000}


def report(metrics: dict[str, Any]) -> str:
    import redis

    r = redis.Redis.from_url(URL)
    pending = r.xpending(SOURCE, GROUP)["pending"]
    lines = [
        f"source {SOURCE}: {pending} entries pending in group {GROUP!r}",
        f"output {OUTPUT}: {r.xlen(OUTPUT)} entries; dead letters: {r.xlen(DEAD)}",
        f"spout: {connector_totals(metrics['orders'])}",
        f"sink: {connector_totals(metrics['shouted'])}",
    ]
    r.close()
    return "\n".join(lines)
