"""Task executors: the per-task state machines the worker's scheduler drives.

A worker runs every local task on one thread, in turns: a bolt executor drains up to
``batch`` tuples from its inbox per turn; a spout executor first delivers the acker's
replies (ack/fail for its own message ids), then calls ``next_tuple`` a bounded number
of times. Nothing here blocks or sleeps; time comes in through ``now`` arguments and
timer callbacks.

User code (``execute``, ``next_tuple``, ``ack``, ``fail``, ``open``/``prepare``, the
lifecycle calls, custom metrics) is called under ``except BaseException``: SystemExit,
KeyboardInterrupt or an exception whose ``__str__`` raises is one task's error like any
other (reported, the input failed), never the end of the worker. A spout whose
``next_tuple`` raises again and again is polled less and less often
(``next_tuple_backoff``), up to once a second, until a call returns normally.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import Any

from tupletree.errors import FailedException
from tupletree.log_limit import LOG_WINDOW_SECS
from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.ids import Id
from tupletree.reliability.pending import SpoutPending
from tupletree.reliability.protocol import (
    ACK,
    ACKED,
    FAILED,
    INIT,
    RESET,
    RESET_TIMEOUT,
    TIMED_OUT,
)
from tupletree.runtime.collectors import (
    SETTLED,
    BasicOutputCollector,
    OutputCollector,
    SpoutOutputCollector,
    TaskWiring,
)
from tupletree.runtime.metrics import LatencyHistogram, TaskMetrics
from tupletree.topology.tuple import Tuple

# A spout's next_tuple may raise this many times in a row before it is polled less often.
BACKOFF_AFTER_RAISES = 3
BACKOFF_FIRST_SECS = 0.001
BACKOFF_MAX_SECS = 1.0
# A custom metric whose read raises leaves at most one error record per this many
# seconds of the worker's clock (Storm's error throttle window, log_limit.py).
METRIC_ERROR_WINDOW_SECS = LOG_WINDOW_SECS


def next_tuple_backoff(raises_in_a_row: int) -> float:
    """How long a spout is not polled after its ``next_tuple`` raised this many times
    in a row: 0 for the first few, then doubling from 1 ms up to 1 s."""
    if raises_in_a_row <= BACKOFF_AFTER_RAISES:
        return 0.0
    doublings = min(raises_in_a_row - BACKOFF_AFTER_RAISES - 1, 20)
    return min(BACKOFF_MAX_SECS, BACKOFF_FIRST_SECS * (1 << doublings))


class Executor:
    """What every task has: identity, inbox, metrics and error reporting."""

    kind = "task"

    def __init__(self, task_id: int, component_id: str, report: Callable[..., None]) -> None:
        self.task_id = task_id
        self.component_id = component_id
        self.inbox: deque[Any] = deque()
        self.metrics = TaskMetrics()
        self._report = report
        # A spout whose open() raised is never polled. (A bolt whose prepare() raised
        # still runs: its execute() errors are reported tuple by tuple, as in Storm.)
        self.broken = False
        self.context: Any = None
        # Set (from any thread) when the worker is asked to stop: a turn ends before
        # its next tuple or next_tuple call, so a kill waits for one call of user code,
        # not a whole batch. One native bool read per tuple in the compiled build.
        self.halt = False
        # Custom metrics whose last read raised: reported when they start failing, not
        # at every read (every metrics collection) while they go on failing; and each
        # at most once per METRIC_ERROR_WINDOW_SECS (when it was last reported, on
        # ``clock``: the worker sets its own, simulated or not, on its executors).
        self.failing_metrics: set[str] = set()
        self.metric_reported_at: dict[str, float] = {}
        self.clock: Callable[[], float] = perf_counter

    def snapshot(self) -> dict[str, Any]:
        snap = self.metrics.snapshot()
        custom = self.context.custom_metrics if self.context is not None else None
        if custom:
            snap["custom"] = {name: self.read_metric(name, fn) for name, fn in custom.items()}
        return snap

    def read_metric(self, name: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, or None if it raises; what it raises is reported once per run of
        failed reads (again only after a read succeeded), and at most once per
        METRIC_ERROR_WINDOW_SECS of ``clock``, so a broken metric leaves one error
        record, not one per metrics collection, and one that fails at every other read
        one per window. The clock is read only when a read fails."""
        failing = self.failing_metrics
        try:
            value = fn()
        except BaseException as exc:
            if name not in failing:
                failing.add(name)
                now = self.clock()
                last = self.metric_reported_at.get(name)
                if last is None or now - last >= METRIC_ERROR_WINDOW_SECS:
                    self.metric_reported_at[name] = now
                    self.report(
                        exc,
                        f"metric {name} (not reported again while it keeps failing, nor "
                        f"more than once every {METRIC_ERROR_WINDOW_SECS:g} s)",
                    )
            return None
        failing.discard(name)
        return value

    def report(self, exc: BaseException, where: str) -> None:
        self.metrics.errors += 1
        self._report(self, exc, where)

    def call(self, fn: Callable[..., Any], *args: Any, where: str) -> Any:
        """Call user code; report (never propagate) what it raises."""
        try:
            return fn(*args)
        except BaseException as exc:
            self.report(exc, where)
            return None


