"""TridentBolt's batch tracking, driven tuple by tuple with plain values: when a task
has a whole batch (reports and counts), what it holds and when it acks or fails it,
stale and newer attempts, duplicates, expiry, and the committing bolt's two phases."""

from __future__ import annotations

import copy
import pickle
import re
import threading
from typing import Any

import pytest

from tupletree import Fields
from tupletree.config import validate
from tupletree.errors import InvalidTopologyError
from tupletree.runtime.context import TopologyContext
from tupletree.runtime.worker import make_layout
from tupletree.topology.tuple import Tuple, TupleSource
from tupletree.trident import TransactionAttempt as TA
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from .support import Split


class Collector:
    """Records what the bolt does with its collector."""

    def __init__(self) -> None:
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self.emitted: list[tuple[Any, ...]] = []
        self.errors: list[BaseException] = []

    def emit(self, values: Any, anchors: Any = None, stream: str = "default") -> list[int]:
        self.emitted.append((stream, None, list(values), anchors))
        return [99]

    def emit_direct(
        self, task: int, values: Any, anchors: Any = None, stream: str = "default"
    ) -> list[int]:
        self.emitted.append((stream, task, list(values), anchors))
        return [task]

    def ack(self, tup: Any) -> None:
        self.acked.append(tup)

    def fail(self, tup: Any) -> None:
        self.failed.append(tup)

    def report_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


def make(topology: TridentTopology, component: str, conf: dict[str, Any] | None = None):
    built = topology.build()
    full = validate(conf or {})
    layout = make_layout(built, full)
    task = layout.component_to_tasks[component][0]
    context = TopologyContext(layout, task, full, "t", now=lambda: 0.0)
    bolt = pickle.loads(pickle.dumps(built.components[component].obj))
    collector = Collector()
    bolt.prepare(full, context, collector)
    return bolt, collector, layout, built


def tup(layout: Any, component: str, stream: str, values: list[Any], fields: list[str]) -> Tuple:
    task = layout.component_to_tasks[component][0]
    return Tuple(values, TupleSource(component, stream, task, Fields(fields)))


def aggregating() -> tuple[Any, ...]:
    """sp -> partition_by(x) -> [partition_aggregate Count] (the bolt under test, b-0)
    -> partition_by(n) -> b-1 (3 tasks)."""
    t = TridentTopology()
    (
        t.new_stream("sp", FixedBatchSpout(Fields("x"), 2, [1], [2]))
        .partition_by(Fields("x"))
        .partition_aggregate(Count(), Fields("n"))
        .partition_by(Fields("n"))
        .each(Fields("n"), Split(), Fields("m"))
        .parallelism_hint(3)
    )
    bolt, collector, layout, built = make(t, "b-0")
    (data,) = [s.stream for s in built.components["b-0"].inputs if s.stream.startswith("s")]
    return bolt, collector, layout, data


def test_a_tuple_behind_its_report_still_completes_the_batch() -> None:
    bolt, out, layout, data = aggregating()
    bid = TA(1, 0)
    bolt.execute(tup(layout, "sp", data, [bid, 1], ["__batch", "x"]))
    coord = tup(layout, "sp", "$coord-bg0", [bid, 2], ["__batch", "count"])
    bolt.execute(coord)
    assert out.emitted == [] and coord not in out.acked  # one tuple still on its way
    bolt.execute(tup(layout, "sp", data, [bid, 2], ["__batch", "x"]))
    assert [v for s, _, v, _ in out.emitted if not s.startswith("$")] == [[bid, 2]]
    assert coord in out.acked


def test_a_batch_is_complete_once_the_report_and_its_tuples_are_in() -> None:
    bolt, out, layout, data = aggregating()
    bid = TA(1, 0)
    for x in (1, 2):
        bolt.execute(tup(layout, "sp", data, [bid, x], ["__batch", "x"]))
    coord = tup(layout, "sp", "$coord-bg0", [bid, 2], ["__batch", "count"])
    bolt.execute(coord)
    streams = [(s, task, v) for s, task, v, _ in out.emitted]
    data_out = [v for s, task, v in streams if not s.startswith("$")]
    assert data_out == [[bid, 2]]  # the partition's count
    downstream = sorted(layout.component_to_tasks["b-1"])
    reports = [(task, v) for s, task, v in streams if s == "$coord-bg0"]
    # every downstream task hears how many it got (the one emit went to "task 99")
    assert reports == [(t, [bid, 0]) for t in downstream]
    assert all(a is coord for s, _, _, a in out.emitted if s == "$coord-bg0")
    assert coord in out.acked and out.failed == []


