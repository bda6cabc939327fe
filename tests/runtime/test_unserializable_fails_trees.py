"""An item bound for another worker that cannot be serialized fails every tree it is in,
at once (Worker.fail_unserializable), so the spout replays them without waiting for the
message timeout: for a Tuple its trees, for a Batch (a BatchBolt's emits) the trees of
all its rows, a row anchored to several trees (multi-anchoring) included."""

from __future__ import annotations

from typing import Any

from tupletree import Bolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.reliability.protocol import FAIL
from tupletree.runtime.worker import Worker, make_layout
from tupletree.topology.batch import Batch
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource


class Quiet(Spout):
    outputs = ["word"]

    def next_tuple(self) -> None:
        pass


class Sink(Bolt):
    outputs = ["word"]

    def execute(self, tup: Any) -> None:
        pass


def _worker() -> tuple[Worker, int, Any]:
    b = TopologyBuilder()
    b.set_spout("words", Quiet())
    b.set_bolt("emitter", Sink()).shuffle_grouping("words")
    topology = b.create_topology()
    conf = validate({Config.TOPOLOGY_ACKER_EXECUTORS: 1})
    tasks = make_layout(topology, conf).component_to_tasks
    worker = Worker("w", topology, conf, lambda: 0.0)
    worker.start()
    acker = worker.executors[tasks["__acker"][0]]
    acker.inbox.clear()
    return worker, tasks["emitter"][0], acker


def test_an_unserializable_batch_fails_the_trees_of_every_row_multi_anchored_included() -> None:
    worker, task, acker = _worker()
    src = TupleSource("emitter", "default", task, Fields(["word"]))
    rows = [
        Tuple(["a"], src, 101, 1),
        Tuple(["b"], src, 0, 0, {202: 2, 303: 3}),  # anchored to two trees
        Tuple(["c"], src, 404, 4),
    ]
    worker.fail_unserializable(Batch.of_tuples(rows), TypeError("no pickle"))
    assert sorted(acker.inbox) == sorted((FAIL, root, 0, 0) for root in (101, 202, 303, 404))


def test_an_unserializable_tuple_fails_each_of_its_trees() -> None:
    worker, task, acker = _worker()
    src = TupleSource("emitter", "default", task, Fields(["word"]))
    worker.fail_unserializable(Tuple(["b"], src, 0, 0, {202: 2, 303: 3}), TypeError("no"))
    assert sorted(acker.inbox) == [(FAIL, 202, 0, 0), (FAIL, 303, 0, 0)]
