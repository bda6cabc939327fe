"""RabbitMQSpout and RabbitMQSink against the RabbitMQ broker of this machine
(127.0.0.1:5672, guest/guest; skipped, with the reason, where none answers)."""

from __future__ import annotations

import collections
import contextlib
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.connectors.support import POISON, FailPoison, pipeline, until
from tupletree import Bolt, LocalCluster, TopologyBuilder
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals
from tupletree.errors import InvalidConfigError
from tupletree.testing import FeederSpout

pika = pytest.importorskip("pika")
from tupletree.connectors.rabbitmq import RabbitMQSink, RabbitMQSpout  # noqa: E402

URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
CONF = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 100}


class Admin:
    """The test's own channel, opened again after the broker closed it."""

    def __init__(self) -> None:
        self.conn: Any = None

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(2):
                if self.conn is None or not self.conn.is_open:
                    self.conn = pika.BlockingConnection(pika.URLParameters(URL))
                    self.ch = self.conn.channel()
                elif not self.ch.is_open:
                    self.ch = self.conn.channel()
                try:
                    return getattr(self.ch, name)(*args, **kwargs)
                except (pika.exceptions.ConnectionClosed, pika.exceptions.AMQPChannelError):
                    if attempt:
                        raise
            return None

        return call


@pytest.fixture(scope="module")
def channel() -> Iterator[Any]:
    admin = Admin()
    try:
        admin.queue_declare("tt-probe", auto_delete=True)
    except pika.exceptions.AMQPError as exc:
        pytest.skip(f"no RabbitMQ broker at {URL} ({exc!r}); .ci/run starts one")
    yield admin
    if admin.conn is not None and admin.conn.is_open:
        admin.conn.close()


@pytest.fixture
def queues(channel: Any) -> Iterator[tuple[str, str, str]]:
    """A source, an output and a dead-letter queue with names of their own."""
    tag = uuid.uuid4().hex[:10]
    names = (f"tt-src-{tag}", f"tt-out-{tag}", f"tt-dead-{tag}")
    for name in names:
        channel.queue_declare(name)
    yield names
    for name in names:
        channel.queue_delete(name)


def put(channel: Any, queue: str, bodies: list[str]) -> None:
    for body in bodies:
        channel.basic_publish("", queue, body.encode())


def drain(channel: Any, queue: str) -> list[str]:
    """Take what ``queue`` holds. Acked after it is recorded: a connection dropped in
    between gives the message back (seen twice) instead of losing it."""
    out = []
    while True:
        method, _props, body = channel.basic_get(queue)
        if method is None:
            return out
        out.append(body.decode())
        # If its channel was closed under it, the broker gives it back: seen twice.
        with contextlib.suppress(pika.exceptions.AMQPError):
            channel.basic_ack(method.delivery_tag)


def ready(channel: Any, queue: str) -> int:
    return channel.queue_declare(queue, passive=True).method.message_count


def test_every_message_reaches_the_sink_and_the_queue_ends_empty(channel: Any, queues: Any) -> None:
    """300 messages through a bolt failing a fifth at random: each is published at
    least once, duplicates are counted, and once the topology is gone (its channels
    closed, so anything left unacknowledged would be requeued) the queue is empty."""
    src, out, _ = queues
    bodies = [f"m{i}" for i in range(300)]
    put(channel, src, bodies)
    with LocalCluster() as cluster:
        topology = pipeline(RabbitMQSpout(src, URL), RabbitMQSink(out, URL))
        cluster.submit_topology("rabbit-e2e", CONF, topology)
        assert until(lambda: ready(channel, out) >= 300)
        assert until(
            lambda: connector_totals(cluster.metrics("rabbit-e2e")["source"])["acked"] == 300
        )
        metrics = cluster.metrics("rabbit-e2e")
        assert cluster.errors("rabbit-e2e") == []
    assert ready(channel, src) == 0
    written = collections.Counter(drain(channel, out))
    duplicates = sum(n - 1 for n in written.values())
    assert set(written) == set(bodies)
    spout = connector_totals(metrics["source"])
    assert spout["received"] == 300 and spout["retried"] == spout["failed"] > 0
    assert connector_totals(metrics["sink"])["written"] == 300 + duplicates