def test_more_tuples_than_reported_fails_the_batch() -> None:
    bolt, out, layout, data = aggregating()
    bid = TA(1, 0)
    for x in (1, 2, 3):
        bolt.execute(tup(layout, "sp", data, [bid, x], ["__batch", "x"]))
    coord = tup(layout, "sp", "$coord-bg0", [bid, 2], ["__batch", "count"])
    bolt.execute(coord)
    assert coord in out.failed
    assert "received 3 tuples but upstream reported 2" in str(out.errors[0])
    assert [e for e in out.emitted if e[0] == "$coord-bg0"] == []


def test_a_stale_attempt_is_failed_and_ignored_a_newer_one_replaces_it() -> None:
    bolt, out, layout, data = aggregating()
    old, new = TA(1, 0), TA(1, 1)
    bolt.execute(tup(layout, "sp", data, [new, 1], ["__batch", "x"]))
    stale_data = tup(layout, "sp", data, [old, 5], ["__batch", "x"])
    stale_coord = tup(layout, "sp", "$coord-bg0", [old, 1], ["__batch", "count"])
    bolt.execute(stale_data)
    bolt.execute(stale_coord)
    assert stale_coord in out.failed
    coord = tup(layout, "sp", "$coord-bg0", [new, 1], ["__batch", "count"])
    bolt.execute(coord)
    assert coord in out.acked
    assert [v for s, _, v, _ in out.emitted if not s.startswith("$")] == [[new, 1]]


def test_a_newer_attempt_drops_the_older_one_and_fails_what_it_held() -> None:
    bolt, out, layout, data = aggregating()
    old, new = TA(2, 0), TA(2, 1)
    bolt.execute(tup(layout, "sp", data, [old, 1], ["__batch", "x"]))
    held = tup(layout, "sp", "$coord-bg0", [old, 2], ["__batch", "count"])
    bolt.execute(held)  # waiting for a second tuple that never comes
    assert held not in out.acked and held not in out.failed
    bolt.execute(tup(layout, "sp", data, [new, 7], ["__batch", "x"]))
    assert held in out.failed
    bolt.execute(tup(layout, "sp", "$coord-bg0", [new, 1], ["__batch", "count"]))
    assert [v for s, _, v, _ in out.emitted if not s.startswith("$")] == [[new, 1]]


def test_an_unfinished_batch_expires_after_two_message_timeouts() -> None:
    bolt, out, layout, data = aggregating()
    bolt.execute(tup(layout, "sp", data, [TA(3, 0), 1], ["__batch", "x"]))
    held = tup(layout, "sp", "$coord-bg0", [TA(3, 0), 2], ["__batch", "count"])
    bolt.execute(held)
    tick = Tuple([1], TupleSource("__system", "__system_tick", -1, Fields(["freq"])))
    for _ in range(59):
        bolt.execute(tick)
    assert bolt.metric()["trackedBatches"] == 1
    bolt.execute(tick)  # 60 s = 2 x the default 30 s timeout
    assert bolt.metric()["trackedBatches"] == 0
    assert held in out.failed


def test_a_committing_bolt_acks_in_processing_and_finishes_on_commit() -> None:
    t = TridentTopology()
    (
        t.new_stream("sp", FixedBatchSpout(Fields("sentence"), 2, ["a b"]))
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count"))
    )
    bolt, out, layout, built = make(t, "b-0")
    (data,) = [s.stream for s in built.components["b-0"].inputs if s.stream.startswith("s")]
    bid = TA(1, 0)
    bolt.execute(tup(layout, "sp", data, [bid, "a", 1], ["__batch", "word", "count"]))
    coord = tup(layout, "sp", "$coord-bg0", [bid, 1], ["__batch", "count"])
    bolt.execute(coord)
    assert coord in out.acked  # the $batch tree may complete: processing is done
    assert bolt.metric()["lastCommittedTxid"] == {}
    commit = tup(layout, "__mastercoord-bg0", "$commit", [bid], ["tx"])
    bolt.execute(commit)
    assert commit in out.acked
    assert bolt.metric()["lastCommittedTxid"] == {"state-1": 1}
    assert bolt.metric()["trackedBatches"] == 0


