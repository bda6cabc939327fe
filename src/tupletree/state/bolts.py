"""The bolts of a stateful topology, as the runtime sees them (Storm's
BaseStatefulBoltExecutor, StatefulBoltExecutor and CheckpointTupleForwarder): plain
Bolts wrapping the user's, put in place by the planner (planner.py).

- ``StatefulBoltExecutor`` wraps a ``StatefulBolt``: opens its state, holds inputs
  until INITSTATE and acks until COMMIT, and carries out each checkpoint step
  (held.py decides what a step does; kv.py does it to the state);
- ``CheckpointForwarder`` wraps any other Bolt (or a BasicBolt with several upstream
  tasks): it forwards each checkpoint step once every upstream task sent it;
- ``BasicCheckpointForwarder`` wraps a BasicBolt with one upstream task: the same, as a
  BasicBolt, so the runtime's fast path for BasicBolts stays.

All three count a step's copies with ``inputs.CheckpointInputs``, or in the aligned mode
(``topology.state.checkpoint.mode = "aligned"``) align them with
``alignment.AlignedInputs``; forward a step anchored to its last copy and ack the copies.
Which upstream components send them ``$checkpoint`` depends on the mode (in Storm's mode
the checkpoint spout, in the aligned mode the data spouts themselves): the planner gives
both sets, ``prepare`` picks one.

Errors: a hook or state operation that raises fails the checkpoint tuple and is reported
(the checkpoint spout then recovers); an input that raises in ``execute`` is failed and
reported as anywhere else. In the aligned mode a bolt that failed an input (it raised,
raised FailedException, or the bolt called ``fail``) also refuses the next PREPARE: the
input came before that step's barrier, so the checkpoint would commit the spouts'
positions past it without its effect. The refusal travels in band, ahead of the spout's
own news of the failure, which comes through the ackers and may come after the spout
answered the step. The next INITSTATE (the recovery's rewind) clears it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tupletree.config import Config
from tupletree.errors import FailedException, InvalidConfigError, InvalidTopologyError
from tupletree.state.alignment import REFUSE, AlignedInputs
from tupletree.state.collector import (
    AckHoldingCollector,
    AnchoringBasicCollector,
    AnchoringCollector,
)
from tupletree.state.held import CheckpointTuples
from tupletree.state.inputs import HANDLE, CheckpointInputs
from tupletree.state.kv import KeyValueState
from tupletree.state.layout import check_task_count
from tupletree.state.planner import plan_topology
from tupletree.state.protocol import CHECKPOINT_FIELDS, CHECKPOINT_STREAM, INITSTATE, PREPARE
from tupletree.state.provider import open_state_store, state_namespace
from tupletree.state.stateful_bolt import StatefulBolt
from tupletree.store.hosts import require_shared
from tupletree.topology.components import BasicBolt, Bolt


def _nothing(*args: Any) -> None:
    pass


def aligned_mode(conf: dict[str, Any]) -> bool:
    return conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_MODE, "storm") == "aligned"


def checkpoint_channels(context: Any, components: Iterable[str]) -> list[int]:
    """The upstream task ids that send this task ``$checkpoint``."""
    return [t for c in sorted(components) for t in context.component_tasks(c)]


def declare_with_checkpoint(component: str, delegate: Any, declarer: Any) -> None:
    delegate.declare_output_fields(declarer)
    if CHECKPOINT_STREAM in declarer.streams:
        raise InvalidTopologyError(
            f"component {component!r} declares stream {CHECKPOINT_STREAM!r}, which belongs "
            "to the checkpoint protocol of stateful topologies",
            component=component,
            stream=CHECKPOINT_STREAM,
        )
    declarer.declare_stream(CHECKPOINT_STREAM, list(CHECKPOINT_FIELDS))


def read_checkpoint(tup: Any) -> tuple[int, str]:
    txid, action = tup.values
    return txid, action


class _CheckpointBolt(Bolt):
    """What the Bolt wrappers share: the checkpoint inputs (counted or aligned) and the
    dispatch of each input tuple."""

    plan_topology = staticmethod(plan_topology)

    def __init__(self, delegate: Any, storm_sources: Iterable[str], aligned_sources: Iterable[str]):
        self.delegate = delegate
        self.storm_sources = frozenset(storm_sources)
        self.aligned_sources = frozenset(aligned_sources)

    def declare_output_fields(self, declarer: Any) -> None:
        declare_with_checkpoint(declarer.component, self.delegate, declarer)

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        check = getattr(self.delegate, "check_config", None)
        if check is not None:
            check(conf, component_id)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._out = collector
        self._failed_input = False
        self.aligned = aligned_mode(conf)
        sources = self.aligned_sources if self.aligned else self.storm_sources
        channels = checkpoint_channels(context, sources)
        if self.aligned:
            self._inputs: Any = AlignedInputs(channels)
            self.execute = self._execute_aligned  # type: ignore[method-assign]
        else:
            self._inputs = CheckpointInputs(len(channels))
            self.execute = self._execute_storm  # type: ignore[method-assign]

    # -- input ----------------------------------------------------------------------

    def _execute_storm(self, tup: Any) -> None:
        if tup.source_stream == CHECKPOINT_STREAM:
            self._on_checkpoint(tup)
        else:
            self._run(tup)

    def _execute_aligned(self, tup: Any) -> None:
        if tup.source_stream == CHECKPOINT_STREAM:
            self._on_checkpoint(tup)
            return
        inputs = self._inputs
        if inputs.delivered and inputs.blocks(tup.source_task):
            if inputs.hold(tup):
                return
            self._run_each(inputs.release())  # over the bound: the step is abandoned
        try:
            self._run(tup)
        except BaseException:
            self._failed_input = True  # the runtime fails it and reports what it raised
            raise

    def _note_failed(self) -> None:
        """The bolt failed an input itself (its collector's ``fail``)."""
        self._failed_input = True

    def _on_checkpoint(self, tup: Any) -> None:
        txid, action = read_checkpoint(tup)
        out = self._out
        inputs = self._inputs
        if self.aligned:
            verdict, leftovers = inputs.arrive_on(tup.source_task, action, txid)
            self._run_each(leftovers)
            if verdict == REFUSE:
                out.fail(tup)
                return
            if verdict == HANDLE and action == PREPARE and self._failed_input:
                # An input of this checkpoint failed here (module docstring): as a step
                # _handle refuses, failed, not recorded as handled.
                out.fail(tup)
                self._run_each(inputs.release())
                return
            if verdict == HANDLE and action == INITSTATE:
                self._failed_input = False
        else:
            verdict = inputs.arrive(action, txid)
        if verdict == HANDLE and self._handle(tup, action, txid):
            inputs.handled(action, txid)
            out.emit([txid, action], tup, CHECKPOINT_STREAM)
            out.ack(tup)
        elif verdict != HANDLE:
            out.ack(tup)  # a copy before the last one, or an old transaction
        if self.aligned and not inputs.delivered:
            self._run_each(inputs.release())

    def _run_each(self, tuples: list[Any]) -> None:
        """Run tuples outside the runtime's own call: each one's error is its own."""
        for tup in tuples:
            try:
                self._run(tup)
            except BaseException as exc:
                self._failed_input = True
                self._out.fail(tup)
                self._out.report_error(exc)

    # -- what a wrapper does ----------------------------------------------------------

    def _run(self, tup: Any) -> None:
        raise NotImplementedError

    def _handle(self, tup: Any, action: str, txid: int) -> bool:
        """Carry out a checkpoint step; True to forward it. False: it failed ``tup``."""
        return True

    def cleanup(self) -> None:
        self.delegate.cleanup()


class StatefulBoltExecutor(_CheckpointBolt):
    """Runs a StatefulBolt (see the module docstring)."""

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        master = conf.get(Config.TUPLETREE_CLUSTER_MASTER)
        if master is not None:
            # A provider only one host sees cannot follow a task Spark restarts elsewhere.
            key = Config.TOPOLOGY_STATE_PROVIDER
            try:
                require_shared(conf[key], master, what=f"stateful bolt {component_id!r}: {key}")
            except ValueError as exc:
                raise InvalidConfigError(str(exc), key=key, value=conf[key]) from None
        super().check_config(conf, component_id)

    def __init__(
        self,
        bolt: StatefulBolt,
        storm_sources: Iterable[str] = (),
        aligned_sources: Iterable[str] = (),
    ) -> None:
        if not isinstance(bolt, StatefulBolt):
            raise InvalidTopologyError(
                f"StatefulBoltExecutor wraps a StatefulBolt, got {type(bolt).__name__}"
            )
        super().__init__(bolt, storm_sources, aligned_sources)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.held = CheckpointTuples(aligned=self.aligned)
        self.state = self.open_state(conf, context)
        self.collector = AckHoldingCollector(
            collector, context.component_id, self.delegate.emits_anchored, self._note_failed
        )
        self._bolt_execute = self.delegate.execute
        self.delegate.prepare(conf, context, self.collector)

    def open_state(self, conf: dict[str, Any], context: Any) -> Any:
        """The task's state, as last committed (a StatefulWindowedBolt's executor
        builds more on the same store)."""
        self.store = open_state_store(conf)
        # Before a key is read: state written with another task count is refused here
        # (state/layout.py says why), not read under keys that moved.
        check_task_count(self.store, context.component_id, len(context.this_component_tasks()))
        namespace = state_namespace(context.component_id, context.this_task_index)
        return KeyValueState(self.store, namespace)

    def _run(self, tup: Any) -> None:
        if self.held.initialized:
            self._bolt_execute(tup)
        elif not self.held.buffer(tup):
            self._out.fail(tup)

    def _execute_storm(self, tup: Any) -> None:
        # The per-tuple path: _CheckpointBolt's, with _run inlined.
        if tup.source_stream == CHECKPOINT_STREAM:
            self._on_checkpoint(tup)
        elif self.held.initialized:
            self._bolt_execute(tup)
        elif not self.held.buffer(tup):
            self._out.fail(tup)

    def _handle(self, tup: Any, action: str, txid: int) -> bool:
        held = self.held
        plan = held.step(action, txid)
        out = self._out
        if plan.refuse:
            # PREPARE before INITSTATE: this task started again in the middle of a
            # checkpoint; failing makes the checkpoint spout recover.
            out.fail(tup)
            return False
        bolt = self.delegate
        state = self.state
        try:
            if plan.hook == "pre_prepare":
                bolt.pre_prepare(txid)
            elif plan.hook == "pre_commit":
                bolt.pre_commit(txid)
            elif plan.hook == "pre_rollback":
                bolt.pre_rollback()
            elif plan.state_op in ("commit", "rollback") and not held.initialized:
                # Before init_state the user's hook does not run, but state the bolt
                # keeps beside the KeyValueState (a persistent window's saved index)
                # must still follow the step, or init_state would find it prepared.
                if plan.state_op == "commit":
                    getattr(bolt, "commit_before_init", _nothing)(txid)
                else:
                    getattr(bolt, "rollback_before_init", _nothing)()
            if plan.state_op == "prepare":
                state.prepare_commit(txid)
            elif plan.state_op == "commit":
                state.commit(txid)
            elif plan.state_op == "rollback":
                state.rollback()
            if plan.init:
                bolt.init_state(state)
        except BaseException as exc:
            out.fail(tup)
            out.report_error(exc)
            return False
        held.finish(plan, out.take_deferred() if plan.takes_acked else None)
        for batch in plan.ack:
            out.release_deferred(batch)
        for batch in plan.fail_batches:
            out.fail_deferred(batch)
        for t in plan.fail:
            out.fail(t)
        self._run_each(plan.run)
        return True

    def cleanup(self) -> None:
        try:
            self.delegate.cleanup()
        finally:
            store = getattr(self, "store", None)
            if store is not None:
                store.close()


class CheckpointForwarder(_CheckpointBolt):
    """Runs a Bolt, or a BasicBolt with several upstream tasks, in a stateful topology:
    its emits must be anchored; checkpoint steps pass through (see the module docstring)."""

    def __init__(
        self,
        bolt: Bolt | BasicBolt,
        storm_sources: Iterable[str] = (),
        aligned_sources: Iterable[str] = (),
    ) -> None:
        super().__init__(bolt, storm_sources, aligned_sources)
        self.basic = isinstance(bolt, BasicBolt)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        if self.basic:
            self._basic = AnchoringBasicCollector(collector)
            self.delegate.prepare(conf, context)
        else:
            anchoring = AnchoringCollector(collector, context.component_id, self._note_failed)
            self.delegate.prepare(conf, context, anchoring)

    def _run(self, tup: Any) -> None:
        if not self.basic:
            self.delegate.execute(tup)
            return
        # A BasicBolt's contract: emits anchored to the input, the input acked when
        # execute returns, failed when it raises.
        bc = self._basic
        bc.input = tup
        try:
            self.delegate.execute(tup, bc)
        except FailedException:
            self._failed_input = True
            self._out.fail(tup)
            return
        self._out.ack(tup)


class BasicCheckpointForwarder(BasicBolt):
    """Runs a BasicBolt that has one upstream task in a stateful topology (nothing to
    align, so it stays a BasicBolt): checkpoint steps pass through, counted."""

    plan_topology = staticmethod(plan_topology)

    def __init__(
        self,
        bolt: BasicBolt,
        storm_sources: Iterable[str] = (),
        aligned_sources: Iterable[str] = (),
    ) -> None:
        self.delegate = bolt
        self.storm_sources = frozenset(storm_sources)
        self.aligned_sources = frozenset(aligned_sources)

    def declare_output_fields(self, declarer: Any) -> None:
        declare_with_checkpoint(declarer.component, self.delegate, declarer)

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        check = getattr(self.delegate, "check_config", None)
        if check is not None:
            check(conf, component_id)

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        sources = self.aligned_sources if aligned_mode(conf) else self.storm_sources
        channels = checkpoint_channels(context, sources)
        if len(channels) > 1:
            raise InvalidTopologyError(
                f"component {context.component_id!r}: BasicCheckpointForwarder takes one "
                f"upstream task, got {len(channels)} (the planner picks "
                "CheckpointForwarder for more)",
                component=context.component_id,
            )
        self._inputs = CheckpointInputs(max(1, len(channels)))
        self._delegate_execute = self.delegate.execute
        self.aligned = aligned_mode(conf)
        self._failed_input = False
        self.delegate.prepare(conf, context)

    def execute(self, tup: Any, collector: Any) -> None:
        if tup.source_stream != CHECKPOINT_STREAM:
            if not self.aligned:
                self._delegate_execute(tup, collector)
                return
            try:
                self._delegate_execute(tup, collector)
            except BaseException:  # FailedException too: the input fails either way
                self._failed_input = True  # the next PREPARE is refused (module docstring)
                raise
            return
        txid, action = read_checkpoint(tup)
        inputs = self._inputs
        if inputs.arrive(action, txid) == HANDLE:
            if self.aligned and action == PREPARE and self._failed_input:
                raise FailedException(f"an input failed before PREPARE {txid}")
            inputs.handled(action, txid)
            if action == INITSTATE:
                self._failed_input = False
            collector.emit([txid, action], stream=CHECKPOINT_STREAM)

    def cleanup(self) -> None:
        self.delegate.cleanup()
