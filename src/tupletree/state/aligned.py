"""The aligned checkpoint mode (beyond Storm): exactly-once state for stateful bolts, when
every spout can rewind. ``topology.state.checkpoint.mode = "aligned"``; Storm's mode,
the default, is ``"storm"``.

Why Storm's mode is at-least-once: the checkpoint spout's steps reach the bolts on a
path of their own, so a bolt's state at a checkpoint includes whichever inputs happened
to arrive first; a recovery replays what the ackers failed, and an input whose effect
was committed but whose ack had not yet reached its spout when a worker died is applied
twice. Neither can be fixed by the bolts alone.

The aligned mode, after Flink's (Chandy-Lamport with barriers from the sources):

1. *Steps in band.* The checkpoint spout does not send the steps; it publishes each in
   the store (spout.py), and every data spout task sends it on its own ``$checkpoint``
   stream, between the data it emitted before and after. Bolts subscribe to
   ``$checkpoint`` of the spouts they read (the planner wired both ways; the mode picks).
2. *Alignment.* A bolt with several upstream tasks holds each one's tuples after its
   copy of a step until every copy arrived (alignment.py), then carries out the step and
   forwards it. Every bolt's state at checkpoint ``t`` is then the effect of exactly the
   spouts' output before their step ``t``.
3. *Positions.* At PREPARE ``t`` each spout task saves its ``position()`` for ``t`` in
   the store (``<component>-<index>$position``, key ``t``) before sending the step.
4. *Recovery rewinds instead of replaying.* At every recovery the checkpoint spout ends
   with INITSTATE ``t`` (``t`` the last committed checkpoint): each spout task rewinds
   to its position for ``t`` (``rewind(position)``) and sends the step; every bolt
   rolls its state back to ``t`` when it gets it, live or restarted, and drops what it
   received before it (emitted before the rewind). Between a ROLLBACK and that
   INITSTATE the spouts emit nothing, nor until their INITSTATE's barrier completed
   (emitting at once buried each retried recovery under a fresh flood). Failed inputs
   are not replayed one by one: a data tuple that fails, or a ``next_tuple`` that
   raises (the spout may have moved past a message it did not emit), makes the spout
   task refuse the next PREPARE, which starts a recovery. Acks and fails from before
   the last rewind are dropped (message ids carry the spout's epoch).

So after any failure, state = effect of the inputs up to the committed positions, and
the inputs after them come again once: exactly-once for the state of stateful bolts.
What it does not cover: effects outside the state (a bolt writing to a database
directly sees the replayed inputs again), and spouts that cannot rewind (a topology with
one is refused at submit in this mode).

A spout takes part by having (duck-typed, see ``Rewindable``)::

    position() -> value   # JSON-encodable: where its next emit would come from
    rewind(position)       # emit again from there (None: from where it starts afresh),
                           # forgetting every message in flight
    committed(position)    # optional: everything before ``position`` is in committed
                           # state for good (a queue may delete it, Kafka commit it)
    lost_position() -> bool  # optional: True when it can no longer vouch for its
                           # position (Kafka after a reconnect): the next PREPARE is
                           # refused, and the recovery rewinds it

In Storm's mode ``CheckpointedSpout`` is invisible: after ``open`` its ``next_tuple``,
``ack`` and ``fail`` are the wrapped spout's own bound methods.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tupletree.config import Config
from tupletree.errors import EmitError, InvalidConfigError, InvalidTopologyError
from tupletree.state.planner import plan_topology
from tupletree.state.protocol import (
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
)
from tupletree.state.provider import open_state_store, state_namespace
from tupletree.state.spout import STEP_KEY, coordinator_namespace, done_key, poll_period
from tupletree.store import Delete, Put
from tupletree.store.codec import dumps_json, loads_json
from tupletree.topology.components import DEFAULT_STREAM, Spout

POSITION_SUFFIX = "$position"


@runtime_checkable
class Rewindable(Protocol):
    """A spout that can emit again from a saved position (see the module docstring)."""

    def position(self) -> Any: ...

    def rewind(self, position: Any | None) -> None: ...


def _seq(raw: bytes | None) -> int | None:
    return None if raw is None else int(loads_json(raw)["seq"])


def is_rewindable(spout: Any) -> bool:
    return callable(getattr(spout, "position", None)) and callable(getattr(spout, "rewind", None))


class _Barrier:
    """The message id of a step this spout task sent: which published step it was."""

    __slots__ = ("seq",)

    def __init__(self, seq: int) -> None:
        self.seq = seq

    def __repr__(self) -> str:
        return f"checkpoint step #{self.seq}"


class _EpochCollector:
    """The wrapped spout's collector in the aligned mode: message ids carry the epoch
    (rewinds so far), so a verdict about a tuple from before a rewind is dropped."""

    __slots__ = ("_out", "_owner")

    def __init__(self, out: Any, owner: CheckpointedSpout) -> None:
        self._out = out
        self._owner = owner

    def emit(self, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        if stream == CHECKPOINT_STREAM:
            self._refuse()
        if msg_id is not None:
            msg_id = (self._owner.epoch, msg_id)
        return self._out.emit(values, msg_id, stream)  # type: ignore[no-any-return]

    def emit_direct(
        self, task: int, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        if stream == CHECKPOINT_STREAM:
            self._refuse()
        if msg_id is not None:
            msg_id = (self._owner.epoch, msg_id)
        return self._out.emit_direct(task, values, msg_id, stream)  # type: ignore[no-any-return]

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)

    def _refuse(self) -> None:
        raise EmitError(
            f"spout {self._owner.component!r} emitted on stream {CHECKPOINT_STREAM!r}, which "
            "belongs to the checkpoint protocol",
            component=self._owner.component,
            stream=CHECKPOINT_STREAM,
        )


class CheckpointedSpout(Spout):
    """A data spout of a stateful topology (see the module docstring)."""

    plan_topology = staticmethod(plan_topology)

    def __init__(self, spout: Spout) -> None:
        self.delegate = spout
        self.component = "?"
        self.epoch = 0

    def wrap_like(self, spout: Spout) -> CheckpointedSpout:
        """``spout`` wrapped as this one is (complete_topology's mocked spouts)."""
        return CheckpointedSpout(spout)

    def declare_output_fields(self, declarer: Any) -> None:
        self.delegate.declare_output_fields(declarer)
        if CHECKPOINT_STREAM in declarer.streams:
            raise InvalidTopologyError(
                f"component {declarer.component!r} declares stream {CHECKPOINT_STREAM!r}, "
                "which belongs to the checkpoint protocol of stateful topologies",
                component=declarer.component,
                stream=CHECKPOINT_STREAM,
            )
        declarer.declare_stream(CHECKPOINT_STREAM, list(CHECKPOINT_FIELDS))

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        check = getattr(self.delegate, "check_config", None)
        if check is not None:
            check(conf, component_id)
        if conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_MODE) == "aligned" and not is_rewindable(
            self.delegate
        ):
            key = Config.TOPOLOGY_STATE_CHECKPOINT_MODE
            raise InvalidConfigError(
                f"spout {component_id!r} ({type(self.delegate).__name__}) cannot rewind (it "
                f"has no position() and rewind(position)), and {key} 'aligned' needs every "
                "spout to: use the 'storm' mode, or a spout that can (the SQLite queue, "
                "Kafka)",
                key=key,
                value="aligned",
            )

    # -- lifecycle ----------------------------------------------------------------------

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.component = context.component_id
        spout = self.delegate
        if conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_MODE) != "aligned":
            spout.open(conf, context, collector)
            # Storm's mode: the runtime calls the spout's own methods from here on.
            self.next_tuple = spout.next_tuple  # type: ignore[method-assign]
            self.ack = spout.ack  # type: ignore[method-assign]
            self.fail = spout.fail  # type: ignore[method-assign]
            return
        self._out = collector
        self._now = context.now
        self._store = open_state_store(conf)
        index = context.this_task_index
        self._coordinator_ns = coordinator_namespace()
        self._positions_ns = state_namespace(self.component, index) + POSITION_SUFFIX
        self._done_key = done_key(self.component, index)
        interval = conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] / 1000
        self._poll_period = poll_period(self._store, interval)
        self._polled_at = -1.0
        self.initialized = False  # no INITSTATE yet: emits nothing, refuses PREPARE
        self.paused = True
        # The INITSTATE whose barrier must complete before this task emits again.
        self._resume_seq: int | None = None
        self.failed = False  # a data tuple of this epoch failed: refuse the next PREPARE
        # A step published before this task opened is its own only if this task's
        # earlier life did not answer it (the checkpoint spout still waits for it).
        step, done = self._store.get(self._coordinator_ns, [STEP_KEY, self._done_key])
        answered = step is not None and done is not None
        self._last_step = step if answered and _seq(done) == _seq(step) else None
        spout.open(conf, context, _EpochCollector(collector, self))
        context.call_each_round(self._poll_steps)

    def activate(self) -> None:
        self.delegate.activate()

    def deactivate(self) -> None:
        self.delegate.deactivate()

    def close(self) -> None:
        try:
            self.delegate.close()
        finally:
            store = getattr(self, "_store", None)
            if store is not None:
                store.close()

    def reset_timeout(self, msg_id: Any) -> None:
        if isinstance(msg_id, tuple) and len(msg_id) == 2 and msg_id[0] == self.epoch:
            msg_id = msg_id[1]
        elif isinstance(msg_id, _Barrier):
            return
        reset = getattr(self.delegate, "reset_timeout", None)
        if reset is not None:
            reset(msg_id)

    # -- the aligned mode -----------------------------------------------------------------

    def next_tuple(self) -> None:
        if not self.paused:
            try:
                self.delegate.next_tuple()
            except BaseException:
                # The spout may have moved its position past what it never emitted
                # (the SQLite queue and Kafka take a message before its emit, which a
                # user's grouping can make raise): a checkpoint at that position would
                # skip the message for good. Refuse it; the recovery rewinds.
                self.failed = True
                raise

    def _poll_steps(self) -> bool:
        """Each round of the worker (not from ``next_tuple``, which the runtime stops
        calling at ``topology.max.spout.pending``, while the trees in flight wait for
        the very COMMIT this would send): take a newly published step."""
        now = self._now()
        if now - self._polled_at < self._poll_period:
            return False
        self._polled_at = now
        (raw,) = self._store.get(self._coordinator_ns, [STEP_KEY])
        if raw is None or raw == self._last_step:
            return False
        self._last_step = raw
        self._take(loads_json(raw))
        return True

    def ack(self, msg_id: Any) -> None:
        if isinstance(msg_id, _Barrier):
            if msg_id.seq == self._resume_seq:
                # The rewind's INITSTATE went through every bolt: what was queued before
                # it is gone, so emitting again cannot bury the recovery under more.
                self._resume_seq = None
                self.paused = False
            self._answer(msg_id.seq, True)
        elif msg_id[0] == self.epoch:
            self.delegate.ack(msg_id[1])

    def fail(self, msg_id: Any) -> None:
        if isinstance(msg_id, _Barrier):
            self._answer(msg_id.seq, False)
        elif msg_id[0] == self.epoch:
            self.failed = True  # not replayed alone: the next PREPARE starts a recovery

    def _take(self, step: dict[str, Any]) -> None:
        seq, txid, action = step["seq"], step["txid"], step["action"]
        spout = self.delegate
        if action == PREPARE:
            lost = getattr(spout, "lost_position", None)
            if not self.initialized or self.failed or (lost is not None and lost()):
                self._answer(seq, False)
                return
            try:
                position = spout.position()
                self._store.apply([Put(self._positions_ns, str(txid), dumps_json(position))])
            except BaseException:
                self._answer(seq, False)
                raise
        elif action == COMMIT:
            self._committed(txid)
        elif action == ROLLBACK:
            self.paused = True
        elif action == INITSTATE:
            try:
                spout.rewind(self._position(txid))
            except BaseException:
                self._answer(seq, False)
                raise
            self.epoch += 1
            self.failed = False
            self.initialized = True
            # Paused until this step's barrier completes (``ack``): emitting at once
            # queued a fresh flood behind it, and when the queues took longer than the
            # message timeout to drain, the step timed out, the next recovery rewound
            # and flooded again, and no checkpoint ever committed.
            self.paused = True
            self._resume_seq = seq
        self._out.emit([txid, action], _Barrier(seq), CHECKPOINT_STREAM)

    def _position(self, txid: int) -> Any:
        if txid < 0:
            return None
        (raw,) = self._store.get(self._positions_ns, [str(txid)])
        return None if raw is None else loads_json(raw)

    def _committed(self, txid: int) -> None:
        """Checkpoint ``txid`` is as good as committed (the checkpoint spout saved
        COMMITTING before it published COMMIT): tell the spout, forget older positions."""
        position = self._position(txid)
        committed = getattr(self.delegate, "committed", None)
        if position is not None and committed is not None:
            committed(position)
        old = [k for k, _ in self._store.items(self._positions_ns) if int(k) < txid]
        if old:
            self._store.apply([Delete(self._positions_ns, k) for k in old])

    def _answer(self, seq: int, ok: bool) -> None:
        self._store.apply(
            [Put(self._coordinator_ns, self._done_key, dumps_json({"seq": seq, "ok": ok}))]
        )
