"""A worker: one OS thread of control hosting a set of tasks and scheduling them.

Design note: every local task runs on the worker's single thread, in rounds. A round
gives each bolt and acker task one turn (drain up to ``batch`` tuples; while a bolt's
inbox is over its limit, only the fullest bolt and the ackers), then each spout
task delivers its acker replies and, unless max spout pending is reached or a bolt's
inbox is over ``topology.executor.receive.buffer.size`` (backpressure), polls
``next_tuple`` up to ``spout_calls`` times. One thread means no locks on the hot path
and a deterministic order in simulated time; the cost is that a blocking ``execute``
stalls the whole worker (docs/how-it-runs.md: run I/O-bound work in its own worker or
bolt threads of your own that hand results back through a queue).

The loop is ``step(now)``, one round of it: the periodic duties that are due at
``now`` (spout and acker timeout rotation, tick tuples), frames from other workers
(when a ``link`` is attached and no local inbox is over its limit), a turn for every
task, and frames out when due. Whoever drives the worker calls it: LocalCluster's
thread (real time), ``advance_time``/``wait_idle`` (simulated time, through
``run_until_idle``), a distributed worker's loop and the benchmarks. Time is injected:
``now`` comes from the driver's clock.

Tasks on other workers are reached through ``remote_inbox(task)``: any object with
``append``; a distributed worker plugs its transport in there and as its ``link``.

Stopping: ``request_stop()`` (any thread) makes the running turn end before its next
tuple (or ``next_tuple`` call) and the round end after that turn, so whoever drives the
worker sees ``stopping`` within one call of user code; that driver then calls
``shutdown()``, on the worker's own thread, which closes spouts and cleans up bolts once
however often it is called. ``busy`` names the task whose turn is running (None between
turns): what a stop that does not come names as the task that would not stop.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import pickle
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol, cast

from tupletree.config import Config
from tupletree.errors import InvalidTopologyError
from tupletree.records.errors import ERROR, ErrorRecord, WorkerEvent
from tupletree.records.metrics import TaskSnapshot
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import (
    ACKER_COMPONENT,
    FAIL,
    SYSTEM_COMPONENT,
    SYSTEM_TICK_STREAM,
    TICK_STREAM,
)
from tupletree.runtime.batch_executor import BatchBoltExecutor
from tupletree.runtime.collectors import TaskWiring
from tupletree.runtime.context import TaskLayout, TopologyContext
from tupletree.runtime.error_book import ErrorBook
from tupletree.runtime.error_log import (
    ErrorLogLimiter,
    bounded,
    describe,
    safe_repr,
    task_error,
)
from tupletree.runtime.executors import (
    AckerExecutor,
    BoltExecutor,
    Executor,
    SpoutExecutor,
    inbox_over,
)
from tupletree.runtime.routing import build_routes
from tupletree.runtime.stalls import HeldTuples, TimedOutLog
from tupletree.runtime.target_kinds import target_kinds
from tupletree.runtime.worker_acks import WorkerAcks
from tupletree.topology import groupings as g
from tupletree.topology.batch import Batch
from tupletree.topology.builder import Topology
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

log = logging.getLogger("tupletree")

# Tells apart the topology instances of this process (TupleSource.owner).
_instances = itertools.count(1)
# Frames a step reads from its link at most: bounds the input taken per round, so a
# flood from peers cannot starve the local tasks.
RECEIVE_FRAMES_PER_STEP = 64
# How long an idle worker whose spouts may emit waits before it polls them again
# (Storm's topology.sleep.spout.wait.strategy.time.ms); see Worker.idle_wait.
SPOUT_WAIT_SECS = 0.001
# The longest an idle worker's loop waits for input when it must look at something
# that cannot wake it (bench/two_workers.py's shared counter) or keep a Stop's drain
# short (distributed/worker_main.py, which otherwise waits until its next report: the
# driver's messages wake it).
IDLE_WAIT_LONGEST_SECS = 0.02
TICK_SOURCE = TupleSource(SYSTEM_COMPONENT, TICK_STREAM, -1, Fields(["freq"]))
SYSTEM_TICK_SOURCE = TupleSource(SYSTEM_COMPONENT, SYSTEM_TICK_STREAM, -1, Fields(["freq"]))
# The ticks a bolt task can ask for: the user's, and the runtime's own (CoordinatedBolt).
_TICKS = (
    (Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, TICK_SOURCE),
    (Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS, SYSTEM_TICK_SOURCE),
)


def acker_count(conf: dict[str, Any]) -> int:
    n = conf[Config.TOPOLOGY_ACKER_EXECUTORS]
    return conf[Config.TOPOLOGY_WORKERS] if n is None else n


def make_layout(topology: Topology, conf: dict[str, Any]) -> TaskLayout:
    counts = {cid: spec.tasks for cid, spec in topology.components.items()}
    ackers = acker_count(conf)
    if ackers:
        counts[ACKER_COMPONENT] = ackers
    return TaskLayout(topology, counts)


def pickled_components(
    topology: Topology, dumps: Callable[[Any], bytes] = pickle.dumps
) -> dict[str, bytes]:
    """Pickle each component once; reject one that cannot be copied, naming it.

    ``dumps`` is cloudpickle's on Spark workers, whose classes may be pickled by value.
    """
    out = {}
    for cid, spec in topology.components.items():
        try:
            out[cid] = dumps(spec.obj)
        except Exception as exc:
            # A component made of parts (a Trident bolt: operations, states, spouts) may
            # say which part it is, so the error names the user's object.
            culprit = getattr(spec.obj, "unpicklable_part", None)
            part = culprit(dumps) if callable(culprit) else None
            raise InvalidTopologyError(
                f"component {cid!r} ({type(spec.obj).__name__}"
                f"{f': its {part}' if part else ''}) cannot be copied to its "
                f"tasks: pickling it failed with {type(exc).__name__}: {exc}. Each task runs "
                "its own copy, as in Storm; create unpicklable resources (connections, "
                "locks, lambdas) in open()/prepare() instead of __init__",
                component=cid,
            ) from exc
        for sub in spec.inputs:
            if sub.grouping.kind != g.CUSTOM:
                continue
            try:
                dumps(sub.grouping.custom)
            except Exception as exc:
                raise InvalidTopologyError(
                    f"bolt {cid!r}: the custom grouping on stream {sub.stream!r} of "
                    f"{sub.source!r} ({type(sub.grouping.custom).__name__}) cannot be "
                    f"copied to the emitting tasks: pickling it failed with "
                    f"{describe(exc)}. Each emitting task prepares its own copy, as in "
                    "Storm; make it a module-level class without lambdas or open "
                    "resources",
                    component=cid,
                    stream=sub.stream,
                ) from exc
    return out


def _logged_choose(route: Any, task: int) -> Callable[[list[Any]], list[int]]:
    """topology.debug: log every emit (Storm's "Emitting: ..."); costs nothing when off."""
    choose = route.choose

    def logged(values: list[Any]) -> list[int]:
        targets = choose(values)
        log.info(
            "Emitting: %s:%d %s %r -> tasks %s",
            route.component,
            task,
            route.stream,
            values,
            targets,
        )
        return targets

    return logged


class _Timer:
    __slots__ = ("action", "due", "period")

    def __init__(self, due: float, period: float, action: Callable[[], None]) -> None:
        self.due = due
        self.period = period
        self.action = action

    def __lt__(self, other: _Timer) -> bool:
        return self.due < other.due


class Link(Protocol):
    """A worker's connection to its peers (the distributed transport)."""

    def receive(self, inboxes: dict[int, Any], max_frames: int) -> int:
        """Deliver up to ``max_frames`` frames into ``inboxes``; the items delivered."""
        ...

    def flush_due(self, now: float, idle: bool) -> None:
        """Send what is buffered for peers, if it is time to."""
        ...

    def blocked(self) -> bool:
        """True while peers do not take what is sent (backpressure on the spouts)."""
        ...


class Worker:
    def __init__(
        self,
        name: str,
        topology: Topology,
        conf: dict[str, Any],
        now: Callable[[], float],
        local_tasks: Collection[int] | None = None,
        remote_inbox: Callable[[int], Any] | None = None,
        components: dict[str, bytes] | None = None,
        seed: int | None = None,
        link: Link | None = None,
    ) -> None:
        self.name = name
        self.topology = topology
        self.conf = conf
        self.now = now
        self.layout = make_layout(topology, conf)
        all_tasks = self.layout.task_to_component
        self.local_tasks = set(all_tasks if local_tasks is None else local_tasks)
        self.owner = f"topology {name!r} #{next(_instances)}"
        self.created_at = time.monotonic()  # real time even on a simulated clock: uptime
        # Bounded: the newest records of each kind, each cut (runtime/error_book.py).
        self.errors = ErrorBook()
        self.error_log = ErrorLogLimiter()
        self.batch = conf[Config.TOPOLOGY_EXECUTOR_BATCH_SIZE]
        self.spout_calls = max(1, self.batch // 4)
        self.buffer_limit = conf[Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE]
        self.active = False
        # The transport to other workers, if any; it stops the spouts while blocked.
        self.link = link
        self.external_backpressure: Callable[[], bool] | None = (
            None if link is None else link.blocked
        )
        # Set by whoever drives the worker: interrupts its idle wait (any thread).
        self.wake: Callable[[], None] | None = None
        self.stopping = False  # request_stop() was called
        self.busy: Executor | None = None  # whose turn is running (set per turn)
        self._shut_down = False
        self._timers: list[_Timer] = []
        # (executor, fn) for each TopologyContext.call_each_round of a local task.
        self._round_hooks: list[tuple[Executor, Callable[[], Any]]] = []
        self._seed = seed
        self.acker_tasks = self.layout.component_to_tasks.get(ACKER_COMPONENT, [])

        self.executors: dict[int, Executor] = {}
        self.inboxes: dict[int, Any] = {}
        blobs = components if components is not None else pickled_components(topology)
        for task in sorted(self.local_tasks):
            ex = self.executors[task] = self._make_executor(task, blobs)
            ex.clock = self.now  # custom metrics' error rate limit (read_metric)
            self.inboxes[task] = ex.inbox
        for task in all_tasks:
            if task not in self.local_tasks:
                if remote_inbox is None:
                    raise ValueError(f"task {task} is not local and there is no transport")
                self.inboxes[task] = remote_inbox(task)
        # The bolts' acks, combined per tree over a round (runtime/worker_acks.py).
        self.acks = WorkerAcks({t: box.append for t, box in self.inboxes.items()}, self.acker_tasks)
        # The form a BatchBolt's emits take to each task (runtime/batch_collector.py).
        batch_components = {c.id for c in topology.components.values() if c.is_batch}
        self.target_kinds = target_kinds(
            list(all_tasks),
            {t for t, c in all_tasks.items() if c in batch_components},
            {t for t in all_tasks if t not in self.local_tasks},
        )
        self.spouts = [e for e in self.executors.values() if isinstance(e, SpoutExecutor)]
        self.bolts = [e for e in self.executors.values() if not isinstance(e, SpoutExecutor)]
        self.timed_out = TimedOutLog(now, [e for e in self.bolts if isinstance(e, BoltExecutor)])
        if self.acker_tasks and conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]:
            for ex in self.spouts:
                ex.on_timeout = self.timed_out.record
            for ex in self.bolts:
                if isinstance(ex, BoltExecutor) and not ex.basic:
                    ex.held = HeldTuples(now)

    # -- construction -------------------------------------------------------------

    def _task_conf(self, component: str) -> dict[str, Any]:
        spec = self.topology.components.get(component)
        return {**self.conf, **spec.conf} if spec is not None else dict(self.conf)

    def _make_executor(self, task: int, blobs: dict[str, bytes]) -> Executor:
        component = self.layout.task_to_component[task]
        if component == ACKER_COMPONENT:
            return AckerExecutor(
                task, self._report, self.inboxes, self.conf[Config.TOPOLOGY_ACKER_HIGH_WATER]
            )
        spec = self.topology.components[component]
        obj = pickle.loads(blobs[component])
        if spec.is_spout:
            max_pending = self._task_conf(component)[Config.TOPOLOGY_MAX_SPOUT_PENDING]
            return SpoutExecutor(task, component, obj, self._report, self.now, max_pending)
        if spec.is_batch:
            return BatchBoltExecutor(task, component, obj, self._report)
        return BoltExecutor(task, component, obj, spec.is_basic, self._report)

    def _wakeup(self) -> None:
        wake = self.wake
        if wake is not None:
            wake()

    def _report(self, executor: Executor, exc: BaseException, where: str) -> None:
        # Built here, when an error is reported: nothing of it is on the tuple path.
        record = task_error(executor.component_id, executor.task_id, where, exc, time.time())
        self._keep(record, (executor.task_id, where, record.exception))

    def _keep(self, record: ErrorRecord, key: Any) -> None:
        """Keep an error record and log it unless its key is over its rate limit."""
        self.errors.add(record)
        missed = self.error_log.admit(key, self.now())
        if missed is None:
            return
        more = f" [{missed} more like it since the last one logged, not logged]" if missed else ""
        log.warning("topology %s: %s%s", self.name, record.render().rstrip(), more)

    # -- lifecycle ----------------------------------------------------------------

    def start(self, active: bool = True) -> None:
        """Open/prepare every local task, start the timers, optionally activate."""
        now = self.now()
        timeouts = self.conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]
        timeout = self.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]
        shared_routers: dict[Any, Any] = {}  # the tasks' fields routers (build_routes)
        for task, ex in self.executors.items():
            component = ex.component_id
            conf = self._task_conf(component)
            context = TopologyContext(
                self.layout, task, conf, self.name, self._wakeup, now=self.now
            )
            ex.context = context
            if isinstance(ex, AckerExecutor):
                if timeouts:
                    self._add_timer(now, timeout, ex.expire)
                continue
            spec = self.topology.components[component]
            routes = build_routes(
                self.layout,
                context,
                spec.streams,
                self.local_tasks,
                self.inboxes,
                self.owner,
                shared_routers,
            )
            if conf.get(Config.TOPOLOGY_DEBUG):
                for route in routes.values():
                    route.choose = _logged_choose(route, task)
            ids = IdGenerator(None if self._seed is None else self._seed * 100003 + task)
            wiring = TaskWiring(
                component,
                task,
                routes,
                self.inboxes,
                acker_tasks=self.acker_tasks,
                ids=ids,
                metrics=ex.metrics,
                report=lambda exc, ex=ex: ex.report(exc, "report_error"),
                local_ackers=[i for i, t in enumerate(self.acker_tasks) if t in self.local_tasks],
                owner=self.owner,
                target_kinds=self.target_kinds,
                worker_acks=self.acks,
            )
            if isinstance(ex, SpoutExecutor):
                collector = ex.connect(wiring)
                if timeouts and self.acker_tasks:
                    self._add_timer(now, timeout, ex.expire)
                ex.call(ex.spout.open, conf, context, collector, where="open")
                # open() reported an error (the only one this task can have had yet).
                ex.broken = ex.metrics.errors > 0
            else:
                assert isinstance(ex, BoltExecutor)
                out = ex.connect(wiring)
                if ex.basic:
                    ex.call(ex.bolt.prepare, conf, context, where="prepare")
                else:
                    ex.call(ex.bolt.prepare, conf, context, out, where="prepare")
                for key, source in _TICKS:
                    freq = conf.get(key)
                    if freq:
                        self._add_timer(now, freq, self._ticker(ex, freq, source))
            self._round_hooks.extend((ex, fn) for fn in context.round_hooks)
        if active:
            self.activate()

    @staticmethod
    def _ticker(ex: BoltExecutor, freq: float, source: TupleSource) -> Callable[[], None]:
        def tick() -> None:
            ex.inbox.append(Tuple([freq], source))

        return tick

    def _add_timer(self, now: float, period: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._timers, _Timer(round((now + period) * 1e9) / 1e9, period, action))

    @staticmethod
    def _next_due(timer: _Timer) -> float:
        # Rounded to whole nanoseconds, as the simulated clock is: 0.1 added three
        # times must be due at 0.3, not at 0.30000000000000004.
        return round((timer.due + timer.period) * 1e9) / 1e9

    def activate(self) -> None:
        if self.active:
            return
        self.active = True
        for ex in self.spouts:
            ex.active = True
            ex.call(ex.spout.activate, where="activate")

    def deactivate(self) -> None:
        if not self.active:
            return
        self.active = False
        for ex in self.spouts:
            ex.active = False
            ex.call(ex.spout.deactivate, where="deactivate")

    def request_stop(self) -> None:
        """Ask the worker to stop (any thread): the running turn ends before its next
        tuple, the round after that turn, and ``step`` does nothing more."""
        self.stopping = True
        for ex in self.executors.values():
            ex.halt = True
        self._wakeup()

    def busy_task(self) -> str:
        """Which task's turn is running, for a message: ``bolt 'split' (task 3), in
        execute``, or ``no task (between turns)``."""
        ex = self.busy
        if ex is None:
            return "no task (between turns)"
        doing = "next_tuple or a spout callback" if isinstance(ex, SpoutExecutor) else "execute"
        return f"{ex.kind} {ex.component_id!r} (task {ex.task_id}), in {doing}"

    def shutdown(self) -> None:
        """Close every spout and clean up every bolt, once (later calls do nothing).
        Call it on the thread that runs the worker, after its loop ended."""
        if self._shut_down:
            return
        self._shut_down = True
        self.stopping = True
        self.deactivate()
        for ex in self.executors.values():
            if isinstance(ex, SpoutExecutor):
                ex.call(ex.spout.close, where="close")
            elif isinstance(ex, BoltExecutor):
                ex.call(ex.bolt.cleanup, where="cleanup")

    # -- scheduling ---------------------------------------------------------------

    def next_timer_due(self) -> float | None:
        return self._timers[0].due if self._timers else None

    def idle_wait(self, now: float, longest: float) -> float:
        """How long (seconds, at most ``longest``) the caller may wait for input after a
        ``step`` that did nothing, before it must step again.

        ``SPOUT_WAIT_SECS`` while something may make progress with no input: a spout
        that may emit (active, not backing off, under max pending: Storm's spout wait
        strategy sleeps 1 ms between empty ``nextTuple`` calls), a round hook, or frames
        waiting for a peer's socket. Otherwise nothing can happen before a timer (a
        tick, a spout's timeout rotation) or a spout's back-off ends, unless input
        arrives, which the caller's wait on its sockets returns for: so until then.

        Why: a worker that only waited 1 ms woke ~1,000 times a second for nothing, at
        ~39k instructions a wake (bench/idle_worker.py); a bolt-only worker, or one
        whose spouts wait for acks at max pending, does not need to."""
        if self.stopping or longest <= 0:
            return 0.0
        if self._round_hooks or self._backpressured():
            return min(SPOUT_WAIT_SECS, longest)
        wait = longest
        due = self.next_timer_due()
        if due is not None:
            wait = min(wait, due - now)
        for ex in self.spouts:
            if not ex.active or ex.broken:
                continue
            if ex.resume_at > now:
                wait = min(wait, ex.resume_at - now)
                continue
            mp = ex.max_pending
            if mp is None or len(ex.pending) < mp:
                return min(SPOUT_WAIT_SECS, wait) if wait > 0 else 0.0
        return wait if wait > 0 else 0.0

    def fire_timers(self, now: float) -> int:
        """Run every timer due at ``now`` (each at most once per call)."""
        timers = self._timers
        fired = 0
        while timers and timers[0].due <= now:
            timer = heapq.heappop(timers)
            timer.action()
            fired += 1
            timer.due = self._next_due(timer)
            if timer.due <= now:  # fell behind (a long stall): don't fire a burst
                timer.due = now + timer.period
            heapq.heappush(timers, timer)
        return fired

    def step(self, now: float) -> bool:
        """One round of the worker's loop at time ``now``: the timers that are due, up to
        RECEIVE_FRAMES_PER_STEP frames from the link (unless a local inbox is over its
        limit), a turn for every task, then the link's flush if one is due. True if it
        received or did anything; when not, the caller may wait for input. Once
        ``stopping``, does nothing and returns False."""
        if self.stopping:
            return False
        due = self.next_timer_due()
        if due is not None and now >= due:
            self.fire_timers(now)
        link = self.link
        if link is None:
            return self.run_round()
        received = 0
        if not self.over_limit():
            received = link.receive(self.inboxes, RECEIVE_FRAMES_PER_STEP)
        busy = self.run_round() or received > 0
        link.flush_due(now, idle=not busy)
        return busy

    def run_round(self) -> bool:
        """One turn for every task, then the round's combined acks sent. True if
        anything was executed or emitted. A stop requested meanwhile ends the round
        after the turn that saw it."""
        try:
            return self._turns()
        finally:
            # Even after a turn that raised or halted: nothing acked is held back.
            self.acks.flush()

    def _turns(self) -> bool:
        progressed = False
        batch = self.batch
        # While a bolt's inbox is over its limit, only the bolt with the fullest inbox
        # (and the ackers, which feed no bolt) gets a turn: a bolt that emits thousands
        # of tuples per input would otherwise pile its whole inbox times that into the
        # next one, round after round (the spouts were already stopped). So an inbox
        # grows past the fullest one by one turn's emits at most, and drains first.
        fullest = None
        if self.over_limit():
            fullest = max(
                (ex for ex in self.bolts if not isinstance(ex, AckerExecutor)),
                key=lambda ex: len(ex.inbox),
                default=None,  # only ackers: they all run
            )
        for ex in self.bolts:
            if ex.inbox and (fullest is None or ex is fullest or isinstance(ex, AckerExecutor)):
                self.busy = ex
                ex.run_batch(batch)
                progressed = True
                if ex.halt:
                    self.busy = None
                    return True
        for ex in self.spouts:
            self.busy = ex
            if ex.inbox and ex.process_replies():
                progressed = True
            if ex.can_poll() and not self._backpressured() and ex.poll(self.spout_calls):
                progressed = True
            if ex.halt:
                self.busy = None
                return True
        self.busy = None
        if self._round_hooks and self._run_round_hooks():
            progressed = True
        return progressed

    def _run_round_hooks(self) -> bool:
        progressed = False
        for ex, fn in self._round_hooks:
            if ex.call(fn, where="round hook"):
                progressed = True
                if isinstance(ex, BoltExecutor):
                    assert ex.collector is not None
                    ex.collector.flush()  # the acks the hook made (or the round sends them)
        return progressed

    def _backpressured(self) -> bool:
        if self.over_limit():
            return True
        return self.external_backpressure is not None and self.external_backpressure()

    def over_limit(self) -> bool:
        """True while a local bolt's inbox is over its limit (stop taking more input)."""
        return inbox_over(self.bolts, self.buffer_limit)

    def run_until_idle(self, max_rounds: int = 1_000_000) -> bool:
        """``step`` at the clock's current time until a step makes no progress (timers
        due now fire in the first). False if ``max_rounds`` ran out first (a spout that
        never runs dry keeps a worker busy forever)."""
        now = self.now()
        for _ in range(max_rounds):
            if not self.step(now):
                return True
        return False

    def fail_unserializable(self, item: Any, exc: BaseException) -> None:
        """A tuple bound for another worker could not be serialized: report it, naming
        its component and stream, and fail its trees so the spout can replay."""
        if isinstance(item, Batch):
            # A BatchBolt's emits to one task travel together: all their trees fail.
            roots: Collection[int] = item._all_roots()
            what = f"a value among {safe_repr(item._values)}"
        elif isinstance(item, Tuple):
            roots = item._tree_edges()
            what = f"a value of {safe_repr(item.values)}"
        else:
            self.report_error(f"cannot serialize {safe_repr(item)}: {describe(exc)}")
            return
        src = item._src
        err = TypeError(
            f"component {src.component!r} stream {src.stream!r}: {what} cannot be "
            f"serialized to send it to another worker: {describe(exc)}"
        )
        # Only this worker's own tasks fill its outgoing buffers: the emitter is local.
        self.executors[src.task].report(err, "emit")
        acker_tasks = self.acker_tasks
        for root in roots:
            self.inboxes[acker_tasks[root % len(acker_tasks)]].append((FAIL, root, 0, 0))

    def report_error(self, text: str) -> None:
        """Record an error that belongs to the worker rather than to one of its tasks
        (a frame from a peer that could not be read): it reaches the driver with the
        tasks' errors, as a ``WorkerEvent``. Kept (apart from them, so their flood
        cannot push it out) and logged with the same bounds as theirs."""
        self._keep(WorkerEvent(ERROR, bounded(text), time.time()), ("worker",))

    # -- observation --------------------------------------------------------------

    @property
    def error_count(self) -> int:
        """Error records ever reported (the book keeps only the newest of each kind)."""
        return self.errors.added

    def errors_since(self, count: int) -> list[ErrorRecord]:
        """Error records reported after the first ``count`` (as many as are still kept)."""
        return self.errors.since(count)

    def metrics_snapshot(self) -> dict[int, TaskSnapshot]:
        """Every local task's counters, plus its queue: ``queued`` (tuples waiting in its
        inbox) and, for bolts and ackers, ``queue_limit`` (the receive buffer size over
        which spouts are held back); an acker task's ``pending`` (AckerExecutor.snapshot)
        is the number of trees its ledger holds (what ``topology.acker.high.water``
        bounds)."""
        out = {}
        for task, ex in self.executors.items():
            snap = ex.snapshot()
            snap["queued"] = len(ex.inbox)
            if not isinstance(ex, SpoutExecutor):
                snap["queue_limit"] = self.buffer_limit
            out[task] = cast(TaskSnapshot, snap)
        return out
