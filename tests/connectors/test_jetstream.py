"""JetStreamSpout and JetStreamSink against the NATS server of this machine
(127.0.0.1:4222 with JetStream; skipped with the reason where there is none)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from typing import Any

import pytest

from tests.connectors.proxy import TcpProxy
from tests.connectors.support import CONF, FailPoison, SlowAcker, pipeline, until
from tupletree import LocalCluster
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals
from tupletree.errors import InvalidConfigError

nats = pytest.importorskip("nats", reason="nats-py is not installed")
from tupletree.connectors.nats import JetStreamSink, JetStreamSpout  # noqa: E402

SERVER = "nats://127.0.0.1:4222"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _with_js(fn: Any) -> Any:
    nc = await nats.connect(SERVER, max_reconnect_attempts=1, connect_timeout=2)
    try:
        return await fn(nc.jetstream())
    finally:
        await nc.close()


@pytest.fixture(scope="module")
def jetstream() -> None:
    async def probe(js: Any) -> None:
        await js.account_info()

    try:
        _run(_with_js(probe))
    except Exception as exc:
        pytest.skip(f"no NATS server with JetStream at {SERVER}: {type(exc).__name__}: {exc}")


class Streams:
    """Throwaway streams named for one test, deleted afterwards."""

    def __init__(self) -> None:
        self.prefix = "tt" + uuid.uuid4().hex[:10]
        self.names: list[str] = []

    def add(self, name: str, bodies: list[bytes] = ()) -> tuple[str, str]:  # type: ignore[assignment]
        stream = f"{self.prefix}_{name}"
        subject = f"{self.prefix}.{name}"

        async def go(js: Any) -> None:
            await js.add_stream(name=stream, subjects=[subject])
            for body in bodies:
                await js.publish(subject, body)

        _run(_with_js(go))
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

        return _run(_with_js(go))  # type: ignore[no-any-return]

    def consumer(self, stream: str, durable: str) -> Any:
        async def go(js: Any) -> Any:
            return await js.consumer_info(stream, durable)

        return _run(_with_js(go))

    def drop(self) -> None:
        async def go(js: Any) -> None:
            for name in self.names:
                with contextlib.suppress(Exception):
                    await js.delete_stream(name)

        _run(_with_js(go))


@pytest.fixture
def streams(jetstream: None) -> Any:
    s = Streams()
    yield s
    s.drop()


def test_every_message_reaches_the_sink_and_nothing_stays_pending(streams: Streams) -> None:
    """300 messages -> spout -> a bolt failing ~1/5 at random -> sink: each reaches the
    sink stream at least once, and the consumer ends with nothing pending or unacked."""
    bodies = [f"m{i}".encode() for i in range(300)]
    src, _ = streams.add("in", bodies)
    out, out_subject = streams.add("out")
    spout = JetStreamSpout(src, "work", SERVER, retry=RetryPolicy(initial_delay_secs=0.01))
    with LocalCluster() as cluster:
        cluster.submit_topology("js", CONF, pipeline(spout, JetStreamSink(out_subject, SERVER)))
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
    # The retries came back from the broker (nak with delay), counted as redeliveries.
    assert counts["redelivered"] >= counts["retried"]
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
    with TcpProxy(("127.0.0.1", 4222)) as proxy:
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
    assert counts["reconnects"] >= 3 and sink["reconnects"] >= 1


@pytest.mark.xfail(
    strict=False,
    reason="known defect, under investigation (issue 14): now and then the nak'ed "
    "'poison' is not delivered again within a minute (3 of 5 runs in one series, 0 of 6 "
    "in others; once on Spark); the other JetStream tests pass",
)
def test_a_message_that_always_fails_goes_to_the_dead_letter(streams: Streams) -> None:
    """'poison' fails every time: after max_retries it is written to the dead-letter
    subject and terminated; the others are acked and unaffected."""
    src, _ = streams.add("in", [b"a", b"poison", b"b", b"c"])
    dead, dead_subject = streams.add("dead")
    spout = JetStreamSpout(
        src,
        "work",
        SERVER,
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
    info = streams.consumer(src, "work")
    assert info.num_pending == 0 and info.num_ack_pending == 0


def test_reset_timeout_keeps_the_lease_of_a_slow_tree(streams: Streams) -> None:
    """A bolt that holds a message longer than ack_wait, resetting its timeout, keeps
    the broker from delivering it again (in-progress renews the lease)."""
    src, _ = streams.add("in", [b"slow"])
    spout = JetStreamSpout(src, "work", SERVER, ack_wait=1.5)
    # Held 15 ticks of 0.2 s (3 s, twice ack_wait), its timeout reset at each tick.
    conf = {"topology.message.timeout.secs": 0.5, "topology.tick.tuple.freq.secs": 0.2}
    with LocalCluster() as cluster:
        cluster.submit_topology("js", conf, pipeline(spout, None, bolt=SlowAcker(15)))
        done = until(lambda: connector_totals(cluster.metrics("js")["source"])["acked"] == 1, 20)
        counts = connector_totals(cluster.metrics("js")["source"])
        assert done, (counts, cluster.metrics("js")["source"], cluster.errors("js"))
    assert counts["received"] == 1 and counts["redelivered"] == 0 and counts["failed"] == 0
    assert streams.consumer(src, "work").num_redelivered == 0


def test_a_message_timeout_not_under_ack_wait_is_refused_at_submit(streams: Streams) -> None:
    """The message timeout must stay under the consumer's ack_wait; the error names the
    key to change."""
    src, _ = streams.add("in")
    spout = JetStreamSpout(src, "work", SERVER, ack_wait=8)
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("js", CONF, pipeline(spout, None))
    assert err.value.key == "topology.message.timeout.secs"
    assert "ack_wait" in str(err.value) and "JetStreamSpout 'source'" in str(err.value)


def test_an_existing_consumers_shorter_ack_wait_is_refused_at_submit(streams: Streams) -> None:
    """The lease that counts is the existing consumer's, not the keyword's."""
    src, _ = streams.add("in")
    with LocalCluster() as cluster:
        first = JetStreamSpout(src, "work", SERVER, ack_wait=30)
        cluster.submit_topology("a", CONF, pipeline(first, None))
        cluster.kill_topology("a")
        spout = JetStreamSpout(src, "work", SERVER, ack_wait=600)
        conf = {"topology.message.timeout.secs": 20}  # fits 600 s, not the consumer's 30
        with pytest.raises(InvalidConfigError, match="existing consumer 'work'"):
            cluster.submit_topology("b", conf, pipeline(spout, None))


def test_a_missing_stream_is_an_error_naming_connector_address_and_stream(
    streams: Streams,
) -> None:
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology("js", CONF, pipeline(JetStreamSpout("nosuch", "d", SERVER), None))
    text = str(err.value)
    assert "JetStreamSpout 'source'" in text and SERVER in text
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
    sink = JetStreamSink(f"{streams.prefix}.nowhere", SERVER)
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology("js", CONF, pipeline(JetStreamSpout(src, "w", SERVER), sink))
    assert "JetStreamSink 'sink'" in str(err.value) and "no stream captures" in str(err.value)
