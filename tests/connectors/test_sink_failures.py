"""Broker sinks under a user's bad value and a broker that keeps refusing the work,
against real brokers (each test skipped, with the reason, where its broker cannot be
had). Each test shows what a user saw before its fix: one bad input failing the whole
batch it was written with (the innocent inputs replayed, a connection thrown away), and
a sink reconnecting at every batch without backoff."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.connectors.support import until
from tupletree import LocalCluster, TopologyBuilder
from tupletree.connectors import connector_totals
from tupletree.connectors.sink import BrokerSink
from tupletree.testing import AckFailTracker, FeederSpout

from .support import module_kafka_broker

CONF = {"topology.message.timeout.secs": 30, "topology.max.spout.pending": 1000}
REDIS_URL = "redis://127.0.0.1:6379/0"
RABBIT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
NATS_URL = "nats://127.0.0.1:4222"
TOO_LARGE = b"x" * (2 * 1024 * 1024)  # above Kafka's and NATS's default 1 MiB limits


def fed(sink: Any) -> tuple[FeederSpout, AckFailTracker, Any]:
    tracker = AckFailTracker()
    feeder = FeederSpout(["message"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("sink", sink).shuffle_grouping("feed")
    return feeder, tracker, b.create_topology()


def feed_with_one_bad(sink: Any, bad: Any, name: str) -> tuple[AckFailTracker, dict, list[str]]:
    """Ten good inputs and ``bad`` (msg id "bad") fed at once, so they are written
    together; waits until all eleven are settled."""
    feeder, tracker, topology = fed(sink)
    with LocalCluster() as cluster:
        cluster.submit_topology(name, CONF, topology)
        rows = [[f"good {i}"] for i in range(5)] + [[bad]] + [[f"good {i}"] for i in range(5, 10)]
        ids = [f"g{i}" for i in range(5)] + ["bad"] + [f"g{i}" for i in range(5, 10)]
        for row, msg_id in zip(rows, ids, strict=True):
            feeder.feed(row, msg_id=msg_id)
        assert until(lambda: len(tracker.acked | tracker.failed) == 11, 30)
        totals = connector_totals(cluster.metrics(name)["sink"])
        errors = [str(e) for e in cluster.errors(name)]
    return tracker, totals, errors


def assert_only_the_bad_one_failed(tracker: AckFailTracker, totals: dict) -> None:
    assert tracker.failed == {"bad"}, (tracker.failed, totals)
    assert tracker.acked == {f"g{i}" for i in range(10)}, totals
    # Nothing counted lost, no connection thrown away for a bad value.
    assert totals["lost"] == 0 and totals["reconnects"] == 0, totals
    assert totals["written"] == 10, totals


# -- Kafka ----------------------------------------------------------------------------


kafka = pytest.fixture(scope="module", name="kafka")(module_kafka_broker)


def test_a_record_too_large_for_kafka_fails_alone(kafka: Any) -> None:
    """The producer refuses a record over ``message.max.bytes`` in ``produce`` itself.
    Before, that exception left ``produce_all``: the whole batch counted lost, the
    session (producer) replaced, and the ten good inputs failed with the bad one, at
    every replay. Now the one record is refused, with the client's reason."""
    from tupletree.connectors.kafka import KafkaSink

    topic = "t" + uuid.uuid4().hex[:12]
    kafka.create_topic(topic, 1)
    sink = KafkaSink(topic, kafka.bootstrap_servers)
    tracker, totals, errors = feed_with_one_bad(sink, TOO_LARGE, "kafka-too-large")
    assert_only_the_bad_one_failed(tracker, totals)
    assert totals["refused"] == 1
    assert any("KafkaSink 'sink'" in e and "too large" in e.lower() for e in errors), errors


# -- NATS JetStream -------------------------------------------------------------------