class SpoutExecutor(Executor):
    kind = "spout"

    def __init__(
        self,
        task_id: int,
        component_id: str,
        spout: Any,
        report: Callable[..., None],
        now: Callable[[], float],
        max_pending: int | None,
    ) -> None:
        super().__init__(task_id, component_id, report)
        self.spout = spout
        self.pending = SpoutPending()
        self.immediate_acks: list[Any] = []
        self.max_pending = max_pending
        self.active = False
        self.metrics.latency = LatencyHistogram()
        self._now = now
        self.collector: SpoutOutputCollector | None = None
        self.raises_in_a_row = 0  # next_tuple calls that raised since one returned
        self.resume_at = 0.0  # while backing off: not polled before this time
        # Called with (self, [(root, msg_id, emitted_at), ...]) as trees time out
        # (runtime/stalls.py: where they stalled).
        self.on_timeout: Callable[[Any, list[Any]], None] | None = None
        # Told when a bolt resets a tree's timeout, so a broker spout can renew the
        # message's lease at the broker (Spout.reset_timeout).
        self._on_reset: Any = getattr(spout, "reset_timeout", None)

    def connect(self, wiring: TaskWiring) -> SpoutOutputCollector:
        self.collector = SpoutOutputCollector(wiring, self)
        return self.collector

    def snapshot(self) -> dict[str, Any]:
        snap = super().snapshot()
        snap["pending"] = len(self.pending)
        return snap

    def track(self, root: Id, msg_id: Any) -> None:
        self.pending.add(root, msg_id, self._now())

    def can_poll(self) -> bool:
        if not self.active or self.broken:
            return False
        if self.resume_at:
            if self._now() < self.resume_at:
                return False
            self.resume_at = 0.0
        mp = self.max_pending
        return mp is None or len(self.pending) < mp

    def poll(self, max_calls: int) -> int:
        """Call ``next_tuple`` until it emits nothing, max pending is reached, or
        ``max_calls`` calls were made. Returns how many calls emitted something."""
        metrics = self.metrics
        next_tuple = self.spout.next_tuple
        pending = self.pending
        mp = self.max_pending
        productive = 0
        for _ in range(max_calls):
            if self.halt:
                break
            before = metrics.emitted
            try:
                next_tuple()
            except BaseException as exc:
                self._next_tuple_raised(exc)
                if self.immediate_acks:
                    self._ack_immediately()
                if metrics.emitted != before:
                    productive += 1
                break
            if self.raises_in_a_row:
                self.raises_in_a_row = 0
            if self.immediate_acks:
                self._ack_immediately()
                if metrics.emitted == before:  # an empty tracked batch, acked: progress
                    productive += 1
                    break
            if metrics.emitted == before:
                break
            productive += 1
            if mp is not None and len(pending) >= mp:
                break
        return productive

    def _next_tuple_raised(self, exc: BaseException) -> None:
        self.report(exc, "next_tuple")
        self.raises_in_a_row += 1
        wait = next_tuple_backoff(self.raises_in_a_row)
        if wait:
            self.resume_at = self._now() + wait

    def _ack_immediately(self) -> None:
        acks, self.immediate_acks = self.immediate_acks, []
        for msg_id in acks:
            self.metrics.acked += 1
            self.call(self.spout.ack, msg_id, where="ack")

    def process_replies(self) -> int:
        """Deliver the acker's verdicts for this task's trees to the spout."""
        inbox = self.inbox
        n = len(inbox)
        if not n:
            return 0
        pending = self.pending
        metrics = self.metrics
        spout = self.spout
        now = self._now()
        for _ in range(n):
            outcome, root = inbox.popleft()
            if outcome == RESET_TIMEOUT:
                if pending.reset(root) and self._on_reset is not None:
                    try:
                        self._on_reset(pending.msg_id(root))
                    except BaseException as exc:  # user code: never the worker's end
                        self.report(exc, "reset_timeout")
                continue
            entry = pending.settle(root)
            if entry is None:
                continue  # already timed out or settled: the spout hears once
            msg_id, emitted_at = entry
            if outcome == ACKED:
                metrics.acked += 1
                metrics.latency.record(now - emitted_at)  # type: ignore[union-attr]
                try:
                    spout.ack(msg_id)
                except BaseException as exc:
                    self.report(exc, "ack")
            else:
                metrics.failed += 1
                if outcome == TIMED_OUT:
                    metrics.timed_out += 1
                    if self.on_timeout is not None:
                        self.on_timeout(self, [(root, msg_id, emitted_at)])
                try:
                    spout.fail(msg_id)
                except BaseException as exc:
                    self.report(exc, "fail")
        return n

    def expire(self) -> None:
        """The timeout tick: fail every tree that outlived the message timeout."""
        expired = self.pending.rotate()
        if expired and self.on_timeout is not None:
            self.on_timeout(self, expired)
        for _root, msg_id, _emitted_at in expired:
            self.metrics.failed += 1
            self.metrics.timed_out += 1
            self.call(self.spout.fail, msg_id, where="fail")


