"""What the broker tests share: polling with a deadline, and the end-to-end topology
(a spout, a bolt that fails about a fifth of its inputs at random, a sink)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from tupletree import BasicBolt, Bolt, FailedException, TopologyBuilder
from tupletree.topology.builder import Topology

POISON = "poison"
CONF = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200}


def until(cond: Callable[[], bool], secs: float = 60.0) -> bool:
    """Poll ``cond`` until it holds or ``secs`` passed (generous: a loaded machine)."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class FailAFifth(BasicBolt):
    """Passes each message on, failing about a fifth at random, and every ``poison``."""

    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == POISON or self.rng.random() < 0.2:
            raise FailedException("failed at random")
        collector.emit([tup[0]])


class SlowAcker(Bolt):
    """Holds each input ``hold_ticks`` tick tuples, resetting its timeout at each tick."""

    outputs: list[str] = []

    def __init__(self, hold_ticks: int) -> None:
        self.hold_ticks = hold_ticks

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        if not tup.is_tick():
            self.held[tup] = 0
            return
        for held in list(self.held):
            self.held[held] += 1
            if self.held[held] >= self.hold_ticks:
                del self.held[held]
                self.collector.ack(held)
            else:
                self.collector.reset_timeout(held)


class ResetThenAck(Bolt):
    """Resets each input's tree timeout, then acks it."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.reset_timeout(tup)
        self.collector.ack(tup)


class FailPoison(BasicBolt):
    """Fails every ``poison``, passes the other messages on."""

    outputs = ["message"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == POISON:
            raise FailedException("poison")
        collector.emit([tup[0]])


def pipeline(
    spout: Any, sink: Any, workers: int = 1, bolt: Any = None, spouts: int | None = None
) -> Topology:
    """spout -> ``bolt`` (FailAFifth by default) -> ``sink`` (None: no sink)."""
    b = TopologyBuilder()
    b.set_spout("source", spout, parallelism=spouts or workers)
    work = bolt if bolt is not None else FailAFifth()
    b.set_bolt("work", work, parallelism=workers).shuffle_grouping("source")
    if sink is not None:
        b.set_bolt("sink", sink, parallelism=workers).shuffle_grouping("work")
    return b.create_topology()


def module_kafka_broker() -> Iterator[Any]:
    """A Kafka-compatible broker (tansu) for a test module, stopped after it; the
    module is skipped where none can start. Each Kafka test module makes it its
    fixture: ``broker = pytest.fixture(scope="module", name=...)(module_kafka_broker)``."""
    import pytest

    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from tupletree.connectors.kafka.local_broker import BrokerUnavailable, LocalKafkaBroker

    try:
        b = LocalKafkaBroker().start()
    except BrokerUnavailable as exc:
        pytest.skip(f"no Kafka-compatible broker: {exc}")
    yield b
    b.stop()