@pytest.fixture
def nats_subject() -> Iterator[str]:
    nats = pytest.importorskip("nats", reason="nats-py is not installed")
    stream = "TTSINK" + uuid.uuid4().hex[:8].upper()
    subject = f"tt.sink.{stream.lower()}"

    async def setup() -> None:
        nc = await nats.connect(NATS_URL, max_reconnect_attempts=1, connect_timeout=2)
        try:
            await nc.jetstream().add_stream(name=stream, subjects=[subject])
        finally:
            await nc.close()

    async def teardown() -> None:
        nc = await nats.connect(NATS_URL, max_reconnect_attempts=1, connect_timeout=2)
        try:
            await nc.jetstream().delete_stream(stream)
        finally:
            await nc.close()

    try:
        asyncio.run(setup())
    except Exception as exc:
        pytest.skip(f"no NATS server with JetStream at {NATS_URL}: {exc!r}")
    try:
        yield subject
    finally:
        asyncio.run(teardown())


def test_a_message_over_the_nats_max_payload_fails_alone(nats_subject: str) -> None:
    """nats-py raises MaxPayloadError from ``publish`` for a message over the server's
    ``max_payload``. Before, it left the batch's write: every input of the batch failed
    as lost and the connection was closed and opened again. Now the one input is
    refused, saying why."""
    from tupletree.connectors.nats import JetStreamSink

    sink = JetStreamSink(nats_subject, NATS_URL)
    tracker, totals, errors = feed_with_one_bad(sink, TOO_LARGE, "nats-too-large")
    assert_only_the_bad_one_failed(tracker, totals)
    assert totals["refused"] == 1
    assert any("JetStreamSink 'sink'" in e and "max_payload" in e for e in errors), errors


def test_a_nats_batch_with_a_refused_message_answers_without_waiting_out_the_timeout(
    nats_subject: str,
) -> None:
    """A message refused before it is published has no PubAck to wait for: alone in its
    batch it fails at once, and a batch of messages at and just over ``max_payload``
    answers when the others' PubAcks are in, not after ``timeout_secs`` (here 10 s).
    The bound is nats-py's: a message of exactly ``max_payload`` bytes is published."""
    from tupletree.connectors.nats import JetStreamSink

    limit = 1024 * 1024  # nats-server's default max_payload
    sink = JetStreamSink(nats_subject, NATS_URL, timeout_secs=10.0)
    feeder, tracker, topology = fed(sink)
    with LocalCluster() as cluster:
        cluster.submit_topology("nats-refused-fast", CONF, topology)
        started = time.monotonic()
        feeder.feed([TOO_LARGE], msg_id="alone")
        assert until(lambda: "alone" in tracker.failed, 30)
        alone = time.monotonic() - started
        started = time.monotonic()
        rows = {"at": b"a" * limit, "over": b"o" * (limit + 1), "small": b"s"}
        for msg_id, body in rows.items():
            feeder.feed([body], msg_id=msg_id)
        assert until(lambda: len(tracker.acked | tracker.failed) == 4, 30)
        batch = time.monotonic() - started
        totals = connector_totals(cluster.metrics("nats-refused-fast")["sink"])
    assert tracker.failed == {"alone", "over"} and tracker.acked == {"at", "small"}, totals
    assert totals["lost"] == 0 and totals["reconnects"] == 0, totals
    assert alone < 5.0 and batch < 5.0, (alone, batch)


# -- RabbitMQ -------------------------------------------------------------------------

RABBIT_DEFAULT_MAX = 128 * 1024 * 1024  # RabbitMQ 3.8 to 3.13's max_message_size (4.x: 16 MiB)


@pytest.fixture
def rabbit_queue() -> Iterator[tuple[Any, str]]:
    """A queue of its own on the broker, and a connection to read it with."""
    pika = pytest.importorskip("pika", reason="pika is not installed")
    try:
        admin = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    except Exception as exc:
        pytest.skip(f"no RabbitMQ broker at {RABBIT_URL} ({exc!r}); .ci/run starts one")
    queue = f"tt-sink-size-{uuid.uuid4().hex[:10]}"
    admin.channel().queue_declare(queue)
    try:
        yield admin, queue
    finally:
        admin.channel().queue_delete(queue)
        admin.close()


