"""The checkpoint spout, ``$checkpointspout`` (Storm's CheckpointSpout): drives every
stateful bolt through the checkpoint protocol. Its decisions are coordinator.py's; this
module keeps them in the store and sends the steps out.

Stored progress: namespace ``$checkpointspout-<index>``, key ``__state`` ->
``{"txid": t, "state": "COMMITTED" | "PREPARING" | "COMMITTING"}`` (JSON), written
before each step is emitted and after each ack (one ``Store.apply`` each, with the value
it replaces as an expectation, so a second instance of the spout, say a worker thought
dead, is refused instead of moving the txid under the first).

Storm's mode: each step is one tuple on ``$checkpoint`` (``txid``, ``action``) with
message id ``txid``, tracked by the ackers; its tuple tree completes when every bolt
handled the step, its ack or fail (a timeout included) drives the next step.

The aligned mode (beyond Storm, aligned.py): the data spouts send each step in band;
this spout publishes the step in its namespace instead (key ``__step``: ``{"seq",
"txid", "action"}``) and learns its outcome from what every data spout task writes back
(key ``__done:<component>-<index>``: ``{"seq", "ok"}``), or a fail when one has not
answered within the message timeout.

The steps go out from a round hook (``context.call_each_round``), not ``next_tuple``:
they go on while the topology is deactivated (a rebalance drains it that way, waiting
for the trees in flight, which stateful bolts hold until a checkpoint commits) and
while bolts' queues push back on the spouts. Storm's spout is polled like any other,
so there a deactivated stateful topology's trees wait for their timeout.

Config (checked at submit by ``check_config``): ``topology.state.checkpoint.interval.ms``
must be below the message timeout (a bolt holds its acks for up to an interval, and the
trees must not time out meanwhile), and acking must be on (the protocol rides on it).
"""

from __future__ import annotations

from typing import Any

from tupletree.config import Config
from tupletree.errors import InvalidConfigError
from tupletree.state.coordinator import CheckpointCoordinator
from tupletree.state.kv import StateError
from tupletree.state.protocol import (
    CHECKPOINT_COMPONENT,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    TX_STATE_KEY,
    CheckPointState,
)
from tupletree.state.provider import open_state_store, state_namespace
from tupletree.store import Expect, MemoryStore, Put, Store
from tupletree.store.codec import dumps_json, loads_json
from tupletree.topology.components import Spout

STEP_KEY = "__step"
DONE_PREFIX = "__done:"


def coordinator_namespace() -> str:
    """The checkpoint spout's namespace (it has one task)."""
    return state_namespace(CHECKPOINT_COMPONENT, 0)


def done_key(component: str, task_index: int) -> str:
    return f"{DONE_PREFIX}{component}-{task_index}"


def poll_period(store: Store, interval_secs: float) -> float:
    """How often a task reads what another task wrote in the store: at once for a
    memory store (a dict lookup), else a tenth of the interval, at most 50 ms."""
    return 0.0 if isinstance(store, MemoryStore) else min(0.05, interval_secs / 10)


def check_checkpoint_config(conf: dict[str, Any], component: str) -> None:
    """InvalidConfigError for a stateful topology's config that cannot work."""
    interval_ms = conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL]
    timeouts = conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True)
    timeout_secs = conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]
    if timeouts and interval_ms >= timeout_secs * 1000:
        key = Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL
        raise InvalidConfigError(
            f"{component!r}: {key} is {interval_ms} ms, not below "
            f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} ({timeout_secs} s): stateful bolts hold "
            "their inputs' acks until the next checkpoint commits, so every tree would time "
            "out first; lower the interval or raise the timeout",
            key=key,
            value=interval_ms,
        )
    if conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0:
        key = Config.TOPOLOGY_ACKER_EXECUTORS
        raise InvalidConfigError(
            f"{component!r}: {key} is 0, but the checkpoints of stateful bolts are "
            "tracked by the ackers; leave it unset or above 0",
            key=key,
            value=0,
        )
    try:
        open_state_store(conf).close()
    except ValueError as exc:
        raise InvalidConfigError(
            str(exc),
            key=Config.TOPOLOGY_STATE_PROVIDER,
            value=conf.get(Config.TOPOLOGY_STATE_PROVIDER),
        ) from exc


