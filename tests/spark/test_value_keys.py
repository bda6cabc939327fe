"""Fields grouping on values of the topology file's own classes, on Spark (issue 13,
item 9): such a class reaches the workers by value, so plain pickle cannot name it
there; the key hash must not need to, and must agree between the workers."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.spark.cluster import SparkCluster

pytestmark = pytest.mark.spark

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


@dataclass(frozen=True)
class Key:
    """A class of this module, which the Spark workers cannot import."""

    word: str
    tags: frozenset[str]


class EmitsKeys(Spout):
    outputs = ["key"]

    def __init__(self, total: int) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = context.this_task_index
        self.step = len(context.this_component_tasks())
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            n = self.replay.pop()
        elif self.n < self.total:
            n = self.n
            self.n += self.step
        else:
            return
        word = WORDS[n % len(WORDS)]
        self.collector.emit([Key(word, frozenset({word, "x", "y", "z"}))], msg_id=n)

    def fail(self, msg_id: int) -> None:
        self.replay.append(msg_id)


class Seen:
    def __init__(self, bolt: SeesKeys) -> None:
        self.bolt = bolt

    def __call__(self) -> dict[str, int]:
        return dict(self.bolt.seen)


class SeesKeys(BasicBolt):
    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.seen: Counter[str] = Counter()
        context.register_metric("seen", Seen(self))

    def execute(self, tup: Any, collector: Any) -> None:
        self.seen[tup[0].word] += 1


@pytest.fixture
def cluster(spark: Any) -> Any:
    with SparkCluster(spark) as c:
        yield c


def test_fields_grouping_on_a_by_value_class_routes_each_key_to_one_task(cluster):
    total = 400
    b = TopologyBuilder()
    b.set_spout("keys", EmitsKeys(total), parallelism=2)  # one emitter on each worker
    b.set_bolt("seen", SeesKeys(), parallelism=2).fields_grouping("keys", ["key"])
    conf = {
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_ACKER_EXECUTORS: 2,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 100,
    }
    cluster.submit_topology("value-keys", conf, b.create_topology())
    deadline = time.monotonic() + 120
    while cluster.metrics("value-keys")["keys"]["acked"] < total:
        assert cluster.errors("value-keys") == []  # the key hash failing shows here
        assert time.monotonic() < deadline, "timed out waiting for every key"
        time.sleep(0.1)
    assert cluster.errors("value-keys") == []
    per_task = cluster.metrics("value-keys")["seen"]["custom"]["seen"]
    owners: dict[str, set[int]] = {}
    for task, seen in per_task.items():
        for word in seen:
            owners.setdefault(word, set()).add(task)
    assert set(owners) == set(WORDS)
    # Emitted from both workers, every key still went to a single task.
    assert all(len(tasks) == 1 for tasks in owners.values()), owners
    cluster.kill_topology("value-keys")