def _broker_max_message_size(admin: Any) -> int:
    """The broker's ``max_message_size``, as it says when refusing a message just over
    RabbitMQ's largest default (it closes the channel, 406 PRECONDITION_FAILED)."""
    import pika.exceptions

    channel = admin.channel()
    channel.confirm_delivery()
    probe = channel.queue_declare("", exclusive=True).method.queue
    try:
        channel.basic_publish("", probe, b"p" * (RABBIT_DEFAULT_MAX + 1))
    except pika.exceptions.ChannelClosedByBroker as exc:
        found = re.search(r"max size (\d+)", exc.reply_text)
        assert found, exc.reply_text
        return int(found.group(1))
    channel.queue_delete(probe)
    pytest.skip(f"the broker takes messages over {RABBIT_DEFAULT_MAX} bytes")


def _bodies(admin: Any, queue: str) -> list[bytes]:
    channel = admin.channel()
    got = []
    while True:
        method, _props, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return got
        got.append(body)


def test_a_message_over_the_rabbitmq_max_message_size_fails_alone(
    rabbit_queue: tuple[Any, str],
) -> None:
    """RabbitMQ refuses a message over its ``max_message_size`` by closing the channel
    (406 PRECONDITION_FAILED), dropping what was published after it. Before, that
    failed the whole batch as lost, the connection was replaced, and the same at every
    replay. Now the sink learns the limit from the refusal, refuses that message alone,
    and publishes the rest of the batch again on a new channel."""
    from tupletree.connectors.rabbitmq import RabbitMQSink

    admin, queue = rabbit_queue
    limit = _broker_max_message_size(admin)
    sink = RabbitMQSink(queue, RABBIT_URL)
    big = b"x" * (limit + 1)
    tracker, totals, errors = feed_with_one_bad(sink, big, "rabbit-too-large")
    assert_only_the_bad_one_failed(tracker, totals)
    assert totals["refused"] == 1
    said = f"message of {limit + 1} bytes over the broker's max_message_size ({limit})"
    assert any("RabbitMQSink 'sink'" in e and said in e for e in errors), errors
    # At least once: a good message the broker took before the refusal, its confirm
    # lost with the channel, may have been published again.
    written = _bodies(admin, queue)
    assert set(written) == {f"good {i}".encode() for i in range(10)}, len(written)


def test_the_rabbitmq_sink_keeps_the_limit_the_broker_refused_with(
    rabbit_queue: tuple[Any, str],
) -> None:
    """Once refused, the connection's publisher knows the broker's limit: two messages
    over it in one batch cost one channel, and a later batch's is refused before it is
    published (the channel stays open)."""
    from tupletree.connectors.rabbitmq import ConfirmingPublisher

    admin, queue = rabbit_queue
    limit = _broker_max_message_size(admin)
    big = b"x" * (limit + 1)
    publisher = ConfirmingPublisher(RABBIT_URL, "", queue, queue, "RabbitMQSink 's'", "here")
    try:
        first = publisher.write([b"a", big, b"b", big, b"c"])
        channel = publisher.channel
        second = publisher.write([b"d", big, b"e"])
        assert publisher.channel is channel and channel.is_open
    finally:
        publisher.close()
    over = f"message of {limit + 1} bytes over the broker's max_message_size ({limit})"
    assert first == [None, over, None, over, None], first
    assert second == [None, over, None], second
    assert set(_bodies(admin, queue)) == {b"a", b"b", b"c", b"d", b"e"}


