"""Broker connectors end to end: ``python bench/connectors.py [--messages N] [broker ...]``.

For each broker: N messages are put in a source; a tracked topology (broker spout ->
broker sink, one acker, max spout pending 1000) on a real-time LocalCluster moves them
to a destination of the same broker, acking each at the source once the sink's write
was confirmed; timed from submit until the source acknowledged all N. In the same run,
the same N messages go through a bare loop using the same client library: consume,
write (confirmed), ack, no topology. Prints messages/s for both and their ratio.

Adding a broker is one function: decorate ``def case(n) -> Case`` with ``@broker(name)``;
raise ``Unavailable`` when its broker cannot be reached (the broker is skipped, saying
why).
"""

from __future__ import annotations

import argparse
import os
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
        lambda: RedisStreamSpout(src, "g", url),
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
        lambda: RabbitMQSpout(src, url),
        lambda: RabbitMQSink(out, url),
        bare,
        cleanup,
    )


def topology_rate(case: Case, n: int) -> float:
    builder = TopologyBuilder()
    builder.set_spout("source", case.spout())
    builder.set_bolt("sink", case.sink()).shuffle_grouping("source")
    conf = {"topology.max.spout.pending": MAX_PENDING, "topology.acker.executors": 1}
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
            time.sleep(0.005)
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
    args = parser.parse_args()
    print(f"tupletree connectors, {compiled.describe()}, {args.messages} messages each")
    for name in args.brokers or sorted(CASES):
        try:
            case = CASES[name](args.messages)
        except Unavailable as exc:
            print(f"{name}: skipped ({exc})")
            continue
        try:
            case.fill()
            tracked = topology_rate(case, args.messages)
            case.fill()
            bare = bare_rate(case, args.messages)
        finally:
            case.cleanup()
        print(
            f"{name}: topology {tracked:,.0f} msg/s, bare loop {bare:,.0f} msg/s, "
            f"ratio {tracked / bare:.2f}"
        )


if __name__ == "__main__":
    main()
