"""Broker connectors end to end: ``python bench/connectors.py [--messages N]
[--per-tree K ...] [broker ...]``.

For each broker: N messages are put in a source; a tracked topology (broker spout ->
broker sink, one acker, max spout pending 1000) on a real-time LocalCluster moves them
to a destination of the same broker, acking each at the source once the sink's write
was confirmed; timed from submit until the source acknowledged all N. In the same run,
the same N messages go through a bare loop using the same client library: consume,
write (confirmed), ack, no topology. The two alternate ``--repeat`` times (3); prints the
medians of messages/s for both, their ratio, and every run (the machine is shared: single
runs move by tens of percent).

Kafka runs on tansu unless TUPLETREE_KAFKA names a broker (host:port); JetStream on the
machine's NATS server unless TUPLETREE_NATS names another (nats://host:port).

Adding a broker is one function: decorate ``def case(n) -> Case`` with ``@broker(name)``;
raise ``Unavailable`` when its broker cannot be reached (the broker is skipped, saying
why).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupletree import LocalCluster, TopologyBuilder, compiled
from tupletree.connectors import connector_totals

MAX_PENDING = 1000
DEADLINE_SECS = 600


class Unavailable(Exception):
    """The broker cannot be reached: skip it."""


@dataclass
class Case:
    """One broker's benchmark: ``fill()`` puts the N messages in the source; ``spout()``
    and ``sink()`` make the connectors; ``bare()`` moves N messages with the client
    library alone; ``cleanup()`` deletes what the run made."""

    fill: Callable[[], None]
    spout: Callable[[], Any]
    sink: Callable[[], Any]
    bare: Callable[[], None]
    cleanup: Callable[[], None]


CASES: dict[str, Callable[[int], Case]] = {}


def broker(name: str) -> Callable[[Callable[[int], Case]], Callable[[int], Case]]:
    def register(fn: Callable[[int], Case]) -> Callable[[int], Case]:
        CASES[name] = fn
        return fn

    return register


def _tag() -> str:
    return uuid.uuid4().hex[:10]


@broker("redis")
def redis_case(n: int) -> Case:
    import redis

    from tupletree.connectors.redis import RedisStreamSink, RedisStreamSpout

    url = "redis://127.0.0.1:6379/0"
    r = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        r.ping()
    except redis.RedisError as exc:
        raise Unavailable(f"no Redis at {url}: {exc}") from exc
    tag = _tag()
    src, out = f"bench-src-{tag}", f"bench-out-{tag}"

    def fill() -> None:
        r.delete(src, out)
        r.xgroup_create(src, "g", id="0", mkstream=True)
        for start in range(0, n, 1000):
            pipe = r.pipeline(transaction=False)
            for i in range(start, min(n, start + 1000)):
                pipe.xadd(src, {"message": f"message {i}"})
            pipe.execute()

    def bare() -> None:
        moved = 0
        while moved < n:
            reply = r.xreadgroup("g", "bare", {src: ">"}, count=500, block=100)
            if not reply:
                continue
            entries = reply[0][1]
            pipe = r.pipeline(transaction=False)
            for _, fields in entries:
                pipe.xadd(out, {"message": fields[b"message"]})
            pipe.execute()
            r.xack(src, "g", *[entry_id for entry_id, _ in entries])
            moved += len(entries)

    return Case(
        fill,
        lambda **kw: RedisStreamSpout(src, "g", url, **kw),
        lambda: RedisStreamSink(out, url),
        bare,
        lambda: r.delete(src, out),
    )


@broker("rabbitmq")
def rabbitmq_case(n: int) -> Case:
    import pika

    from tupletree.connectors.rabbitmq import ConfirmingPublisher, RabbitMQSink, RabbitMQSpout

    url = "amqp://guest:guest@127.0.0.1:5672/%2F"
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
    except pika.exceptions.AMQPError as exc:
        raise Unavailable(f"no RabbitMQ at 127.0.0.1:5672: {exc!r}") from exc
    channel = conn.channel()
    tag = _tag()
    src, out = f"bench-src-{tag}", f"bench-out-{tag}"

    def fill() -> None:
        for q in (src, out):
            channel.queue_delete(q)
            channel.queue_declare(q)
        for i in range(n):
            channel.basic_publish("", src, f"message {i}".encode())

    def bare() -> None:
        # Writes go through the sink's ConfirmingPublisher (pika's SelectConnection with
        # many confirms in flight): pika's blocking channel confirms one message per
        # round trip, which would make the bare loop several times slower.
        c = pika.BlockingConnection(pika.URLParameters(url))
        publisher = ConfirmingPublisher(url, "", out, out, "bare loop", url)
        consume = c.channel()
        consume.basic_qos(prefetch_count=2 * MAX_PENDING)
        moved = 0
        batch: list[tuple[int, bytes]] = []
        for method, _props, body in consume.consume(src, inactivity_timeout=0.01):
            if method is not None:
                batch.append((method.delivery_tag, body))
                if len(batch) < 500:
                    continue
            if not batch:
                continue
            verdicts = publisher.write([body for _, body in batch])
            assert verdicts == [None] * len(batch), verdicts
            consume.basic_ack(batch[-1][0], multiple=True)
            moved += len(batch)
            batch = []
            if moved >= n:
                break
        consume.cancel()
        publisher.close()
        c.close()

    def cleanup() -> None:
        for q in (src, out):
            channel.queue_delete(q)
        conn.close()

    return Case(
        fill,
        lambda **kw: RabbitMQSpout(src, url, **kw),
        lambda: RabbitMQSink(out, url),
        bare,
        cleanup,
    )


@broker("kafka")
def kafka_case(n: int) -> Case:
    import confluent_kafka

    from tupletree.connectors.kafka import KafkaSink, KafkaSpout
    from tupletree.connectors.kafka.local_broker import BrokerUnavailable, LocalKafkaBroker

    # Kafka itself where one answers at TUPLETREE_KAFKA (host:port), else tansu.
    local = None
    servers = os.environ.get("TUPLETREE_KAFKA")
    if servers is None:
        try:
            local = LocalKafkaBroker().start()
        except BrokerUnavailable as exc:
            raise Unavailable(str(exc)) from exc
        servers = local.bootstrap_servers
    names: dict[str, str] = {}

    def fill() -> None:
        tag = _tag()
        names.update(src=f"bench-src-{tag}", out=f"bench-out-{tag}", group=f"bench-{tag}")
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": servers})
        topics = [confluent_kafka.admin.NewTopic(names[k], 1) for k in ("src", "out")]
        for future in admin.create_topics(topics).values():
            future.result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": 5})
        for i in range(n):
            while True:
                try:
                    producer.produce(names["src"], f"message {i}".encode())
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(60) == 0

    def bare() -> None:
        tp = confluent_kafka.TopicPartition
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": names["group"],
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 50,  # as KafkaSpout's consumer
            }
        )
        consumer.assign([tp(names["src"], 0, confluent_kafka.OFFSET_BEGINNING)])
        producer = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": 2})
        failed: list[Any] = []
        moved = 0
        while moved < n:
            records = [m for m in consumer.consume(500, 0.1) if m.error() is None]
            if not records:
                continue
            for m in records:
                producer.produce(
                    names["out"], m.value(), on_delivery=lambda e, _m: e and failed.append(e)
                )
            assert producer.flush(60) == 0 and not failed, failed
            consumer.commit(
                offsets=[tp(names["src"], 0, records[-1].offset() + 1)], asynchronous=False
            )
            moved += len(records)
        consumer.close()

    return Case(
        fill,
        lambda **kw: KafkaSpout(names["src"], names["group"], servers, **kw),
        lambda: KafkaSink(names["out"], servers),
        bare,
        lambda: local.stop() if local is not None else None,
    )


@broker("jetstream")
def jetstream_case(n: int) -> Case:
    import asyncio

    import nats

    from tupletree.connectors.nats import JetStreamSink, JetStreamSpout

    # The machine's server, or another where TUPLETREE_NATS says (nats://host:port).
    server = os.environ.get("TUPLETREE_NATS", "nats://127.0.0.1:4222")

    async def with_js(fn: Callable[[Any], Any]) -> Any:
        nc = await nats.connect(server, max_reconnect_attempts=1, connect_timeout=2)
        try:
            return await fn(nc.jetstream())
        finally:
            await nc.close()

    async def probe(js: Any) -> None:
        await js.account_info()

    try:
        asyncio.run(with_js(probe))
    except Exception as exc:
        raise Unavailable(f"no NATS with JetStream at {server}: {exc!r}") from exc
    names: dict[str, str] = {}

    async def recreate(js: Any) -> None:
        for key in ("src", "out"):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(names[key])
            await js.add_stream(name=names[key], subjects=[names[key] + ".in"])
        for start in range(0, n, 1000):
            await asyncio.gather(
                *(
                    js.publish(names["src"] + ".in", f"message {i}".encode())
                    for i in range(start, min(n, start + 1000))
                )
            )

    def fill() -> None:
        tag = _tag()
        names.update(src=f"bench_src_{tag}", out=f"bench_out_{tag}")
        asyncio.run(with_js(recreate))

    async def move(js: Any) -> None:
        sub = await js.pull_subscribe(names["src"] + ".in", durable="bare", stream=names["src"])
        moved = 0
        while moved < n:
            try:
                msgs = await sub.fetch(500, timeout=1)
            except nats.errors.TimeoutError:
                continue
            await asyncio.gather(*(js.publish(names["out"] + ".in", m.data) for m in msgs))
            for m in msgs:
                await m.ack()
            moved += len(msgs)

    async def drop(js: Any) -> None:
        for key in ("src", "out"):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(names[key])

    return Case(
        fill,
        lambda **kw: JetStreamSpout(names["src"], "bench", server, **kw),
        lambda: JetStreamSink(names["out"] + ".in", server),
        lambda: asyncio.run(with_js(move)),
        lambda: asyncio.run(with_js(drop)),
    )


def topology_rate(case: Case, n: int, per_tree: int = 1) -> float:
    builder = TopologyBuilder()
    builder.set_spout("source", case.spout(messages_per_tree=per_tree))
    builder.set_bolt("sink", case.sink()).shuffle_grouping("source")
    # Max spout pending counts trees: as many messages in flight whatever the tree size.
    pending = max(1, MAX_PENDING // per_tree)
    conf = {"topology.max.spout.pending": pending, "topology.acker.executors": 1}
    with LocalCluster() as cluster:
        start = time.perf_counter()
        cluster.submit_topology("bench", conf, builder.create_topology())
        deadline = start + DEADLINE_SECS
        while True:
            metrics = cluster.metrics("bench")
            if connector_totals(metrics["source"]).get("acked", 0) >= n:
                break
            if time.perf_counter() > deadline:
                raise SystemExit(f"benchmark: not done after {DEADLINE_SECS} s: {metrics}")
            # Every 20 ms: a metrics snapshot costs the topology's process 0.1-0.4 ms (py-spy),
            # and the run's end is overstated by 10 ms on average: 1-5% of a 20,000-message
            # run (Redis 0.2 s, RabbitMQ 1.4 s), counted against the topology.
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        errors = cluster.errors("bench")
    if errors:
        raise SystemExit(f"benchmark: the topology reported errors: {errors[:3]}")
    return n / elapsed


def bare_rate(case: Case, n: int) -> float:
    start = time.perf_counter()
    case.bare()
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("brokers", nargs="*", help=f"default: all of {sorted(CASES)}")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each, alternated; medians printed"
    )
    parser.add_argument(
        "--per-tree",
        type=int,
        default=[],
        action="append",
        help="the spouts' messages_per_tree (repeat it to compare sizes in one run; default 1)",
    )
    args = parser.parse_args()
    n = args.messages
    sizes = args.per_tree or [1]
    print(f"tupletree connectors, {compiled.describe()}, {n} messages per run")
    for name in args.brokers or sorted(CASES):
        try:
            case = CASES[name](n)
        except Unavailable as exc:
            print(f"{name}: skipped ({exc})")
            continue
        tracked: dict[int, list[float]] = {size: [] for size in sizes}
        bare: list[float] = []
        try:
            for _ in range(args.repeat):
                for size in sizes:
                    case.fill()
                    tracked[size].append(topology_rate(case, n, size))
                case.fill()
                bare.append(bare_rate(case, n))
        finally:
            case.cleanup()
        b = statistics.median(bare)
        for size in sizes:
            t = statistics.median(tracked[size])
            runs = ", ".join(f"{x:,.0f}" for x in tracked[size])
            trees = f", {size} messages a tree" if size != 1 else ""
            print(
                f"{name}{trees}: topology {t:,.0f} msg/s, bare loop {b:,.0f} msg/s, ratio "
                f"{t / b:.2f} (medians; topology runs: {runs}; bare: "
                f"{', '.join(f'{y:,.0f}' for y in bare)})"
            )


if __name__ == "__main__":
    main()