def test_a_message_over_the_rabbitmq_sink_max_message_bytes_is_refused_alone(
    rabbit_queue: tuple[Any, str],
) -> None:
    """``max_message_bytes`` tells the sink the broker's limit (a broker may set
    ``max_message_size`` lower than its default): a larger message is refused before it
    is published, alone, and the broker never closes the channel for it."""
    from tupletree.connectors.rabbitmq import RabbitMQSink

    admin, queue = rabbit_queue
    sink = RabbitMQSink(queue, RABBIT_URL, max_message_bytes=1024 * 1024)
    tracker, totals, errors = feed_with_one_bad(sink, TOO_LARGE, "rabbit-over-option")
    assert_only_the_bad_one_failed(tracker, totals)
    assert totals["refused"] == 1
    said = f"message of {len(TOO_LARGE)} bytes over max_message_bytes ({1024 * 1024})"
    assert any("RabbitMQSink 'sink'" in e and said in e for e in errors), errors
    assert sorted(_bodies(admin, queue)) == sorted(f"good {i}".encode() for i in range(10))


def test_rabbitmq_sink_max_message_bytes_must_be_positive() -> None:
    pytest.importorskip("pika", reason="pika is not installed")
    from tupletree.connectors.rabbitmq import RabbitMQSink

    for bad in (0, -1, 1.5, "1"):
        with pytest.raises(ValueError, match="max_message_bytes"):
            RabbitMQSink("q", RABBIT_URL, max_message_bytes=bad)


# -- an encode that returns something other than bytes --------------------------------


@pytest.fixture
def redis_stream() -> Iterator[tuple[Any, str]]:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis server at {REDIS_URL} ({exc}); .ci/run starts one")
    name = f"tt-sink-fail-{uuid.uuid4().hex[:10]}"
    try:
        yield client, name
    finally:
        client.delete(name)
        client.close()


def _encode(tup: Any) -> Any:
    value = tup.get("message")
    return {"not": "bytes"} if value == "bad" else value.encode()


def test_an_encode_returning_no_bytes_fails_only_its_input(redis_stream: Any) -> None:
    """A careless ``encode`` returns a dict for one input. Before, the dict reached the
    I/O thread, where redis-py refused it for the whole batch (DataError): the ten
    good inputs failed as lost too and the connection was replaced, at every replay.
    Now the one input fails in ``execute``, with an error naming the sink and the
    type."""
    from tupletree.connectors.redis import RedisStreamSink

    r, stream = redis_stream
    sink = RedisStreamSink(stream, REDIS_URL, encode=_encode)
    tracker, totals, errors = feed_with_one_bad(sink, "bad", "redis-bad-encode")
    assert_only_the_bad_one_failed(tracker, totals)
    assert r.xlen(stream) == 10
    assert any("RedisStreamSink 'sink'" in e and "dict" in e for e in errors), errors


# -- a broker that takes the connection and refuses every write -----------------------


def test_a_sink_whose_every_write_breaks_the_connection_reconnects_with_backoff() -> None:
    """Publishing to an internal exchange makes RabbitMQ close the channel (403), so
    every write raises (a missing exchange did too, and is now refused at connect:
    test_rabbitmq.py). Before, the sink connected again at once after each
    (the failure count was reset by the successful connect): one new connection per
    batch, as fast as the inputs came. Now consecutive failed writes back off as failed
    connects do."""
    pika = pytest.importorskip("pika")
    try:
        admin = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    except Exception as exc:
        pytest.skip(f"no RabbitMQ broker at {RABBIT_URL} ({exc!r}); .ci/run starts one")
    internal = f"tt-internal-{uuid.uuid4().hex[:8]}"
    admin.channel().exchange_declare(internal, exchange_type="direct", internal=True)
    try:
        _every_write_breaks(internal)
    finally:
        admin.channel().exchange_delete(internal)
        admin.close()


