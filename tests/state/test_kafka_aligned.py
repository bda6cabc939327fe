"""The aligned mode over Kafka: KafkaSpout's position is its offsets; a stateful word
count over a two-partition topic, killed once its count tasks committed checkpoint 3
(the store left as it was), submitted again: the counts are exact, and the group's
committed offsets reach the end of the topic. Against tansu, started for the module
(skipped with the reason where it cannot be had)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tupletree import Config, LocalCluster, TopologyBuilder

from . import crash
from .components import SplitWords, StatefulWordCount, check_counts, committed, sentence
from .conftest import Provider

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
from tupletree.connectors.kafka import KafkaSpout  # noqa: E402
from tupletree.connectors.kafka.local_broker import (  # noqa: E402
    BrokerUnavailable,
    LocalKafkaBroker,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalKafkaBroker]:
    try:
        b = LocalKafkaBroker().start()
    except BrokerUnavailable as exc:
        pytest.skip(f"no Kafka-compatible broker: {exc}")
    yield b
    b.stop()


def decode(body: bytes) -> list[Any]:
    """'<i>' -> [sentence i, i]."""
    i = int(body)
    return [" ".join(sentence(i)), i]


def topology(broker: LocalKafkaBroker, topic: str, group: str) -> Any:
    b = TopologyBuilder()
    spout = KafkaSpout(
        topic, group, broker.bootstrap_servers, fields=["sentence", "msg"], decode=decode
    )
    b.set_spout("source", spout, 2)
    b.set_bolt("split", SplitWords(), 2).shuffle_grouping("source")
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", ["word"])
    return b.create_topology()


def applied(store: Any) -> int:
    return sum(1 for k in committed(store) if isinstance(k, tuple))


def until(predicate: Any, secs: float, what: str) -> None:
    deadline = time.monotonic() + secs
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {secs} s")
        time.sleep(0.1)


def test_aligned_word_count_over_kafka_is_exact_after_a_kill(
    broker: LocalKafkaBroker, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    crash.install(monkeypatch)
    provider = Provider("sqlite", {"path": str(tmp_path / "state.db")})
    topic, group = "t" + uuid.uuid4().hex[:10], "g" + uuid.uuid4().hex[:10]
    broker.create_topic(topic, 2)
    n = 300
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(n):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    words = sum(len(sentence(i)) for i in range(n))
    crashed = crash.Crash(crash.txid_written("count", "commit", 3, tasks=2))
    base = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 200,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
    }
    store = provider.open()
    with LocalCluster() as cluster:
        conf = {**base, **provider.conf}
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = crashed.config(provider.config)
        cluster.submit_topology("wc", conf, topology(broker, topic, group))
        until(lambda: crashed.crashed, 60, "crashed")
        cluster.kill_topology("wc")
    assert 0 < applied(store) < words
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", {**base, **provider.conf}, topology(broker, topic, group))
        until(lambda: applied(store) >= words, 90, "every word committed")
        assert cluster.errors("wc") == []
    check_counts(store, n, {}, exact=True)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group}
    )
    parts = [confluent_kafka.TopicPartition(topic, p) for p in (0, 1)]
    offsets = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=10)}
    consumer.close()
    assert offsets == {0: n // 2, 1: n // 2}


class FlakySplit(SplitWords):
    """Fails message 37 the first time, after emitting its first word (a flag file in
    ``flags`` says it happened)."""

    def __init__(self, flags: str) -> None:
        self.flags = flags

    def execute(self, tup: Any, collector: Any) -> None:
        import os

        from tupletree import FailedException

        if tup[1] == 37:
            try:
                os.close(os.open(os.path.join(self.flags, "failed"), os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                collector.emit([tup[0].split()[0], 37, 0])
                raise FailedException("message 37, the first time")
        super().execute(tup, collector)


@pytest.mark.parametrize("mode", ["storm", "aligned"])
def test_a_failed_input_is_rewound_not_replayed_in_the_aligned_mode(
    broker: LocalKafkaBroker, tmp_path: Any, mode: str
) -> None:
    """A split fails message 37 after emitting one of its words. Storm's mode replays
    message 37 (at-least-once): that word is counted twice. The aligned mode refuses the
    next checkpoint, rolls every state back and rewinds the spouts, running: exact."""
    provider = Provider("sqlite", {"path": str(tmp_path / "state.db")})
    topic, group = "t" + uuid.uuid4().hex[:10], "g" + uuid.uuid4().hex[:10]
    broker.create_topic(topic, 2)
    n = 120
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(n):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    b = TopologyBuilder()
    spout = KafkaSpout(
        topic, group, broker.bootstrap_servers, fields=["sentence", "msg"], decode=decode
    )
    b.set_spout("source", spout, 2)
    b.set_bolt("split", FlakySplit(str(tmp_path)), 2).shuffle_grouping("source")
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", ["word"])
    conf = {
        **provider.conf,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 200,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: mode,
    }
    words = sum(len(sentence(i)) for i in range(n))
    store = provider.open()
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", conf, b.create_topology())
        until(lambda: applied(store) >= words, 60, "every word committed")
        time.sleep(0.5)  # a checkpoint or two more: nothing else may change
    twice = check_counts(store, n, {37: 2}, exact=mode == "aligned")
    if mode == "storm":
        assert twice == {(37, 0)}
