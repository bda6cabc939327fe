"""StatefulWindowedBolt: a windowed bolt with checkpointed state (Storm's
BaseStatefulWindowedBolt), and, with ``with_persistence()``, a window that is itself
checkpointed (Storm's PersistentWindowedBoltExecutor).

Lifecycle, per task, Storm's: ``prepare(conf, context, collector)``; ``init_state(state)``
once, with the task's KeyValueState as last committed; then ``execute(window)`` per
window; ``pre_prepare(txid)``, ``pre_commit(txid)``, ``pre_rollback()`` around the
checkpoints (tupletree.state); ``cleanup()``. No window fires before ``init_state``.

Two kinds:

- plain (no ``with_persistence()``): the window is in memory, as a WindowedBolt's; its
  tuples are acked as they leave it, and those acks are held until the next checkpoint
  commits (the bolt is a stateful bolt). After a rollback the failed inputs come again
  and may join the window twice (at-least-once, as Storm's StatefulWindowedBoltExecutor
  without a message id field).
- persistent (``with_persistence()``, with ``with_max_events_in_memory(n)``): every input
  is copied into the store (stored.py) and acked at the next checkpoint commit, not when
  it leaves the window, so a window may span far longer than the message timeout; at
  most ``n`` tuples are in memory, the rest read back from the store as ``window.iter()``
  reaches them. The window's index and its manager's state are checkpointed with the
  user's state (namespace ``<component>-<task index>-window``), so after a crash the
  window is exactly what it was at the last commit, and the inputs after it come again.
  The window holds copies (DetachedTuples): emits in ``execute`` are not anchored to
  them (Storm's behaviour: what a persistent window emits is not replayed on a
  downstream failure); ``get_new()`` and ``get_expired()`` are not offered, ``get()``
  loads the whole window. An input whose values do not pickle cannot be stored: it
  is failed alone when it arrives (UnpicklableTupleError, naming the component, the
  field and the value's type), not at the checkpoint, where it would fail every
  checkpoint that reached it. Session windows cannot be persistent here. A processing-time
  (duration, no timestamp field) window's timers are those of the worker's clock: after
  a restart on another process they start over from the restored window. An
  ``execute(window)`` that raises refuses the next checkpoint: the rollback brings the
  window back as last committed and it fires again (its tuples count as processed once
  saved, so committing past the failure would drop their effect).

The aligned mode needs the window persistent (``check_config`` refuses a plain one).

To the planner a StatefulWindowedBolt is a StatefulBolt (``_runtime_bolt`` returns one):
the checkpoint spout, the forwarders and the StatefulBoltExecutor come with it.
"""

from __future__ import annotations

from typing import Any

from tupletree.config import Config
from tupletree.errors import InvalidConfigError
from tupletree.state.kv import KeyValueState
from tupletree.state.provider import open_state_store, state_namespace
from tupletree.state.stateful_bolt import StatefulBolt
from tupletree.windowing.bolt import WindowedBolt
from tupletree.windowing.executor import WindowedBoltExecutor, WindowFailedError
from tupletree.windowing.manager import Fired
from tupletree.windowing.stored import PersistentTupleWindow, WindowTuples

# Storm's BaseStatefulWindowedBolt default for maxEventsInMemory.
DEFAULT_MAX_EVENTS_IN_MEMORY = 1_000_000
WINDOW_KEY = "window"


