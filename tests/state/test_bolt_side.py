"""The bolt side of the protocol: counting copies (CheckpointInputs), held inputs and
acks (CheckpointTuples), and StatefulBoltExecutor and the forwarders driven with plain
tuples, with Storm's StatefulBoltExecutorTest vectors."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree.config import validate
from tupletree.errors import EmitError, FailedException
from tupletree.state.bolts import (
    BasicCheckpointForwarder,
    CheckpointForwarder,
    StatefulBoltExecutor,
)
from tupletree.state.held import CheckpointTuples
from tupletree.state.inputs import HANDLE, STALE, WAIT, CheckpointInputs
from tupletree.state.protocol import CHECKPOINT_STREAM, COMMIT, INITSTATE, PREPARE, ROLLBACK
from tupletree.state.stateful_bolt import StatefulBolt
from tupletree.topology.components import BasicBolt, Bolt

from .fakes import FakeBasicCollector, FakeCollector, FakeContext, FakeTuple, checkpoint

# -- counting copies ------------------------------------------------------------------


def test_a_step_is_handled_when_its_last_copy_arrives():
    """Storm's count per (action, txid): WAIT for all but the last copy, then HANDLE."""
    inputs = CheckpointInputs(3)
    assert [inputs.arrive(PREPARE, 4) for _ in range(3)] == [WAIT, WAIT, HANDLE]
    assert inputs.waiting is None


def test_an_older_txid_is_stale_and_rollback_lets_the_initstate_below_it_through():
    """txid below the last handled one: STALE. After ROLLBACK t the last txid is t-1,
    so INITSTATE t-1 is handled."""
    inputs = CheckpointInputs(1)
    inputs.handled(PREPARE, 5)
    assert inputs.arrive(COMMIT, 4) == STALE
    assert inputs.arrive(ROLLBACK, 5) == HANDLE
    inputs.handled(ROLLBACK, 5)
    assert inputs.arrive(INITSTATE, 4) == HANDLE


def test_copies_left_from_a_failed_step_do_not_complete_its_retry():
    """PREPARE 3 reached one of two upstream copies and failed elsewhere; after the
    recovery, PREPARE 3 again waits for both copies (Storm would handle it on the first:
    its count for (PREPARE, 3) was left at 1)."""
    inputs = CheckpointInputs(2)
    assert inputs.arrive(PREPARE, 3) == WAIT
    for action, txid in ((ROLLBACK, 3), (INITSTATE, 2)):
        assert [inputs.arrive(action, txid) for _ in range(2)] == [WAIT, HANDLE]
        inputs.handled(action, txid)
    assert inputs.arrive(PREPARE, 3) == WAIT
    assert inputs.arrive(PREPARE, 3) == HANDLE


def test_no_upstream_task_is_refused():
    with pytest.raises(ValueError, match="at least one upstream task"):
        CheckpointInputs(0)


# -- held inputs ----------------------------------------------------------------------


def test_held_inputs_through_a_checkpoint():
    """Pending until INITSTATE; acks held (as batches taken from the collector) to
    COMMIT; a rollback fails the prepared batches and the one held since."""
    held = CheckpointTuples()
    assert held.step(PREPARE, 0).refuse  # before INITSTATE
    held.buffer("a")
    plan = held.finish(held.step(INITSTATE, -1))
    assert plan.init and plan.run == ["a"] and held.initialized
    plan = held.step(PREPARE, 0)
    assert plan.takes_acked
    held.finish(plan, ["a"])
    assert held.finish(held.step(COMMIT, 0)).ack == [["a"]]
    held.finish(held.step(PREPARE, 1), ["b"])
    assert held.finish(held.step(ROLLBACK, 1), ["c"]).fail_batches == [["b"], ["c"]]
    plan = held.step(INITSTATE, 0)  # a later INITSTATE: nothing
    assert not plan.takes_acked and held.finish(plan).fail_batches == []


def test_pending_has_a_bound():
    held = CheckpointTuples(max_pending=2)
    assert [held.buffer(x) for x in "abc"] == [True, True, False]


def test_aligned_initstate_rolls_back_and_drops_what_came_before_it():
    """Aligned mode: the pending inputs (sent before the spouts rewound) are failed, not
    run; a later INITSTATE rolls the state back, failing what was held."""
    held = CheckpointTuples(aligned=True)
    held.buffer("stale")
    plan = held.finish(held.step(INITSTATE, 3))
    assert plan.fail == ["stale"] and plan.run == []
    plan = held.step(INITSTATE, 3)
    assert plan.state_op == "rollback" and held.finish(plan, ["x"]).fail_batches == [["x"]]