class HoldFirst(Bolt):
    """Acks every input but ``hold``, which it keeps unacked."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup[0] != "hold":
            self.collector.ack(tup)


def test_a_message_whose_tree_is_pending_is_never_acknowledged(channel: Any, queues: Any) -> None:
    """The first delivery's tree never completes while the 100 after it do: the acks of
    those (a completed prefix is acked with one ``multiple`` ack) must not cover it, so
    once the topology is gone it is back in the queue, and only it."""
    src, _, _ = queues
    put(channel, src, ["hold", *(f"m{i}" for i in range(100))])
    b = TopologyBuilder()
    b.set_spout("source", RabbitMQSpout(src, URL))
    b.set_bolt("hold", HoldFirst()).shuffle_grouping("source")
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-hold", CONF, b.create_topology())
        assert until(
            lambda: connector_totals(cluster.metrics("rabbit-hold")["source"])["acked"] == 100
        )
    assert until(lambda: ready(channel, src) == 1)
    assert drain(channel, src) == ["hold"]


def test_a_message_that_always_fails_goes_to_the_dead_letter(channel: Any, queues: Any) -> None:
    src, out, dead = queues
    bodies = [f"m{i}" for i in range(50)]
    put(channel, src, [*bodies[:25], POISON, *bodies[25:]])
    spout = RabbitMQSpout(
        src, URL, retry=RetryPolicy(max_retries=3, initial_delay_secs=0.01), dead_letter=dead
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-dead", CONF, pipeline(spout, RabbitMQSink(out, URL)))
        assert until(lambda: ready(channel, dead) == 1 and ready(channel, out) >= 50)
        assert until(
            lambda: connector_totals(cluster.metrics("rabbit-dead")["source"])["held"] == 0
        )
        metrics = cluster.metrics("rabbit-dead")
    assert ready(channel, src) == 0
    _method, props, body = channel.basic_get(dead, auto_ack=True)
    assert body == POISON.encode() and props.headers["x-failures"] == 4
    assert set(drain(channel, out)) == set(bodies)
    assert connector_totals(metrics["source"])["dead_lettered"] == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs rabbitmqctl")
def test_closed_connections_lose_nothing(channel: Any, queues: Any) -> None:
    """``rabbitmqctl close_all_connections``, again and again while the topology runs:
    the broker requeues what the spout's channel held; acks for the old channel's tags
    are dropped, not sent; every message reaches the sink and the queue ends empty."""
    src, out, _ = queues
    bodies = [f"m{i}" for i in range(20000)]
    put(channel, src, bodies)
    stop = threading.Event()
    closes = []

    def closer() -> None:
        while not stop.is_set():
            done = subprocess.run(
                ["rabbitmqctl", "close_all_connections", "tupletree test"],
                capture_output=True,
                timeout=60,
            )
            closes.append(done.returncode)

    written: dict[str, int] = {}

    def all_written() -> bool:
        for body in drain(channel, out):
            written[body] = written.get(body, 0) + 1
        return set(written) == set(bodies)

    conf = {**CONF, "topology.max.spout.pending": 20}
    thread = threading.Thread(target=closer)
    with LocalCluster() as cluster:
        topology = pipeline(RabbitMQSpout(src, URL), RabbitMQSink(out, URL))
        cluster.submit_topology("rabbit-kill", conf, topology)
        assert until(lambda: ready(channel, out) > 100)
        thread.start()
        try:
            assert until(all_written, 180)
        finally:
            stop.set()
            thread.join()
        assert until(
            lambda: connector_totals(cluster.metrics("rabbit-kill")["source"])["held"] == 0
        )
        spout = connector_totals(cluster.metrics("rabbit-kill")["source"])
        errors = cluster.errors("rabbit-kill")
    assert closes and set(closes) == {0}
    assert ready(channel, src) == 0
    assert spout["reconnects"] >= 1 and spout["redelivered"] > 0
    assert any("RabbitMQSpout 'source'" in e and "CONNECTION_FORCED" in e for e in errors)


def test_a_missing_queue_bad_credentials_and_no_broker_are_refused_at_submit(
    channel: Any, queues: Any
) -> None:
    src, out, _ = queues
    with LocalCluster() as cluster:
        with pytest.raises(ConnectorError, match="queue 'nope' does not exist"):
            cluster.submit_topology(
                "t", CONF, pipeline(RabbitMQSpout("nope", URL), RabbitMQSink(out, URL))
            )
        with pytest.raises(ConnectorError) as err:
            bad = "amqp://guest:wrong@127.0.0.1:5672/%2F"
            cluster.submit_topology(
                "t", CONF, pipeline(RabbitMQSpout(src, bad), RabbitMQSink(out, URL))
            )
        assert "credentials refused" in str(err.value) and "wrong" not in str(err.value)
        with pytest.raises(ConnectorError, match=r"RabbitMQSink 'sink'.*127\.0\.0\.1:1"):
            sink = RabbitMQSink(out, "amqp://guest:guest@127.0.0.1:1/%2F")
            cluster.submit_topology("t", CONF, pipeline(FeederSpout(["message"]), sink))


def test_a_consumer_timeout_under_the_trees_lifetime_is_refused(queues: Any) -> None:
    src, out, _ = queues
    spout = RabbitMQSpout(src, URL, consumer_timeout_secs=25, check_at_submit=False)
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("t", CONF, pipeline(spout, RabbitMQSink(out, URL)))
    assert err.value.key == "topology.message.timeout.secs"
    assert "consumer_timeout_secs" in str(err.value)


class HoldAll(Bolt):
    """Keeps every input unacked (so every delivery stays with the spout)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        pass