class StatefulWindowedBolt(WindowedBolt):
    """A windowed bolt with checkpointed state; see the module docstring."""

    def init_state(self, state: Any) -> None:
        pass

    def pre_prepare(self, txid: int) -> None:
        pass

    def pre_commit(self, txid: int) -> None:
        pass

    def pre_rollback(self) -> None:
        pass

    @property
    def persistent(self) -> bool:
        return bool(self.__dict__.get("_persistent", False))

    @property
    def max_events_in_memory(self) -> int:
        return int(self.__dict__.get("_max_in_memory", DEFAULT_MAX_EVENTS_IN_MEMORY))

    def with_persistence(self) -> StatefulWindowedBolt:
        """Checkpoint the window itself, ack inputs at checkpoints (module docstring)."""
        self.__dict__["_persistent"] = True
        return self

    def with_max_events_in_memory(self, n: int) -> StatefulWindowedBolt:
        """A persistent window keeps at most ``n`` tuples in memory, the rest in the
        store."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"with_max_events_in_memory takes a positive integer, got {n!r}")
        self.__dict__["_max_in_memory"] = n
        return self

    def _runtime_bolt(self) -> Any:
        return StatefulWindowRunner(self)


class _Gated:
    """The context a windowed executor gets inside a stateful bolt: its round hooks (the
    window's timers) do nothing until the state is initialized."""

    def __init__(self, context: Any, runner: StatefulWindowRunner) -> None:
        self._context = context
        self._runner = runner

    def call_each_round(self, fn: Any) -> None:
        runner = self._runner
        self._context.call_each_round(lambda: runner.initialized and fn())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class StatefulWindowRunner(StatefulBolt):
    """The StatefulBolt that runs a StatefulWindowedBolt's window (persistent or not);
    the planner wraps it in a StatefulBoltExecutor."""

    def __init__(self, bolt: StatefulWindowedBolt) -> None:
        self.bolt = bolt
        self.persistent = bolt.persistent
        self.emits_anchored = not self.persistent
        self.executor: Any = (
            PersistentWindowedBoltExecutor(bolt, bolt.max_events_in_memory)
            if self.persistent
            else WindowedBoltExecutor(bolt)
        )

    def declare_output_fields(self, declarer: Any) -> None:
        if self.persistent and self.bolt.window_spec.session:
            raise ValueError(
                f"windowed bolt {declarer.component!r}: session windows cannot be "
                "persistent (with_persistence); use a sliding or tumbling window"
            )
        self.executor.declare_output_fields(declarer)

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        self.executor.check_config(conf, component)
        key = Config.TOPOLOGY_STATE_CHECKPOINT_MODE
        if conf.get(key) == "aligned" and not self.persistent:
            # The window is in memory, outside the checkpoint: a checkpoint commits the
            # spouts' positions past tuples still waiting in it, which a restart loses
            # and a rewind sends into it a second time.
            raise InvalidConfigError(
                f"windowed bolt {component!r}: {key} 'aligned' needs its window "
                "checkpointed with the state: call with_persistence() on it (or use the "
                "'storm' mode)",
                key=key,
                value="aligned",
            )

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.initialized = False
        self._collector = collector
        self.executor.prepare(conf, _Gated(context, self), collector)

    def init_state(self, state: Any) -> None:
        if self.persistent:
            self.executor.restore()
        self.bolt.init_state(state)
        self.initialized = True

    def execute(self, tup: Any) -> None:
        self.executor.execute(tup)
        if self.persistent:
            self._collector.ack(tup)  # held by the StatefulBoltExecutor until COMMIT

    def pre_prepare(self, txid: int) -> None:
        if self.persistent:
            self.executor.save(txid)
        self.bolt.pre_prepare(txid)

    def pre_commit(self, txid: int) -> None:
        self.bolt.pre_commit(txid)
        if self.persistent:
            self.executor.commit(txid)

    def pre_rollback(self) -> None:
        self.bolt.pre_rollback()
        if self.persistent:
            self.executor.rollback()

    # A task started again in the middle of a checkpoint gets COMMIT or ROLLBACK before
    # init_state, without the hooks above; the window's saved index must follow the
    # step all the same, or init_state restores it as prepared, not as committed (the
    # inputs since the commit then come again into a window that holds them already).

    def commit_before_init(self, txid: int) -> None:
        if self.persistent:
            self.executor.commit(txid)

    def rollback_before_init(self) -> None:
        if self.persistent:
            self.executor.index.rollback()  # init_state restores the window

    def cleanup(self) -> None:
        self.executor.cleanup()

    def window_metrics(self) -> dict[str, Any]:
        return self.executor.window_metrics()  # type: ignore[no-any-return]


class PersistentWindowedBoltExecutor(WindowedBoltExecutor):
    """A WindowedBoltExecutor whose window holds references to tuples in the store
    (stored.py) and whose state is saved at each checkpoint (module docstring)."""

    persistent = True

    def __init__(self, bolt: Any, in_memory: int) -> None:
        super().__init__(bolt)
        self.in_memory = in_memory

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.store = open_state_store(conf)
        namespace = state_namespace(context.component_id, context.this_task_index) + "-window"
        self.index = KeyValueState(self.store, namespace)
        self.tuples = WindowTuples(
            self.store, namespace + "-tuples", self.in_memory, context.component_id
        )
        self._empty = self.window_state()  # what a rollback to nothing comes back to
        self._committed_low: int | None = None
        # Windows whose execute raised since the last rollback, and their tuples.
        self.failed_since_commit = self.failed_tuples_since_commit = 0

    # -- the hooks of WindowedBoltExecutor --------------------------------------------------

    def _window_item(self, tup: Any) -> int:
        return self.tuples.add(tup)  # copies what a DetachedTuple carries

    def _expire(self, items: list[Any]) -> None:
        pass  # inputs are acked at the checkpoint that saved them, not at expiry

    def _window(self, fired: Fired) -> PersistentTupleWindow:
        return PersistentTupleWindow(
            fired.items, self.tuples, fired.start_ts, fired.end_ts, fired.key
        )

    def _anchors(self, fired: Fired) -> None:
        return None

    def _window_failed(self, fired: Fired, exc: BaseException) -> None:
        # Its inputs are acked at the checkpoint as any others (they are in the saved
        # window until it failed); the window's events leave it, the error is told, and
        # the next checkpoint is refused (save): its rollback brings the window back as
        # last committed, and it fires again.
        from tupletree.windowing.executor import _describe

        self._manager.remove(fired.seqs)
        self._failed_windows += 1
        self.failed_since_commit += 1
        self.failed_tuples_since_commit += len(fired.items)
        err = WindowFailedError(
            f"execute(window) raised {_describe(exc)}; the window's {len(fired.items)} "
            f"tuples left it (persistent window ending at {fired.end_ts} ms)",
            self._component,
            len(fired.items),
            fired.end_ts,
        )
        err.__cause__ = exc
        self._out.report_error(err)

    def window_metrics(self) -> dict[str, Any]:
        metrics = super().window_metrics()
        metrics["in_memory"] = self.tuples.in_memory()
        metrics["in_memory_cap"] = self.tuples.max_partitions * self.tuples.partition_size
        return metrics

    # -- checkpoints ----------------------------------------------------------------------

    def _oldest_ref(self) -> int:
        queue = self._manager.queue
        return queue[0].item if queue else self.tuples.next_ref

    def save(self, txid: int) -> None:
        """PREPARE: the new tuples to the store, the index into the window state. After
        a window failed, refused: its tuples count as processed once saved and left the
        window, so this checkpoint would commit them without their effect; refused, it
        rolls back to the last one, whose window holds them, and they fire again."""
        failed = self.failed_since_commit
        if failed:
            tuples = self.failed_tuples_since_commit
            raise WindowFailedError(
                f"{failed} window(s) of {tuples} tuple(s) failed since the last checkpoint: "
                f"refusing checkpoint {txid} so the rollback brings their tuples back",
                self._component,
                tuples,
                None,
            )
        self.tuples.flush()
        self.index.put(
            WINDOW_KEY,
            {
                "window": self.window_state(),
                "next_ref": self.tuples.next_ref,
                "oldest_ref": self._oldest_ref(),
                "low": self.tuples.low,
            },
        )
        self.index.prepare_commit(txid)

    def commit(self, txid: int) -> None:
        """COMMIT: the saved index becomes the committed one; partitions only older
        indexes needed go."""
        saved = self.index.get(WINDOW_KEY)
        self.index.commit(txid)
        if saved is not None:
            self.tuples.forget_below(saved["oldest_ref"])

    def rollback(self) -> None:
        self.index.rollback()
        self.restore()
        self.failed_since_commit = self.failed_tuples_since_commit = 0

    def restore(self) -> None:
        """The window as last committed (empty if never)."""
        saved = self.index.get(WINDOW_KEY)
        if saved is None:
            self.restore_window_state(self._empty)
            self.tuples.reset(0, 0)
            return
        self.restore_window_state(saved["window"])
        self.tuples.reset(saved["next_ref"], saved["low"])
        self.tuples.forget_below(saved["oldest_ref"])  # left by a crash after a commit

    def cleanup(self) -> None:
        try:
            super().cleanup()
        finally:
            self.store.close()