# -- StatefulBoltExecutor with Storm's vectors -------------------------------------------


class RecordingState:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def prepare_commit(self, txid: int) -> None:
        self.calls.append(("prepare", txid))

    def commit(self, txid: int) -> None:
        self.calls.append(("commit", txid))

    def rollback(self) -> None:
        self.calls.append(("rollback",))


class RecordingBolt(StatefulBolt):
    outputs = ["x"]

    def __init__(self, ack: bool = True, fail_hook: str | None = None) -> None:
        self.ack_inputs = ack
        self.fail_hook = fail_hook
        self.calls: list[tuple[Any, ...]] = []

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.calls.append(("init_state", state))

    def execute(self, tup):
        self.calls.append(("execute", tup))
        self.collector.emit([1], anchors=tup)
        if self.ack_inputs:
            self.collector.ack(tup)

    def _hook(self, name: str, *args: Any) -> None:
        self.calls.append((name, *args))
        if name == self.fail_hook:
            raise RuntimeError(f"{name} broke")

    def pre_prepare(self, txid):
        self._hook("pre_prepare", txid)

    def pre_commit(self, txid):
        self._hook("pre_commit", txid)

    def pre_rollback(self):
        self._hook("pre_rollback")


class _Executor(StatefulBoltExecutor):
    def open_state(self, conf, context):
        self.store = None
        return RecordingState()


def executor(bolt: StatefulBolt | None = None, upstream: int = 1, **conf: Any):
    ex = _Executor(
        bolt or RecordingBolt(), storm_sources=["$checkpointspout"], aligned_sources=["up"]
    )
    tasks = {"test": [1], "$checkpointspout": list(range(10, 10 + upstream)), "up": [20]}
    out = FakeCollector()
    ex.prepare(validate(conf), FakeContext("test", 1, tasks), out)
    return ex, out


def test_tuple_before_initstate_is_not_executed():
    """Storm's testHandleTupleBeforeInit."""
    ex, _ = executor()
    ex.execute(FakeTuple(["a"]))
    assert [c[0] for c in ex.delegate.calls] == []


def test_tuple_before_initstate_runs_after_it():
    """Storm's testHandleTuple: INITSTATE 0 calls init_state, then runs the held tuple;
    the checkpoint is forwarded anchored to itself and acked."""
    ex, out = executor()
    tup, cp = FakeTuple(["a"]), checkpoint(0, INITSTATE, 10)
    ex.execute(tup)
    ex.execute(cp)
    assert [c[0] for c in ex.delegate.calls] == ["init_state", "execute"]
    assert ex.delegate.calls[1][1] is tup
    assert (CHECKPOINT_STREAM, [0, INITSTATE], cp) in out.emitted
    assert cp in out.acked and tup not in out.acked  # the input's ack is held


@pytest.mark.parametrize("initialized", [True, False])
def test_rollback_rolls_the_state_back(initialized: bool):
    """Storm's testRollback, after INITSTATE. Before it (a task started again in the
    middle of a checkpoint) the state rolls back but pre_rollback is not called: the
    bolt's init_state has not run (Storm calls it; a bolt whose hook uses what its
    init_state set up then failed the step for good)."""
    ex, _ = executor()
    if initialized:
        ex.execute(checkpoint(-1, INITSTATE, 10))
    ex.execute(FakeTuple(["a"]))
    ex.execute(checkpoint(0, ROLLBACK, 10))
    assert ex.state.calls == [("rollback",)]
    assert (("pre_rollback",) in ex.delegate.calls) == initialized


@pytest.mark.parametrize("initialized", [True, False])
def test_commit_commits_the_state(initialized: bool):
    """Storm's testCommit: pre_commit(0), then commit(0); before INITSTATE the commit
    without the hook (as for the rollback above)."""
    ex, _ = executor()
    if initialized:
        ex.execute(checkpoint(-1, INITSTATE, 10))
    ex.execute(FakeTuple(["a"]))
    ex.execute(checkpoint(0, COMMIT, 10))
    assert (("pre_commit", 0) in ex.delegate.calls) == initialized
    assert ex.state.calls == [("commit", 0)]