def test_the_prefetch_bounds_what_the_broker_hands_the_spout(channel: Any, queues: Any) -> None:
    """With max spout pending 20 and no tree ever completing, the broker hands the spout
    at most max pending plus its buffer (20 + 20) of the 300 queued messages: the rest
    stay ready in the queue."""
    src, _, _ = queues
    put(channel, src, [f"m{i}" for i in range(300)])
    conf = {**CONF, "topology.max.spout.pending": 20}
    b = TopologyBuilder()
    b.set_spout("source", RabbitMQSpout(src, URL))
    b.set_bolt("hold", HoldAll()).shuffle_grouping("source")
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-prefetch", conf, b.create_topology())
        assert until(lambda: ready(channel, src) <= 260)  # it has taken its share...
        assert not until(lambda: ready(channel, src) < 260, 1.0)  # ...and no more
        counts = connector_totals(cluster.metrics("rabbit-prefetch")["source"])
    assert counts["received"] == 20 and counts["held"] == 20 and counts["buffered"] == 20


def test_the_prefetch_counts_the_messages_of_the_pending_trees(channel: Any, queues: Any) -> None:
    """Max spout pending counts trees: 4 trees of 10 hold 40 messages, and the buffer
    (``BrokerSpout.default_buffer``) holds the next 40; a prefetch of 4 + 40 would
    leave the spout unable to fill even its pending trees."""
    src, _, _ = queues
    put(channel, src, [f"m{i}" for i in range(300)])
    conf = {**CONF, "topology.max.spout.pending": 4}
    b = TopologyBuilder()
    b.set_spout("source", RabbitMQSpout(src, URL, messages_per_tree=10))
    b.set_bolt("hold", HoldAll()).shuffle_grouping("source")
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-prefetch-trees", conf, b.create_topology())
        assert until(lambda: ready(channel, src) <= 220)
        assert not until(lambda: ready(channel, src) < 220, 1.0)
        counts = connector_totals(cluster.metrics("rabbit-prefetch-trees")["source"])
    # (A tree takes what is buffered when it is made, not always ten: held may be
    # under 40, and what the prefetch let in waits in the buffer or the session.)
    assert counts["trees"] == 4 and 31 <= counts["held"] <= 40


def test_a_spout_held_back_by_its_pending_trees_keeps_its_connection(
    channel: Any, queues: Any
) -> None:
    """Max spout pending reached and nothing completing, the spout's buffer stays full and
    its I/O thread fetches nothing; it must still talk to the broker, or pika sends no
    heartbeat and RabbitMQ closes the connection (heartbeat 1 s here, so within a few
    seconds), handing every unacked message back: each would be delivered again."""
    src, _, _ = queues
    put(channel, src, [f"m{i}" for i in range(300)])
    conf = {**CONF, "topology.max.spout.pending": 20, "topology.message.timeout.secs": 60}
    b = TopologyBuilder()
    b.set_spout("source", RabbitMQSpout(src, URL + "?heartbeat=1"))
    b.set_bolt("hold", HoldAll()).shuffle_grouping("source")
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-heartbeat", conf, b.create_topology())
        assert until(lambda: ready(channel, src) <= 260)
        # Several heartbeat timeouts: a connection left silent is closed by now, and its
        # 40 messages are ready again.
        assert not until(lambda: ready(channel, src) > 260, 6.0)
        counts = connector_totals(cluster.metrics("rabbit-heartbeat")["source"])
        errors = cluster.errors("rabbit-heartbeat")
    assert counts["reconnects"] == 0 and counts["held"] == 20, counts
    assert errors == []


def fed_sink(out: str, url: str) -> tuple[FeederSpout, Any]:
    """A feeder -> a RabbitMQ sink writing to ``out``: the feeder and the topology."""
    feeder = FeederSpout(["message"])
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("sink", RabbitMQSink(out, url)).shuffle_grouping("feed")
    return feeder, b.create_topology()


def test_an_idle_sink_keeps_its_connection(channel: Any, queues: Any) -> None:
    """A sink with nothing to write for several heartbeat timeouts (heartbeat 1 s here)
    must still answer the broker's heartbeats: else RabbitMQ closes its connection and
    the next write fails, its inputs failed and replayed, an error reported."""
    _, out, _ = queues
    feeder, topology = fed_sink(out, URL + "?heartbeat=1")
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-idle-sink", CONF, topology)
        for i in range(5):
            feeder.feed([f"before {i}"], msg_id=i)
        assert until(lambda: ready(channel, out) == 5)
        threading.Event().wait(5.0)  # idle: several heartbeat timeouts
        for i in range(5, 10):
            feeder.feed([f"after {i}"], msg_id=i)
        assert until(lambda: ready(channel, out) == 10)
        sink = connector_totals(cluster.metrics("rabbit-idle-sink")["sink"])
        errors = cluster.errors("rabbit-idle-sink")
    assert sink["written"] == 10 and sink["lost"] == 0 and sink["reconnects"] == 0, sink
    assert errors == []


