"""Storm's DRPC scenarios (storm-core drpc_test.clj), on a real-time LocalCluster with
LocalDRPC, plus failure, timeout and concurrency."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tupletree import Config, TopologyBuilder
from tupletree.drpc import (
    DRPCExecutionError,
    DRPCSpout,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
    ReturnResults,
)
from tupletree.topology.groupings import CustomStreamGrouping

from .support import (
    BasicPartialCount,
    CountAggregator,
    CountOnTick,
    CreateTuples,
    EmitFinish,
    ExclamationBolt,
    ExclamationDRPC,
    ExitOn,
    FailFinish,
    FailOn,
    IdBolt,
    NeverFinish,
    PartialCount,
    Reverse,
)


def square_topology(drpc: LocalDRPC, partial: object = None) -> object:
    builder = LinearDRPCTopologyBuilder("square")
    builder.add_bolt(CreateTuples(), 3)
    builder.add_bolt(partial or PartialCount(), 3).shuffle_grouping()
    builder.add_bolt(CountAggregator(), 3).fields_grouping(["request"])
    return builder.create_local_topology(drpc)


def test_drpc_flow(cluster, drpc):
    """A hand-built DRPC spout -> bolt -> ReturnResults topology answers "aaa" -> "aaa!!!"."""
    b = TopologyBuilder()
    b.set_spout("1", DRPCSpout("test", drpc))
    b.set_bolt("2", ExclamationBolt()).shuffle_grouping("1")
    b.set_bolt("3", ReturnResults()).global_grouping("2")
    cluster.submit_topology("test", {}, b.create_topology())
    assert drpc.execute("test", "aaa") == "aaa!!!"
    assert drpc.execute("test", "b") == "b!!!"
    assert drpc.execute("test", "c") == "c!!!"
    assert cluster.errors("test") == []


def test_drpc_builder(cluster, drpc):
    """The linear builder with one bolt of parallelism 3 answers every request."""
    builder = LinearDRPCTopologyBuilder("test")
    builder.add_bolt(ExclamationDRPC(), 3)
    cluster.submit_topology("builder-test", {}, builder.create_local_topology(drpc))
    for arg in ("aaa", "b", "c", "", "ünïcode"):
        assert drpc.execute("test", arg) == arg + "!!!"
    assert drpc.pending_requests() == 0


def test_drpc_coordination(cluster, drpc):
    """N*N tuples counted by partial counts and summed by a FinishedCallback aggregator."""
    cluster.submit_topology("squared", {}, square_topology(drpc))
    assert drpc.execute("square", "2") == "4"
    assert drpc.execute("square", "10") == "100"
    assert drpc.execute("square", "1") == "1"
    assert drpc.execute("square", "0") == "0"
    assert cluster.errors("squared") == []


def test_drpc_coordination_basic_bolt_finished_callback(cluster, drpc):
    """A BasicBolt FinishedCallback emits its result through the collector it is given."""
    cluster.submit_topology("squared", {}, square_topology(drpc, BasicPartialCount()))
    assert [drpc.execute("square", n) for n in ("3", "0", "7")] == ["9", "0", "49"]


def test_drpc_coordination_waits_for_late_acks(cluster, drpc):
    """A bolt acking after the upstream count report finishes only once it acked them all."""
    builder = LinearDRPCTopologyBuilder("square")
    builder.add_bolt(CreateTuples(), 2)
    builder.add_bolt(CountOnTick(), 2).shuffle_grouping().add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0.05
    )
    builder.add_bolt(CountAggregator(), 2).fields_grouping(["request"])
    cluster.submit_topology("late-acks", {}, builder.create_local_topology(drpc))
    assert [drpc.execute("square", n) for n in ("3", "0", "6")] == ["9", "0", "36"]
    assert cluster.errors("late-acks") == []


class _AcksTicks:
    """Acks tick tuples instead of taking them for data, as a bolt in a topology with
    topology-level ticks must (in Storm too)."""

    def execute(self, tup: object) -> None:
        if tup.is_tick():  # type: ignore[attr-defined]
            self.collector.ack(tup)  # type: ignore[attr-defined]
            return
        super().execute(tup)  # type: ignore[misc]


class TickAwareCreateTuples(_AcksTicks, CreateTuples):
    pass


class TickAwareCountAggregator(_AcksTicks, CountAggregator):
    pass


def test_topology_level_ticks_reach_a_wrapped_bolt(cluster):
    """Tick tuples set for the whole topology reach the user's bolt inside its
    CoordinatedBolt, as they reach any other bolt (the wrapper's expiry has ticks of its
    own): CountOnTick acks only on ticks, so without them no request would finish."""
    with LocalDRPC({Config.DRPC_REQUEST_TIMEOUT_SECS: 20}) as drpc:
        builder = LinearDRPCTopologyBuilder("square")
        builder.add_bolt(TickAwareCreateTuples(), 2)
        builder.add_bolt(CountOnTick(), 2).shuffle_grouping()
        builder.add_bolt(TickAwareCountAggregator(), 2).fields_grouping(["request"])
        conf = {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 0.05}
        cluster.submit_topology("topology-ticks", conf, builder.create_local_topology(drpc))
        assert [drpc.execute("square", n) for n in ("3", "0", "6")] == ["9", "0", "36"]
        assert cluster.errors("topology-ticks") == []


def test_drpc_coordination_tricky(cluster, drpc):
    """A chain of identity bolts ending in a finish-emitting bolt answers every input."""
    builder = LinearDRPCTopologyBuilder("tricky")
    builder.add_bolt(IdBolt(), 3)
    builder.add_bolt(IdBolt(), 3).shuffle_grouping()
    builder.add_bolt(EmitFinish(), 3).fields_grouping(["request"])
    cluster.submit_topology("tricky", {}, builder.create_local_topology(drpc))
    for arg in "abcdefgh":
        assert drpc.execute("tricky", arg) == "done"


def test_drpc_fail_finish(cluster):
    """finished_id raising FailedException makes the caller get DRPCExecutionError at
    once: not through the tree's message timeout (an hour here), nor the request's."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 120}
    with LocalDRPC(conf) as drpc:
        builder = LinearDRPCTopologyBuilder("fail2")
        builder.add_bolt(FailFinish(), 3)
        topology_conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3600}
        cluster.submit_topology("fail2", topology_conf, builder.create_local_topology(drpc))
        for arg in ("foo", "bar", "baz"):
            with pytest.raises(DRPCExecutionError) as info:
                drpc.execute("fail2", arg)
            assert not isinstance(info.value, DRPCTimeoutError)
            assert info.value.function == "fail2"
        assert drpc.pending_requests() == 0


