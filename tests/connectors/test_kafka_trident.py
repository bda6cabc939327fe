"""Kafka's Trident spouts against a real Kafka-compatible broker (tansu): every record of
3 partitions counted exactly once through the transactional and the opaque spout, their
batch metadata Storm's; and Kafka to Kafka through the exactly-once Kafka state while
batches fail after their transaction committed: a read_committed reader sees each
input once."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

from tupletree import Config, FailedException, Fields, LocalCluster
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
from tupletree.connectors.kafka import (  # noqa: E402
    KafkaTridentSpoutOpaque,
    KafkaTridentSpoutTransactional,
    TridentKafkaStateFactory,
    TridentKafkaStateUpdater,
)
from tupletree.connectors.kafka.local_broker import LocalKafkaBroker  # noqa: E402
from tupletree.connectors.kafka.trident_state import TridentKafkaState  # noqa: E402

from ..registry import entries, new_journal, record  # noqa: E402
from ..trident.support import memory_counts  # noqa: E402
from .support import module_kafka_broker  # noqa: E402
from .test_kafka import produce, topic  # noqa: E402

CONF = {
    Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 20,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
}


broker = pytest.fixture(scope="module", name="broker")(module_kafka_broker)


def wait(predicate: Any, secs: float, what: str) -> None:
    import time

    deadline = time.monotonic() + secs
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {secs} s waiting for {what}")
        time.sleep(0.1)


def read_committed(broker: LocalKafkaBroker, name: str) -> list[bytes]:
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "reader-" + uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        parts = c.list_topics(name, timeout=10).topics[name].partitions
        c.assign([confluent_kafka.TopicPartition(name, p, 0) for p in parts])
        out, idle = [], 0
        while idle < 4:
            msgs = c.consume(1000, 0.5)
            idle = 0 if msgs else idle + 1
            out += [m.value() for m in msgs if m.error() is None]
        return out
    finally:
        c.close()


@pytest.mark.parametrize("kind", [KafkaTridentSpoutTransactional, KafkaTridentSpoutOpaque])
def test_every_record_counted_once(broker: LocalKafkaBroker, kind: type) -> None:
    src = topic(broker, 3)
    bodies = [f"m{i % 50}".encode() for i in range(900)]
    produce(broker, src, bodies)
    spout = kind(src, "g-" + uuid.uuid4().hex[:6], broker.bootstrap_servers, max_batch_size=40)
    factory = MemoryMapState.Factory()
    t = TridentTopology()
    t.new_stream("kafka", spout).parallelism_hint(2).group_by(
        Fields("message")
    ).persistent_aggregate(factory, Count(), Fields("count"))
    want = dict(Counter(b.decode() for b in bodies))
    with LocalCluster() as cluster:
        cluster.submit_topology("k", CONF, t.build())
        wait(lambda: memory_counts(factory, 1) == want, 120, "every record counted")
        assert cluster.errors("k") == []
        built = cluster.topology_info("k")["topology"]
        build_name = built.components["__mastercoord-bg0"].obj.progress_name[0]
    from tupletree.store import MemoryStore
    from tupletree.trident.progress import Progress, memory_store_name

    store_name = memory_store_name(build_name, "k")

    metas = Progress(MemoryStore(store_name), ["kafka"]).partition_metas("kafka", ["0", "1", "2"])
    some = next(iter(metas["0"].values()))
    assert set(some) == {"firstOffset", "lastOffset", "topologyId"}
    assert some["topologyId"] == spout.topology_id


class FailAfterCommit(TridentKafkaState):
    """Fails the first commit phase of each txid in ``journal``'s plan after the Kafka
    transaction committed (before the batch's ack): the replay must not write again."""

    def commit(self, txid: Any) -> None:
        super().commit(txid)
        key = (self.partition_index_for_test, txid)
        if txid % 2 == 0 and key not in entries(self.failed_journal):
            record(self.failed_journal, key)
            raise FailedException(f"test: failing txid {txid} after its transaction committed")


class FailingFactory(TridentKafkaStateFactory):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = new_journal()

    def make_state(self, conf: Any, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        state = super().make_state(conf, metrics, partition_index, num_partitions)
        state.__class__ = FailAfterCommit
        state.failed_journal = self.failed
        state.partition_index_for_test = partition_index
        return state


def test_kafka_to_kafka_exactly_once_while_batches_fail_after_commit(
    broker: LocalKafkaBroker,
) -> None:
    src, out = topic(broker, 3), topic(broker, 2)
    bodies = [f"r{i}".encode() for i in range(600)]
    produce(broker, src, bodies)
    spout = KafkaTridentSpoutTransactional(
        src, "g-" + uuid.uuid4().hex[:6], broker.bootstrap_servers, max_batch_size=30
    )
    sink = FailingFactory(
        out, broker.bootstrap_servers, transactional_id_prefix="tt-" + uuid.uuid4().hex[:6]
    )
    t = TridentTopology()
    t.new_stream("kafka", spout).partition_by(Fields("message")).partition_persist(
        sink, Fields("message"), TridentKafkaStateUpdater()
    ).parallelism_hint(2)
    with LocalCluster() as cluster:
        cluster.submit_topology("k2k", CONF, t.build())
        wait(lambda: len(read_committed(broker, out)) >= len(bodies), 180, "every record out")
        seen = read_committed(broker, out)
        assert cluster.errors("k2k") == [] or all(
            "test: failing" in e for e in cluster.errors("k2k")
        )
    assert entries(sink.failed), "no batch failed after its commit: the test tested nothing"
    assert sorted(seen) == sorted(bodies)  # each input exactly once