@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs rabbitmqctl")
def test_an_idle_sink_whose_connection_is_closed_reconnects_before_its_next_write(
    channel: Any, queues: Any
) -> None:
    """The broker closes the idle sink's connection: its keepalive finds out, the sink
    reports it and connects again at once, and the next write goes through (nothing
    failed, nothing lost)."""
    _, out, _ = queues
    feeder, topology = fed_sink(out, URL)
    with LocalCluster() as cluster:
        cluster.submit_topology("rabbit-closed-sink", CONF, topology)
        feeder.feed(["before"], msg_id=0)
        assert until(lambda: ready(channel, out) == 1)
        done = subprocess.run(
            ["rabbitmqctl", "close_all_connections", "tupletree test"],
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0
        sink = "rabbit-closed-sink"
        assert until(lambda: connector_totals(cluster.metrics(sink)["sink"])["reconnects"] == 1)
        feeder.feed(["after"], msg_id=1)
        assert until(lambda: ready(channel, out) == 2)
        counts = connector_totals(cluster.metrics(sink)["sink"])
        errors = cluster.errors(sink)
    assert counts["written"] == 2 and counts["lost"] == 0, counts
    assert any("RabbitMQSink 'sink'" in e and "CONNECTION_FORCED" in e for e in errors)


def test_a_given_up_message_without_a_dead_letter_is_rejected_not_requeued(
    channel: Any, queues: Any
) -> None:
    """No ``dead_letter``: a message that failed for good is rejected without requeue,
    so the queue's own dead-letter exchange takes it, once (requeued, it would come
    back to fail again, thousands of times a second)."""
    _, _, dead = queues
    src = f"{dead}-with-dlx"
    channel.queue_declare(
        src, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead}
    )
    try:
        put(channel, src, [POISON, "fine"])
        spout = RabbitMQSpout(src, URL, retry=RetryPolicy(max_retries=0))
        with LocalCluster() as cluster:
            cluster.submit_topology("rabbit-reject", CONF, pipeline(spout, None, bolt=FailPoison()))
            assert until(lambda: ready(channel, dead) == 1)
            assert until(
                lambda: connector_totals(cluster.metrics("rabbit-reject")["source"])["acked"] == 1
            )
            counts = connector_totals(cluster.metrics("rabbit-reject")["source"])
        assert counts["dead_lettered"] == 1 and counts["received"] == 2
        assert ready(channel, src) == 0
        assert drain(channel, dead) == [POISON]
    finally:
        channel.queue_delete(src)


def test_a_sink_to_a_missing_exchange_is_refused_at_submit_naming_it(
    channel: Any, queues: Any
) -> None:
    """The submit-time check declared only the queue (and none when the sink publishes
    through an exchange): a missing exchange passed, and the broker then closed the
    channel at every publish. A passive declare of the exchange now refuses it at
    submit, naming it."""
    missing = f"tt-missing-{uuid.uuid4().hex[:10]}"
    sink = RabbitMQSink(url=URL, exchange=missing, routing_key="k")
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology("t", CONF, pipeline(FeederSpout(["message"]), sink))
    text = str(err.value)
    assert f"exchange {missing!r} does not exist" in text and "RabbitMQSink 'sink'" in text


def test_a_sink_to_an_existing_exchange_routes_by_its_key(channel: Any, queues: Any) -> None:
    _, out, _ = queues
    exchange = f"tt-ex-{uuid.uuid4().hex[:10]}"
    channel.exchange_declare(exchange, exchange_type="direct")
    try:
        channel.queue_bind(out, exchange, routing_key="k")
        feeder = FeederSpout(["message"])
        b = TopologyBuilder()
        b.set_spout("feed", feeder)
        sink = RabbitMQSink(url=URL, exchange=exchange, routing_key="k")
        b.set_bolt("sink", sink).shuffle_grouping("feed")
        with LocalCluster() as cluster:
            cluster.submit_topology("rabbit-exchange", CONF, b.create_topology())
            for i in range(3):
                feeder.feed([f"m{i}"], msg_id=i)
            assert until(lambda: ready(channel, out) == 3)
            errors = cluster.errors("rabbit-exchange")
        assert errors == []
        assert sorted(drain(channel, out)) == ["m0", "m1", "m2"]
    finally:
        channel.exchange_delete(exchange)