class BoltExecutor(Executor):
    kind = "bolt"

    def __init__(
        self,
        task_id: int,
        component_id: str,
        bolt: Any,
        basic: bool,
        report: Callable[..., None],
    ) -> None:
        super().__init__(task_id, component_id, report)
        self.bolt = bolt
        self.basic = basic
        self.collector: OutputCollector | None = None
        self.basic_collector: BasicOutputCollector | None = None
        self.execute_latency = LatencyHistogram()
        self.metrics.execute_latency = self.execute_latency
        # A Bolt's tuples still unsettled after execute, watched to say where trees
        # stall (runtime/stalls.HeldTuples); None: not watched.
        self.held: Any = None

    def connect(self, wiring: TaskWiring) -> OutputCollector:
        out = self.collector = OutputCollector(wiring)
        if self.basic:
            self.basic_collector = BasicOutputCollector(out)
        return out

    def run_batch(self, limit: int) -> int:
        inbox = self.inbox
        n = len(inbox)
        if n > limit:
            n = limit
        started = perf_counter()
        out = self.collector
        assert out is not None
        pop = inbox.popleft
        if self.basic:
            # BasicBolt: auto-ack inlined (OutputCollector.ack's logic), the hottest loop.
            # The annotated locals let the compiled build read Tuple's fields directly
            # (measured: notes/performance.md, "Figures moved out of docstrings").
            bc = self.basic_collector
            assert bc is not None
            execute = self.bolt.execute
            acks: dict[Id, Id] = out.acks
            # Consecutive inputs are often in the same tree (a fan-out arrives in a row):
            # their ack values are XORed here and put into ``acks`` once per run.
            run_root: Id = 0
            run_val: Id = 0
            failed = 0
            for i in range(n):
                if self.halt:
                    n = i  # the rest stay queued: the worker is stopping
                    break
                tup: Tuple = pop()
                bc.input = tup
                try:
                    execute(tup, bc)
                except FailedException:
                    out.fail(tup)
                    failed += 1
                    continue
                except BaseException as exc:
                    out.fail(tup)
                    failed += 1
                    self.report(exc, "execute")
                    continue
                ack_val: Id = tup._ack_val
                tup._ack_val = SETTLED
                root: Id = tup._root
                if root:
                    # A leaf's ack value is its edge: no XOR with 0 (each XOR of two
                    # 64-bit ints allocates).
                    val: Id = tup._edge ^ ack_val if ack_val else tup._edge
                    if root is run_root or root == run_root:
                        run_val ^= val
                    else:
                        if run_root:
                            acks[run_root] = acks.get(run_root, 0) ^ run_val
                        run_root = root
                        run_val = val
                elif tup._roots:
                    for root, edge in tup._roots.items():
                        acks[root] = acks.get(root, 0) ^ edge ^ ack_val
            if run_root:
                acks[run_root] = acks.get(run_root, 0) ^ run_val
            # out.fail counted the failures; count the acks in one go.
            self.metrics.acked += n - failed
        else:
            execute = self.bolt.execute
            held = self.held
            for i in range(n):
                if self.halt:
                    n = i
                    break
                tup = pop()
                try:
                    execute(tup)
                except BaseException as exc:
                    # Failed at once, as Storm's BasicBolt does; a plain Bolt's input
                    # would otherwise wait for its tree's timeout.
                    if tup._ack_val != SETTLED:
                        out.fail(tup)
                    self.report(exc, "execute")
                    continue
                # Identity, not ``>= 0`` (a generic compare of Ids, measurably dearer:
                # notes/performance.md): SETTLED (-1) is one cached int object. A miss
                # would only watch a settled tuple, which add() prunes.
                if (
                    held is not None
                    and tup._ack_val is not SETTLED
                    and (tup._root or tup._roots is not None)
                ):
                    held.add(tup)
        self.metrics.executed += n
        out.flush()
        self._timed(started, n)
        return n

    def _timed(self, started: float, n: int) -> None:
        """Account a turn of ``n`` tuples that began at ``started`` (perf_counter)."""
        spent = perf_counter() - started
        self.metrics.busy_secs += spent
        if n:
            self.execute_latency.record_many(spent / n, n)


