"""Broker connectors on SparkCluster with 2 workers: a worker SIGKILLed mid-run loses
nothing, its messages come back through the broker (Redis: the restarted task re-reads
its consumer's pending entries, others claim them after claim_idle_secs; RabbitMQ: the
broker requeues what the dead connection held)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

import pytest

from tests.connectors.support import until
from tupletree import BasicBolt, Config, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals
from tupletree.spark.cluster import SparkCluster

pytestmark = pytest.mark.spark

N = 1500
CONF = {
    Config.TOPOLOGY_WORKERS: 2,
    Config.TOPOLOGY_ACKER_EXECUTORS: 2,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 50,
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 2,
}


class SlowPass(BasicBolt):
    """Passes each message on, slowly enough that a worker can be killed mid-run."""

    outputs = ["message"]

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.002)
        collector.emit([tup[0]])


def topology(spout: Any, sink: Any) -> Any:
    b = TopologyBuilder()
    b.set_spout("source", spout, parallelism=2)
    b.set_bolt("pass", SlowPass(), parallelism=2).shuffle_grouping("source")
    b.set_bolt("sink", sink, parallelism=2).shuffle_grouping("pass")
    return b.create_topology()


def kill_a_worker_midway(cluster: SparkCluster, name: str, written: Any) -> None:
    assert until(lambda: written() >= N // 4, 120), "a quarter of the messages written"
    victim = cluster.workers(name)[1]
    os.kill(victim.pid, signal.SIGKILL)
    assert until(lambda: cluster.workers(name)[1].attempt > victim.attempt, 90), (
        "the retried worker"
    )


@pytest.fixture
def cluster(spark: Any) -> Any:
    with SparkCluster(spark) as c:
        yield c


def test_redis_stream_source_loses_nothing_when_a_worker_is_killed(
    cluster: SparkCluster,
) -> None:
    redis = pytest.importorskip("redis")
    from tupletree.connectors.redis import RedisStreamSink, RedisStreamSpout

    url = "redis://127.0.0.1:6379/0"
    r = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        r.ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis at {url} ({exc})")
    tag = uuid.uuid4().hex[:10]
    src, out = f"tt-spark-src-{tag}", f"tt-spark-out-{tag}"
    r.xgroup_create(src, "g", id="0", mkstream=True)
    pipe = r.pipeline(transaction=False)
    for i in range(N):
        pipe.xadd(src, {"message": f"m{i}"})
    pipe.execute()
    bodies = {f"m{i}" for i in range(N)}

    def written() -> set[str]:
        return {fields[b"message"].decode() for _, fields in r.xrange(out)}

    spout = RedisStreamSpout(
        src, "g", url, claim_idle_secs=6, retry=RetryPolicy(max_delay_secs=0.5)
    )
    try:
        cluster.submit_topology("redis-kill", CONF, topology(spout, RedisStreamSink(out, url)))
        kill_a_worker_midway(cluster, "redis-kill", lambda: r.xlen(out))
        assert until(lambda: written() == bodies, 180), "every message written"
        assert until(lambda: r.xpending(src, "g")["pending"] == 0, 60), "nothing pending"
        totals = connector_totals(cluster.metrics("redis-kill")["source"])
        assert totals["redelivered"] > 0, "nothing came back through the broker: the kill missed"
        cluster.kill_topology("redis-kill")
    finally:
        r.delete(src, out)


def test_rabbitmq_source_loses_nothing_when_a_worker_is_killed(cluster: SparkCluster) -> None:
    pika = pytest.importorskip("pika")
    from tupletree.connectors.rabbitmq import RabbitMQSink, RabbitMQSpout

    url = "amqp://guest:guest@127.0.0.1:5672/%2F"
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
    except pika.exceptions.AMQPError as exc:
        pytest.skip(f"no RabbitMQ at 127.0.0.1:5672 ({exc!r})")
    channel = conn.channel()
    tag = uuid.uuid4().hex[:10]
    src, out = f"tt-spark-src-{tag}", f"tt-spark-out-{tag}"
    channel.queue_declare(src)
    channel.queue_declare(out)
    for i in range(N):
        channel.basic_publish("", src, f"m{i}".encode())
    seen: set[str] = set()

    def drain() -> set[str]:
        while True:
            method, _props, body = channel.basic_get(out, auto_ack=True)
            if method is None:
                return seen
            seen.add(body.decode())

    try:
        topology_ = topology(RabbitMQSpout(src, url), RabbitMQSink(out, url))
        cluster.submit_topology("rabbit-kill", CONF, topology_)
        kill_a_worker_midway(cluster, "rabbit-kill", lambda: len(drain()))
        assert until(lambda: drain() == {f"m{i}" for i in range(N)}, 180), "every message written"
        totals = connector_totals(cluster.metrics("rabbit-kill")["source"])
        assert totals["redelivered"] > 0, "nothing came back through the broker: the kill missed"
        cluster.kill_topology("rabbit-kill")
        # Every worker's channel is closed now: anything left unacknowledged is back.
        assert channel.queue_declare(src, passive=True).method.message_count == 0
    finally:
        channel.queue_delete(src)
        channel.queue_delete(out)
        conn.close()