def test_prepare_before_initstate_fails_the_checkpoint_then_rollback_works():
    """Storm's testPrepareAndRollbackBeforeInitstate: PREPARE 100 before INITSTATE fails
    the checkpoint tuple (forward nothing); ROLLBACK 100 rolls back."""
    ex, out = executor()
    ex.execute(FakeTuple(["a"]))
    prepare = checkpoint(100, PREPARE, 10)
    ex.execute(prepare)
    assert out.failed == [prepare] and out.on(CHECKPOINT_STREAM) == []
    ex.execute(checkpoint(100, ROLLBACK, 10))
    assert ex.state.calls == [("rollback",)]


def test_commit_before_initstate_is_carried_out():
    """Storm's testCommitBeforeInitstate: a recovering COMMIT 100 commits and is acked."""
    ex, out = executor()
    cp = checkpoint(100, COMMIT, 10)
    ex.execute(cp)
    assert out.acked == [cp]
    assert ex.state.calls == [("commit", 100)]
    ex.execute(checkpoint(100, ROLLBACK, 10))
    assert ex.state.calls[-1] == ("rollback",)


def test_prepare_and_commit_acks_the_input_only_at_commit():
    """Storm's testPrepareAndCommit: INITSTATE 0, a tuple, PREPARE 100, the tuple again,
    COMMIT 100: the state commits 100, the bolt ran twice, the input is acked once
    (its second ack is not prepared yet)."""
    ex, out = executor()
    tup = FakeTuple(["a"])
    ex.execute(checkpoint(0, INITSTATE, 10))
    ex.execute(tup)
    ex.execute(checkpoint(100, PREPARE, 10))
    assert tup not in out.acked
    ex.execute(tup)
    ex.execute(checkpoint(100, COMMIT, 10))
    assert ex.state.calls == [("prepare", 100), ("commit", 100)]
    assert [c[0] for c in ex.delegate.calls].count("execute") == 2
    assert out.acked.count(tup) == 1


def test_a_step_waits_for_every_upstream_task():
    """Two upstream tasks: the first copy is acked and nothing happens; the second
    carries the step out and is forwarded anchored to it."""
    ex, out = executor(upstream=2)
    first, second = checkpoint(0, INITSTATE, 10), checkpoint(0, INITSTATE, 11)
    ex.execute(first)
    assert ex.delegate.calls == [] and out.acked == [first]
    ex.execute(second)
    assert ex.delegate.calls[0][0] == "init_state"
    assert out.emitted[-1] == (CHECKPOINT_STREAM, [0, INITSTATE], second)


def test_a_failing_hook_fails_the_checkpoint_and_keeps_the_held_acks():
    """pre_commit raises: the checkpoint tuple fails, the error is reported, and the
    prepared inputs are still held (a retried COMMIT acks them)."""
    ex, out = executor(RecordingBolt(fail_hook="pre_commit"))
    tup = FakeTuple(["a"])
    ex.execute(checkpoint(0, INITSTATE, 10))
    ex.execute(tup)
    ex.execute(checkpoint(1, PREPARE, 10))
    commit = checkpoint(1, COMMIT, 10)
    ex.execute(commit)
    assert commit in out.failed and "pre_commit broke" in str(out.errors[0])
    assert tup not in out.acked and ex.held.prepared == [[tup]]


def test_unanchored_emit_is_refused_naming_component_and_stream():
    class Unanchored(RecordingBolt):
        def execute(self, tup):
            self.collector.emit([1])

    ex, _ = executor(Unanchored())
    ex.execute(checkpoint(0, INITSTATE, 10))
    with pytest.raises(EmitError, match=r"'test'.*unanchored.*'default'"):
        ex.execute(FakeTuple(["a"]))
    with pytest.raises(EmitError, match="anchored"):
        ex.collector.emit([1], anchors=[])
    with pytest.raises(EmitError, match="checkpoint protocol"):
        ex.collector.emit([1, "x"], anchors=FakeTuple(["a"]), stream=CHECKPOINT_STREAM)


# -- forwarders -------------------------------------------------------------------------