class CheckpointSpout(Spout):
    """See the module docstring. ``spouts``: the data spouts' component ids (set by the
    planner; the aligned mode waits for each of their tasks)."""

    def __init__(self) -> None:
        self.spouts: tuple[str, ...] = ()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(CHECKPOINT_STREAM, list(CHECKPOINT_FIELDS))

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        check_checkpoint_config(conf, component_id)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._now = context.now
        self._interval = conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] / 1000
        self._timeout = conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]
        self._aligned = conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_MODE) == "aligned"
        self._store = open_state_store(conf)
        self._ns = state_namespace(CHECKPOINT_COMPONENT, context.this_task_index)
        self._stored: bytes | None = None
        self._waiting: tuple[int, int, float] | None = None  # aligned: (seq, txid, since)
        self._restart()
        context.call_each_round(self.step)
        if self._aligned:
            self._done_keys = [
                done_key(c, i) for c in self.spouts for i in range(len(context.component_tasks(c)))
            ]
            (step,) = self._store.get(self._ns, [STEP_KEY])
            self._seq = loads_json(step)["seq"] if step is not None else 0
            self._poll_period = poll_period(self._store, self._interval)
            self._polled_at = -1.0

    def _restart(self) -> None:
        """Start over from what the store says (at open, and after a failed write)."""
        (data,) = self._store.get(self._ns, [TX_STATE_KEY])
        self._stored = data
        stored = None if data is None else CheckPointState.from_json(loads_json(data))
        failed = getattr(self, "coordinator", None)
        self.coordinator = CheckpointCoordinator(stored, self._interval)
        if failed is not None:  # a write failed: no faster than after a failed step
            self.coordinator.fails_in_a_row = failed.fails_in_a_row + 1
            self.coordinator.retry_at = self._now() + self.coordinator.retry_delay()
        self._waiting = None
        if stored is None:
            self._save(self.coordinator.state)

    def _save(self, state: CheckPointState, extra: list[Put] | None = None) -> None:
        data = dumps_json(state.to_json())
        writes = [Put(self._ns, TX_STATE_KEY, data), *(extra or [])]
        if not self._store.apply(writes, [Expect(self._ns, TX_STATE_KEY, self._stored)]):
            raise StateError(
                f"checkpoint spout: its state in {self._store.name} (namespace "
                f"{self._ns!r}) changed since it last wrote it: another instance of the "
                "checkpoint spout is running, or another stateful topology uses the same "
                "store; its checkpoint spout keeps its progress in the same namespace "
                "(one per store, whatever the component ids), so give each topology its "
                "own store: a distinct prefix (memory: a distinct name)",
                namespace=self._ns,
            )
        self._stored = data

    def next_tuple(self) -> None:
        pass  # the steps go out from the round hook (``step``), active or not

    def step(self) -> bool:
        """Each round of the worker, whether the topology is active or not (so a
        deactivated topology, or one a rebalance is draining, still commits what its
        stateful bolts hold, and their trees complete): take the next step if due.
        True if one went out."""
        now = self._now()
        if self._aligned and self._waiting is not None:
            self._collect(now)
        step = self.coordinator.poll(now)
        if step is None:
            return False
        try:
            if self._aligned:
                self._publish(step.txid, step.action, step.save, now)
                return True
            if step.save is not None:
                self._save(step.save)
        except BaseException:
            self._restart()
            raise
        self._collector.emit([step.txid, step.action], step.txid, CHECKPOINT_STREAM)
        return True

    def ack(self, msg_id: Any) -> None:
        save = self.coordinator.ack(msg_id)
        if save is not None:
            try:
                self._save(save)
            except BaseException:
                self._restart()
                raise

    def fail(self, msg_id: Any) -> None:
        self.coordinator.fail(msg_id, self._now())

    # -- the aligned mode: steps published in the store --------------------------------

    def _publish(self, txid: int, action: str, save: CheckPointState | None, now: float) -> None:
        seq = self._seq + 1
        step = Put(self._ns, STEP_KEY, dumps_json({"seq": seq, "txid": txid, "action": action}))
        if save is None:
            self._store.apply([step])
        else:
            self._save(save, [step])
        self._seq = seq
        self._waiting = (seq, txid, now)
        self._polled_at = -1.0
        self._collect(now)

    def _collect(self, now: float) -> None:
        """Read what the data spouts answered to the step in flight; ack or fail it."""
        assert self._waiting is not None
        seq, txid, since = self._waiting
        if now - self._polled_at < self._poll_period:
            return
        self._polled_at = now
        answers = [
            loads_json(v) if v is not None else None
            for v in self._store.get(self._ns, self._done_keys)
        ]
        mine = [a for a in answers if a is not None and a["seq"] == seq]
        if any(not a["ok"] for a in mine):
            outcome = False
        elif len(mine) == len(self._done_keys):
            outcome = True
        elif now - since > self._timeout:
            outcome = False
        else:
            return
        self._waiting = None
        if outcome:
            self.ack(txid)
        else:
            self.coordinator.fail(txid, now)

    def close(self) -> None:
        self._store.close()