def test_failed_tuple_fails_request(cluster, drpc):
    """A bolt failing a tuple of a request fails that request only."""
    builder = LinearDRPCTopologyBuilder("maybe")
    builder.add_bolt(FailOn(), 2)
    builder.add_bolt(Reverse(), 2).shuffle_grouping()
    cluster.submit_topology("maybe", {}, builder.create_local_topology(drpc))
    assert drpc.execute("maybe", "abc") == "cba"
    with pytest.raises(DRPCExecutionError, match="failed"):
        drpc.execute("maybe", "fail")
    assert drpc.execute("maybe", "xyz") == "zyx"


def test_a_bolt_raising_system_exit_fails_the_request_at_once(cluster):
    """A user's SystemExit in a DRPC bolt fails that request at once, as an exception
    would (not through the request's or the tree's timeout), and the topology goes on."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 120}
    with LocalDRPC(conf) as drpc:
        builder = LinearDRPCTopologyBuilder("exits")
        builder.add_bolt(ExitOn(), 2)
        builder.add_bolt(Reverse(), 2).shuffle_grouping()
        topology_conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3600}
        cluster.submit_topology("exits", topology_conf, builder.create_local_topology(drpc))
        with pytest.raises(DRPCExecutionError) as info:
            drpc.execute("exits", "exit")
        assert not isinstance(info.value, DRPCTimeoutError)
        assert drpc.execute("exits", "abc") == "cba"
    assert any("SystemExit" in e for e in cluster.errors("exits"))


def test_request_timeout(cluster):
    """A request outliving drpc.request.timeout.secs gets DRPCTimeoutError, leaving no state."""
    with LocalDRPC({Config.DRPC_REQUEST_TIMEOUT_SECS: 1}) as drpc:
        builder = LinearDRPCTopologyBuilder("slow")
        builder.add_bolt(NeverFinish(), 2)
        cluster.submit_topology("slow", {}, builder.create_local_topology(drpc))
        with pytest.raises(DRPCTimeoutError, match="no result within 1 s") as info:
            drpc.execute("slow", "x")
        assert isinstance(info.value, TimeoutError)
        assert drpc.pending_requests() == 0
        assert drpc.book.queued() == 0


def test_unknown_function():
    """A function no topology serves fails with DRPCUnknownFunctionError, not a hang."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 120}  # a hang would time out instead
    with LocalDRPC(conf, unknown_function_wait_secs=0.2) as drpc:
        with pytest.raises(DRPCUnknownFunctionError, match="no topology serves"):
            drpc.execute("nobody", "x")
        assert drpc.pending_requests() == 0