class AckerExecutor(Executor):
    """The acker task (component ``__acker``): feeds messages to an AckerLedger and sends
    its verdicts to the spout task that owns each tree."""

    kind = "acker"

    def __init__(
        self,
        task_id: int,
        report: Callable[..., None],
        inboxes: dict[int, Any],
        high_water: int,
    ) -> None:
        from tupletree.reliability.protocol import ACKER_COMPONENT

        super().__init__(task_id, ACKER_COMPONENT, report)
        self.ledger = AckerLedger(high_water)
        self._inboxes = inboxes
        self.execute_latency = LatencyHistogram()
        self.metrics.execute_latency = self.execute_latency

    def snapshot(self) -> dict[str, Any]:
        snap = super().snapshot()
        snap["pending"] = len(self.ledger)  # trees being tracked
        return snap

    def run_batch(self, limit: int) -> int:
        inbox = self.inbox
        n = len(inbox)
        if n > limit:
            n = limit
        started = perf_counter()
        ledger = self.ledger
        inboxes = self._inboxes
        pop = inbox.popleft
        metrics = self.metrics
        for _ in range(n):
            kind, root, val, spout_task = pop()
            if kind == ACK:
                out = ledger.ack(root, val)
            elif kind == INIT:
                out = ledger.init(root, val, spout_task)
            elif kind == RESET:
                out = ledger.reset(root)
            else:
                out = ledger.fail(root)
            if out is not None:
                outcome = out[0]
                if outcome == ACKED:
                    metrics.acked += 1
                elif outcome == FAILED:
                    metrics.failed += 1
                inboxes[out[2]].append((outcome, root))
        metrics.executed += n
        spent = perf_counter() - started
        metrics.busy_secs += spent
        if n:
            self.execute_latency.record_many(spent / n, n)
        return n

    def expire(self) -> None:
        for outcome, root, spout_task in self.ledger.rotate():
            self.metrics.timed_out += 1
            self._inboxes[spout_task].append((outcome, root))


def inbox_over(executors: list[Executor], limit: int) -> bool:
    """True if an executor among ``executors`` holds more than ``limit`` items in its
    inbox (Worker.over_limit). Here, compiled, rather than as a generator in worker.py:
    the worker asks once per spout per round, and at parallelism 16 (48 bolt and acker
    executors) the interpreted generator cost ~2.2k instructions a sentence
    (notes/performance.md, stop 42)."""
    for ex in executors:
        if len(ex.inbox) > limit:
            return True
    return False