class Echo(Bolt):
    outputs = ["x"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit(tup.values, anchors=tup)
        self.collector.ack(tup)


class EchoBasic(BasicBolt):
    outputs = ["x"]

    def execute(self, tup, collector):
        collector.emit(tup.values)


@pytest.mark.parametrize("bolt", [Echo(), EchoBasic()], ids=["bolt", "basic"])
def test_forwarder_passes_data_through_and_forwards_a_step_once(bolt):
    """CheckpointForwarder (Storm's CheckpointTupleForwarder): data goes to the bolt,
    acked as the bolt acks it; a step goes on after its last copy, anchored to it."""
    fw = CheckpointForwarder(bolt, storm_sources=["up"], aligned_sources=["up"])
    out = FakeCollector()
    fw.prepare(validate({}), FakeContext("fw", 1, {"fw": [1], "up": [5, 6]}), out)
    tup = FakeTuple(["a"], source_task=5)
    fw.execute(tup)
    assert out.on("default") == [["a"]] and out.acked == [tup]
    first, last = checkpoint(3, PREPARE, 5), checkpoint(3, PREPARE, 6)
    fw.execute(first)
    fw.execute(last)
    assert out.on(CHECKPOINT_STREAM) == [[3, PREPARE]]
    assert out.emitted[-1][2] is last and out.acked[-2:] == [first, last]


def test_basic_forwarder_forwards_each_step_once():
    fw = BasicCheckpointForwarder(EchoBasic(), storm_sources=["up"], aligned_sources=["up"])
    fw.prepare(validate({}), FakeContext("fw", 1, {"fw": [1], "up": [5]}))
    out = FakeBasicCollector()
    fw.execute(checkpoint(2, COMMIT, 5), out)
    fw.execute(FakeTuple(["b"], source_task=5), out)
    assert out.on(CHECKPOINT_STREAM) == [[2, COMMIT]] and out.on("default") == [["b"]]


class Breaks(Bolt):
    """Raises on the input "bad", fails "no" itself, echoes the rest."""

    outputs = ["x"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.values == ["bad"]:
            raise RuntimeError("bad input")
        if tup.values == ["no"]:
            self.collector.fail(tup)
            return
        self.collector.emit(tup.values, anchors=tup)
        self.collector.ack(tup)


class BreaksBasic(BasicBolt):
    outputs = ["x"]

    def execute(self, tup, collector):
        if tup.values == ["bad"]:
            raise RuntimeError("bad input")
        collector.emit(tup.values)


ALIGNED = {"topology.state.checkpoint.mode": "aligned"}


@pytest.mark.parametrize("failure", ["bad", "no"])
def test_aligned_a_forwarder_that_failed_an_input_refuses_the_next_prepare(failure):
    """In the aligned mode, a bolt that failed an input (raised, or failed it) fails
    the next PREPARE instead of forwarding it: the input came before its barrier, and
    the checkpoint would commit the spouts' positions past it. INITSTATE (the
    recovery's rewind) clears that; a PREPARE after it goes on."""
    fw = CheckpointForwarder(Breaks(), storm_sources=["up"], aligned_sources=["up"])
    out = FakeCollector()
    fw.prepare(validate(ALIGNED), FakeContext("fw", 1, {"fw": [1], "up": [5]}), out)
    tup = FakeTuple([failure], source_task=5)
    if failure == "bad":
        with pytest.raises(RuntimeError):  # the runtime fails it and reports the error
            fw.execute(tup)
    else:
        fw.execute(tup)
        assert out.failed == [tup]
    prepare = checkpoint(3, PREPARE, 5)
    fw.execute(prepare)
    assert out.on(CHECKPOINT_STREAM) == [] and prepare in out.failed
    fw.execute(checkpoint(2, INITSTATE, 5))
    fw.execute(checkpoint(3, PREPARE, 5))
    assert out.on(CHECKPOINT_STREAM) == [[2, INITSTATE], [3, PREPARE]]


def test_aligned_a_basic_forwarder_that_failed_an_input_refuses_the_next_prepare():
    fw = BasicCheckpointForwarder(BreaksBasic(), storm_sources=["up"], aligned_sources=["up"])
    fw.prepare(validate(ALIGNED), FakeContext("fw", 1, {"fw": [1], "up": [5]}))
    out = FakeBasicCollector()
    with pytest.raises(RuntimeError):
        fw.execute(FakeTuple(["bad"], source_task=5), out)
    with pytest.raises(FailedException, match="an input failed before PREPARE 3"):
        fw.execute(checkpoint(3, PREPARE, 5), out)
    fw.execute(checkpoint(2, INITSTATE, 5), out)
    fw.execute(checkpoint(3, PREPARE, 5), out)
    assert out.on(CHECKPOINT_STREAM) == [[2, INITSTATE], [3, PREPARE]]


def test_aligned_a_stateful_bolt_that_failed_an_input_refuses_the_next_prepare():
    ex, out = executor(RecordingBolt(), **ALIGNED)
    ex.execute(checkpoint(-1, INITSTATE, 20))
    bad = FakeTuple(["a"], source_task=20)
    ex.collector.fail(bad)  # the bolt fails an input itself
    prepare = checkpoint(0, PREPARE, 20)
    ex.execute(prepare)
    assert prepare in out.failed and ex.state.calls == []