class Boom(Split):
    def execute(self, tup: Any, collector: Any) -> None:
        raise ValueError("boom")


def test_an_operation_error_fails_the_batch_and_reports_it() -> None:
    t = TridentTopology()
    (
        t.new_stream("sp", FixedBatchSpout(Fields("x"), 2, [1]))
        .partition_by(Fields("x"))
        .each(Fields("x"), Boom(), Fields("y"))
        .partition_by(Fields("y"))
        .each(Fields("y"), Split(), Fields("z"))
    )
    bolt, out, layout, built = make(t, "b-0")
    (data,) = [s.stream for s in built.components["b-0"].inputs if s.stream.startswith("s")]
    bolt.execute(tup(layout, "sp", data, [TA(1, 0), 1], ["__batch", "x"]))
    coord = tup(layout, "sp", "$coord-bg0", [TA(1, 0), 1], ["__batch", "count"])
    bolt.execute(coord)
    assert coord in out.failed
    assert "boom" in str(out.errors[0])
    assert bolt.metric()["failedBatches"] == 1


def test_the_compiled_bolt_survives_a_copy() -> None:
    """Each task gets a pickled copy: plans, processors and user operations pickle."""
    bolt, _, _, _ = aggregating()
    copy.deepcopy(bolt.plan)


class Unreachable(MemoryMapState.Factory):
    """A state whose database cannot be reached when the task starts."""

    def make_state(self, conf: Any, metrics: Any, index: int, partitions: int) -> Any:
        raise ConnectionError("test: the state's database at db:5432 is unreachable")


def test_a_task_whose_prepare_failed_fails_its_batches_naming_the_cause(
    sim_cluster, caplog
) -> None:
    """The runtime reports a failed prepare once and still delivers tuples (as Storm);
    each then failed with "'TridentBolt' object has no attribute '_by_stream'", whose
    flood pushed the cause out of the error book, and cleanup raised the same way."""
    t = TridentTopology()
    spout = FixedBatchSpout(Fields("sentence"), 2, ["a b"], ["c d"])
    t.new_stream("sp", spout).each(Fields("sentence"), Split(), Fields("word")).group_by(
        Fields("word")
    ).persistent_aggregate(Unreachable(), Count(), Fields("count"))
    conf = {"topology.trident.batch.emit.interval.millis": 100}
    sim_cluster.submit_topology("t", conf, t.build())
    sim_cluster.advance_time(5)
    errors = sim_cluster.errors("t")
    assert "prepare: ConnectionError" in errors[0]
    later = errors[1:]
    assert later and all("unreachable" in e and "prepare failed" in e for e in later), later
    caplog.clear()
    sim_cluster.kill_topology("t")
    assert "cleanup" not in caplog.text


class LockedFactory(MemoryMapState.Factory):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


class LockedSplit(Split):
    def __init__(self) -> None:
        self.lock = threading.Lock()


class LockedSpout(FixedBatchSpout):
    def __init__(self) -> None:
        super().__init__(Fields("sentence"), 2, ["a b"])
        self.lock = threading.Lock()


@pytest.mark.parametrize(
    ("spout", "split", "factory", "named"),
    [
        (LockedSpout, Split, MemoryMapState.Factory, "its spout 'sp'"),
        (
            lambda: FixedBatchSpout(Fields("sentence"), 2, ["a"]),
            LockedSplit,
            MemoryMapState.Factory,
            "its operation 'sp:each LockedSplit#1'",
        ),
        (
            lambda: FixedBatchSpout(Fields("sentence"), 2, ["a"]),
            Split,
            LockedFactory,
            "its state factory LockedFactory",
        ),
    ],
)
def test_an_unpicklable_part_is_named_at_submit(sim_cluster, spout, split, factory, named) -> None:
    """The error named only the bolt ("component 'sp' (TridentBolt) cannot be copied"),
    which holds the spout, every operation after it and its states."""
    t = TridentTopology()
    t.new_stream("sp", spout()).each(Fields("sentence"), split(), Fields("word")).group_by(
        Fields("word")
    ).persistent_aggregate(factory(), Count(), Fields("count"))
    with pytest.raises(
        InvalidTopologyError, match=f"TridentBolt: {re.escape(named)}\\) cannot be copied"
    ):
        sim_cluster.submit_topology("t", {}, t.build())