def test_args_must_be_text(drpc):
    """Non-text arguments are rejected with a message saying why."""
    with pytest.raises(TypeError, match="must be a str"):
        drpc.execute("f", 12)  # type: ignore[arg-type]


def test_concurrent_requests_several_functions(cluster, drpc):
    """Many requests in flight (threads) to three functions all get their own answers."""
    cluster.submit_topology("squared", {}, square_topology(drpc))
    ex = LinearDRPCTopologyBuilder("exclaim")
    ex.add_bolt(ExclamationDRPC(), 2)
    cluster.submit_topology("exclaim", {}, ex.create_local_topology(drpc))
    rev = LinearDRPCTopologyBuilder("reverse")
    rev.add_bolt(IdBolt(), 2)
    rev.add_bolt(Reverse(), 2).shuffle_grouping()
    cluster.submit_topology("reverse", {}, rev.create_local_topology(drpc))

    calls = []
    for i in range(90):
        kind = i % 3
        if kind == 0:
            calls.append(("square", str(i % 13), str((i % 13) ** 2)))
        elif kind == 1:
            calls.append(("exclaim", f"w{i}", f"w{i}!!!"))
        else:
            calls.append(("reverse", f"abc{i}", f"abc{i}"[::-1]))
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        results = list(pool.map(lambda c: drpc.execute(c[0], c[1]), calls))
    assert results == [expected for _, _, expected in calls]
    assert drpc.pending_requests() == 0


class _RaisesOn(CustomStreamGrouping):
    """A user's grouping that cannot route the request "bad"."""

    def choose_tasks(self, task_id: int, values: list[object]) -> list[int]:
        if values[0] == "bad":
            raise ValueError("cannot route 'bad'")
        return [self.target_tasks[0]]


def test_a_request_the_spout_cannot_emit_fails_at_once(cluster) -> None:
    """The DRPC spout took the request, then its emit raised (a custom grouping that
    cannot route it): the caller waited for the request's timeout. Now it gets the
    failure at once, and the next request is answered."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 10}
    with LocalDRPC(conf) as drpc:
        b = TopologyBuilder()
        b.set_spout("1", DRPCSpout("test", drpc))
        b.set_bolt("2", ExclamationBolt()).custom_grouping("1", _RaisesOn())
        b.set_bolt("3", ReturnResults()).global_grouping("2")
        cluster.submit_topology("routes", {}, b.create_topology())
        with pytest.raises(DRPCExecutionError) as info:
            drpc.execute("test", "bad")
        assert not isinstance(info.value, DRPCTimeoutError)
        assert drpc.execute("test", "good") == "good!!!"
        assert drpc.pending_requests() == 0
        assert any("cannot route 'bad'" in e for e in cluster.errors("routes"))