def _every_write_breaks(internal: str) -> None:
    from tupletree.connectors import RetryPolicy
    from tupletree.connectors.rabbitmq import RabbitMQSink

    sink = RabbitMQSink(
        url=RABBIT_URL,
        exchange=internal,
        routing_key="anything",
        check_at_submit=False,
        reconnect=RetryPolicy(initial_delay_secs=0.2, max_delay_secs=2.0),
    )
    feeder, tracker, topology = fed(sink)
    name = "rabbit-write-backoff"
    with LocalCluster() as cluster:
        cluster.submit_topology(name, CONF, topology)
        fed_count = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # a steady trickle of inputs for 3 s
            feeder.feed([f"m{fed_count}"], msg_id=fed_count)
            fed_count += 1
            time.sleep(0.02)
        assert until(lambda: len(tracker.failed) == fed_count, 30)
        totals = connector_totals(cluster.metrics(name)["sink"])
        errors = [str(e) for e in cluster.errors(name)]
    assert not tracker.acked
    # 0.2 + 0.4 + 0.8 + 1.6 s of backoff fill the 3 s: a handful, not one per batch.
    assert totals["reconnects"] <= 6, totals
    assert any("ACCESS_REFUSED" in e for e in errors), errors


def test_records_the_kafka_sink_gave_up_on_are_not_kept_to_be_written_later() -> None:
    """The broker goes away: the batch gets no delivery report within ``timeout_secs``
    and its inputs fail (to be replayed). Before, librdkafka kept those records queued
    for its own ``message.timeout.ms`` (300 s): each replay while the broker was down
    queued one more copy (up to librdkafka's 100 000 records / 1 GiB), all written when
    it came back. Now the producer gives up on a record when the sink does."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from tupletree.connectors.kafka import KafkaSink
    from tupletree.connectors.kafka.local_broker import BrokerUnavailable, LocalKafkaBroker
    from tupletree.connectors.mailbox import ErrorMailbox

    try:
        broker = LocalKafkaBroker().start()  # of its own: it is stopped
    except BrokerUnavailable as exc:
        pytest.skip(f"no Kafka-compatible broker: {exc}")
    closing: list[Any] = []
    try:
        topic = "t" + uuid.uuid4().hex[:12]
        broker.create_topic(topic, 1)
        sink = KafkaSink(topic, broker.bootstrap_servers, timeout_secs=1.0)
        sink.component = "sink"
        sink.io_counts = {"written": 0, "refused": 0, "lost": 0, "reconnects": 0}
        sink._errors = ErrorMailbox(sink.scrubbed)
        session = sink.connect()
        closing.append(session)  # or librdkafka goes on dialling the stopped broker
        assert session.write([b"before"]) == [None]
        broker.stop()
        verdicts = session.write([f"during {i}".encode() for i in range(5)])
        assert all(v is not None for v in verdicts), verdicts
        producer = session.producer

        def emptied() -> bool:
            producer.poll(0)
            return len(producer) == 0

        assert until(emptied, 5), f"{len(producer)} failed records still queued to be written"
    finally:
        for session in closing:
            session.close()
        broker.stop()


# -- mutation review: what the tests above left open -----------------------------------


def _bytearray_encode(tup: Any) -> Any:
    return bytearray(tup.get("message").encode())


def test_an_encode_returning_a_bytearray_is_written_by_kafka(kafka: Any) -> None:
    """``encode`` may return a bytearray (or a memoryview): the sink makes it bytes.
    confluent-kafka's ``produce`` refuses a bytearray with a TypeError, which on the
    I/O thread would count the whole batch lost and replace the producer, at every
    replay."""
    from tupletree.connectors.kafka import KafkaSink

    topic = "t" + uuid.uuid4().hex[:12]
    kafka.create_topic(topic, 1)
    sink = KafkaSink(topic, kafka.bootstrap_servers, encode=_bytearray_encode)
    feeder, tracker, topology = fed(sink)
    with LocalCluster() as cluster:
        cluster.submit_topology("kafka-bytearray", CONF, topology)
        for i in range(5):
            feeder.feed([f"m{i}"], msg_id=i)
        assert until(lambda: len(tracker.acked | tracker.failed) == 5, 30)
        totals = connector_totals(cluster.metrics("kafka-bytearray")["sink"])
    assert tracker.acked == set(range(5)) and not tracker.failed, totals
    assert totals["written"] == 5 and totals["lost"] == 0, totals


def test_a_batch_with_a_refused_kafka_record_does_not_wait_out_the_timeout(kafka: Any) -> None:
    """The record refused in ``produce`` has no delivery report to wait for: the batch
    answers once the others are reported, not after ``timeout_secs`` (every input of
    the batch, the good ones too, held that long)."""
    from tupletree.connectors.kafka import KafkaSink
    from tupletree.connectors.mailbox import ErrorMailbox

    topic = "t" + uuid.uuid4().hex[:12]
    kafka.create_topic(topic, 1)
    sink = KafkaSink(topic, kafka.bootstrap_servers, timeout_secs=10.0)
    sink.component = "sink"
    sink.io_counts = {"written": 0, "refused": 0, "lost": 0, "reconnects": 0}
    sink._errors = ErrorMailbox(sink.scrubbed)
    session = sink.connect()
    try:
        assert session.write([b"warm up"]) == [None]
        started = time.monotonic()
        verdicts = session.write([b"good", TOO_LARGE, b"good too"])
        took = time.monotonic() - started
    finally:
        session.close()
    assert verdicts[0] is None and verdicts[2] is None, verdicts
    assert verdicts[1] is not None and verdicts[1].startswith("refused"), verdicts
    assert took < 5.0, f"the batch waited {took:.1f} s for a report that never comes"


class _EveryOtherWriteBreaks:
    """A session of _FlakySink: writes 0, 2, 4... go through, 1, 3, 5... raise."""

    writes = 0

    def write(self, bodies: list[bytes]) -> list[str | None]:
        n = _EveryOtherWriteBreaks.writes
        _EveryOtherWriteBreaks.writes += 1
        if n % 2:
            raise ConnectionError("the connection broke")
        return [None] * len(bodies)

    def close(self) -> None:
        pass


class _FlakySink(BrokerSink):
    def address(self) -> str:
        return "flaky:0"

    def connect(self) -> Any:
        return _EveryOtherWriteBreaks()


def test_a_failed_write_after_one_that_worked_reconnects_at_once() -> None:
    """As the spouts do: the first failed write after a write the broker answered
    reconnects at once; only failures in a row back off. A sink whose broker drops the
    connection now and then must not wait its reconnect delay (here 5 s) at the first
    drop, nor carry the count of drops long past into the delay of the next one."""
    from tupletree.connectors import RetryPolicy

    _EveryOtherWriteBreaks.writes = 0
    sink = _FlakySink(
        check_at_submit=False,
        reconnect=RetryPolicy(initial_delay_secs=5.0, max_delay_secs=5.0),
    )
    feeder, tracker, topology = fed(sink)
    with LocalCluster() as cluster:
        cluster.submit_topology("flaky-sink", CONF, topology)
        started = time.monotonic()
        for i in range(5):  # one at a time: each its own write (ok, breaks, ok, ...)
            feeder.feed([f"m{i}"], msg_id=i)
            assert until(lambda i=i: i in tracker.acked | tracker.failed, 30)
        took = time.monotonic() - started
        totals = connector_totals(cluster.metrics("flaky-sink")["sink"])
    assert tracker.acked == {0, 2, 4} and tracker.failed == {1, 3}, totals
    assert took < 3.0, f"{took:.1f} s: a reconnect after a write that worked waited"


def test_the_kafka_producer_gives_up_with_the_sink_unless_producer_config_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``message.timeout.ms`` is ``timeout_secs`` by default, and the user's
    ``producer_config`` still has the last word."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from tupletree.connectors.kafka import KafkaSink

    seen: list[dict[str, Any]] = []

    class Recorder:
        def __init__(self, conf: dict[str, Any]) -> None:
            seen.append(conf)
            raise RuntimeError("recorded")

    monkeypatch.setattr(confluent_kafka, "Producer", Recorder)
    for config, expected in (({}, 2500), ({"message.timeout.ms": 60_000}, 60_000)):
        sink = KafkaSink("t", "127.0.0.1:1", timeout_secs=2.5, producer_config=config)
        with pytest.raises(RuntimeError, match="recorded"):
            sink.connect()
        assert seen[-1]["message.timeout.ms"] == expected, seen[-1]
