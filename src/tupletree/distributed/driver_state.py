"""The driver's one state about its workers: a pure object, driven by plain values.

Everything the driver knows about the workers of one topology lives here, under the
launcher's one lock:

- registration, routes and the peer table (``Registry``, registration.py);
- lives, deaths, backoff, crash loops and hangs (``Supervisor``, supervision.py);
- what the workers report: the latest metrics of each worker's current attempt and one
  folded total of the attempts that ended, readiness, error records, log lines,
  timed-out trees;
- whether the topology is active, and why its jobs ended when nobody asked them to.

Inputs are plain values: ``on(route, envelope, now)`` for each authenticated frame,
``tick(now)`` on the control thread's timer, ``job_ended(...)`` when a worker's job
ends, and the driver's own commands (``set_active``, ``stop_all``, ``relaunch``). Each
returns the outcomes: ``Send`` (a message for a worker's route), ``KillTask`` (a hung
attempt to kill) and ``Log`` (a line for the driver's log). No sockets, threads or
clocks: the launcher (spark/launcher.py) is the shell that does the I/O, and every rule
is tested with plain values (tests/distributed/test_driver_state.py).

Rules, beyond registration's and supervision's:

- Every message a worker sends is handled by one ``case`` in ``on``.
- A message other than a registration is taken from the current attempt only, on the
  route its registration bound. The ones a task sends on a socket of its own, before or
  after its worker runs (``ONE_SHOT``: its start, its fatal error, its exit), are taken
  once per worker, kind and attempt: a replayed copy is refused and reported, so it
  cannot, say, restart the clock that finds a hung worker.
- An ``Ack`` carries the decision it answers (to a ``TaskStarted``: the backoff).
- Every worker starts inactive; one that says ``Ready`` is told ``Activate`` while the
  topology is active. ``set_active`` tells every registered worker at once, and the
  state it sets is what ``active`` reads from then on.
- Metrics: the latest report of each worker's current attempt is kept. When a newer
  attempt of the worker reports, or a rebalance retires every worker, the older one's
  last snapshot is folded into one total, so memory and the cost of ``snapshot()``
  follow the number of workers and tasks, not of attempts (a crash loop used to keep
  every attempt's snapshot and merge them all on each read).

- Errors are records (records/errors.py) in an ``ErrorBook``: the tasks' ``TaskError``s
  as their worker sent them, stamped with the envelope's worker and attempt; the
  workers' own errors, restarts and the driver's reports as ``WorkerEvent``s, kept
  apart from the tasks' so a bolt's flood of errors cannot push a restart out. The
  driver's own events are stamped ``now + epoch_offset`` (wall-clock seconds: the
  launcher passes ``time.time() - time.monotonic()``).

Bounds: a few entries per worker index; the newest ``MAX_ERRORS_KEPT`` task errors and
as many worker events of each kind (``ErrorBook``); ``MAX_LOGS_KEPT`` log lines; the
newest ``RECENT_LIMIT`` timed-out trees; refused messages in a ``Rejections`` table.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from tupletree.distributed.control import (
    Ack,
    Activate,
    Deactivate,
    Envelope,
    ErrorReport,
    Exiting,
    Heartbeat,
    LogLine,
    Metrics,
    Ready,
    Register,
    TaskStarted,
)
from tupletree.distributed.registration import Registry, Send, WorkerInfo
from tupletree.distributed.rejections import Rejections
from tupletree.distributed.supervision import Restart, RestartPolicy, Supervisor
from tupletree.records.errors import ERROR, RESTART, TaskError, WorkerEvent
from tupletree.runtime.error_book import ErrorBook  # bounded as a LocalCluster worker's
from tupletree.runtime.error_log import MAX_ERROR_CHARS, safe_str
from tupletree.runtime.metrics import merge_snapshots
from tupletree.runtime.stalls import RECENT_LIMIT, TimedOutTree

MAX_LOGS_KEPT = 1000
# Messages a task sends on a short-lived socket of its own (send_once): they come from
# no bound route, so each is taken once per worker and attempt.
ONE_SHOT = (TaskStarted, ErrorReport, Exiting)


@dataclass(frozen=True)
class KillTask:
    """Kill attempt ``attempt`` of ``worker``, hung: through its job (``task``: where and
    as what it runs), or, ``hard``, its process."""

    worker: int
    attempt: int
    hard: bool
    task: TaskStarted


@dataclass(frozen=True)
class Log:
    """A line for the driver's log (``level`` as ``logging``'s)."""

    level: int
    text: str


Outcome = Send | KillTask | Log


@dataclass(frozen=True)
class Report:
    """The latest metrics report of a worker's current attempt, and when it came."""

    attempt: int
    metrics: Metrics
    at: float


class DriverState:
    """What the driver knows about one topology's workers (see the module docstring).
    Not thread-safe: the launcher calls it under its lock."""

    def __init__(
        self,
        name: str,
        num_workers: int,
        *,
        policy: RestartPolicy | None = None,
        worker_timeout: float | None = None,
        start_timeout: float = 120.0,
        active: bool = False,
        epoch_offset: float = 0.0,
    ) -> None:
        self.name = name
        self.epoch_offset = epoch_offset  # now + this: seconds since the epoch
        self.registry = Registry(num_workers)
        self.supervisor = Supervisor(
            num_workers, policy, worker_timeout=worker_timeout, start_timeout=start_timeout
        )
        self.active = active
        self.errors = ErrorBook()
        self.logs: deque[str] = deque(maxlen=MAX_LOGS_KEPT)
        self.refused = Rejections("control messages (replayed, or on another worker's route)")
        self.ready: set[int] = set()  # workers of this generation that said Ready
        self.reports: dict[int, Report] = {}
        self.folded: dict[int, dict[str, Any]] = {}  # the attempts that ended, summed
        self.timed_out: deque[TimedOutTree] = deque(maxlen=RECENT_LIMIT)
        self.crash_loops: dict[int, str] = {}  # worker -> the last error of its crash loop
        self.one_shots: dict[tuple[int, type], int] = {}  # (worker, kind) -> attempt taken
        self.gave_up: str | None = None  # why the jobs ended when nobody asked them to
        self.done = False  # the jobs ended for good: stopped, or given up
        self.started_once = False  # every worker registered once: past the submit

    @property
    def num_workers(self) -> int:
        return self.registry.num_workers

    # ================================================================= inputs

    def on(self, route: bytes, env: Envelope, now: float) -> list[Outcome]:
        """One authenticated envelope from ``route``: the outcomes (an ``Ack`` first when
        the sender wants one)."""
        msg, index, attempt = env.message, env.worker, env.attempt
        out: list[Outcome] = []
        delay = 0.0
        self._sync_live()
        if isinstance(msg, Register):
            self._register(route, index, attempt, msg, now, out)
        elif self._accepts(route, index, attempt, msg, now, out):
            match msg:
                case TaskStarted():
                    self.registry.task_started(index, attempt, msg)
                    delay, restart = self.supervisor.task_started(index, attempt, now)
                    if restart is not None:
                        out += self._restarted(restart, now)
                case Heartbeat():
                    pass  # the control thread is alive; hangs are judged by the loop's reports
                case Ready():
                    self.supervisor.beat(index, attempt, now)
                    self.ready.add(index)
                    if self.active:  # every worker starts inactive
                        out.append(Send(route, Activate()))
                case Metrics():
                    self.supervisor.beat(index, attempt, now)
                    self._metrics(index, attempt, msg, now)
                case ErrorReport(error=error, traceback=trace, fatal=fatal):
                    if fatal:
                        self.supervisor.failed(index, attempt, error)
                    self.errors.add(
                        WorkerEvent(ERROR, error, now + self.epoch_offset, index, attempt, trace)
                    )
                case LogLine(level=level, line=line):
                    line = safe_str(line, MAX_ERROR_CHARS)  # kept MAX_LOGS_KEPT times
                    self.logs.append(f"worker {index} {level}: {line}")
                    number = logging.getLevelName(level)
                    number = number if isinstance(number, int) else logging.WARNING
                    out.append(Log(number, f"worker {index}: {line}"))
                case Exiting():
                    self.registry.exiting(index)
                    self.supervisor.exiting(index, attempt)
        if env.want_ack:
            out.insert(0, Send(route, Ack(delay)))
        return out

    def tick(self, now: float) -> list[Outcome]:
        """The timer: hung workers to kill (and the restarts their deaths are), and a
        report of refused messages when one is due."""
        self._sync_live()
        kills, restarts = self.supervisor.check_hung(now)
        out: list[Outcome] = []
        for restart in restarts:
            out += self._restarted(restart, now)
        for kill in kills:
            task = self.registry.tasks.get(kill.worker)
            if task is not None and task[0] == kill.attempt:  # else: not known, or gone
                out.append(KillTask(kill.worker, kill.attempt, kill.hard, task[1]))
        report = self.refused.due(now)
        if report is not None:
            out += self.report(report, now)
        return out

    def job_ended(
        self, worker: int, first_attempt: int, error: str | None, now: float, spark_gone: bool
    ) -> tuple[float | None, list[Outcome]]:
        """The job that ran ``worker`` from ``first_attempt`` on ended (``error``: why,
        None when it ended well): the seconds before its next job, or None for none
        (stopping; or giving up: before every worker registered, or with Spark gone)."""
        self._sync_live()
        if self.registry.stopping:
            return None, []
        if self.registry.all_registered:
            self.started_once = True
        if not (self.registry.all_registered or self.started_once) or spark_gone:
            return None, self._give_up(error or "it ended without being asked to", now)
        restart = self.supervisor.job_ended(worker, first_attempt, now, error)
        if restart is None:
            return 0.0, []
        return restart.delay, self._restarted(restart, now)

    def next_base(self, worker: int) -> int:
        """The first attempt number of ``worker``'s next job."""
        return self.supervisor.next_base(worker)

    def report(self, text: str, now: float) -> list[Outcome]:
        """An error of the driver's own about its workers (refused frames, ...), at
        ``now``."""
        self.errors.add(WorkerEvent(ERROR, text, now + self.epoch_offset))
        return [Log(logging.WARNING, text)]

    def set_active(self, active: bool) -> list[Outcome]:
        """Activate or deactivate the topology: every registered worker is told, and a
        worker that gets ready later is told on its ``Ready``."""
        self.active = active
        msg = Activate() if active else Deactivate()
        return [Send(route, msg) for _, route in sorted(self.registry.routes.items())]

    def stop_all(self, reason: str) -> list[Outcome]:
        """The driver stops its workers: a ``Stop`` to every registered one; later
        registrations are stopped at once, and ended jobs are not started again."""
        return list(self.registry.stop_all(reason))

    def stopped(self) -> None:
        """Every job has ended after ``stop_all``."""
        self.done = True

    def relaunch(self, num_workers: int) -> None:
        """A new generation (a rebalance): every worker ended after ``stop_all``;
        ``num_workers`` workers start again, each from its next attempt, inactive until
        ``set_active``. What they reported so far is folded into the totals; errors,
        logs and restart counts go on."""
        self.started_once = self.started_once or self.registry.all_registered
        for report in self.reports.values():
            self._fold(report)
        self.reports.clear()
        self.ready.clear()
        self.crash_loops.clear()
        count = max(num_workers, self.registry.num_workers)
        self.registry.new_generation(num_workers, {i: self.next_base(i) for i in range(count)})
        self.supervisor.new_generation(num_workers)
        self.gave_up = None
        self.done = False

    # ================================================================= views

    @property
    def workers(self) -> dict[int, WorkerInfo]:
        """Worker index -> its current registration."""
        return dict(self.registry.workers)

    def restarts(self) -> dict[int, int]:
        """Worker index -> how many times it was started again."""
        counts = self.supervisor.restarts()
        return {i: counts.get(i, 0) for i in range(self.num_workers)}

    def snapshot(self) -> dict[int, dict[str, Any]]:
        """Every task's metrics: the folded total of the attempts that ended, plus the
        latest report of each current attempt (whose gauges win)."""
        return merge_snapshots([self.folded, *(r.metrics.snapshot for r in self.reports.values())])

    def fatal_errors(self) -> dict[int, str]:
        """Worker index -> the last error its code raised."""
        return {w: error for w, (_, error) in self.supervisor.fatal.items()}

    def failure(self) -> str:
        """The best reason known why the jobs ended, to follow what failed ("" if none)."""
        fatal = self.fatal_errors()
        if fatal:
            worker, error = next(iter(fatal.items()))
            return f"; worker {worker} reported: {error}"
        return "" if self.gave_up is None else f": {self.gave_up}"

    def current_reports(self) -> dict[int, Report] | None:
        """Worker index -> the latest report of its current attempt, for every worker;
        None while a worker has not registered or its current attempt not reported."""
        workers = self.registry.workers
        if len(workers) < self.num_workers:
            return None
        out = {}
        for index, info in workers.items():
            report = self.reports.get(index)
            if report is None or report.attempt != info.attempt:
                return None
            out[index] = report
        return out

    def all_idle(self, since: float) -> bool:
        """Every worker's current attempt reported an idle round after ``since``, and
        each has read every frame another current attempt sent it. Frames to or from an
        attempt that died are lost with it (their trees time out): they are not waited
        for, which is why frames are counted per peer address and not in total."""
        reports = self.current_reports()
        if reports is None or any(r.at < since or not r.metrics.idle for r in reports.values()):
            return False
        by_address = {self.registry.workers[i].address: r.metrics for i, r in reports.items()}
        return all(
            a.sent_to.get(b_address, 0) == b.received_from.get(a_address, 0)
            for a_address, a in by_address.items()
            for b_address, b in by_address.items()
            if a is not b
        )

    def drained(self, since: float) -> bool:
        """No tree is pending on any worker, by reports made after ``since`` (a rebalance
        waits for this, up to its wait)."""
        reports = self.current_reports()
        return reports is not None and all(
            r.at >= since and all(t.get("pending", 0) == 0 for t in r.metrics.snapshot.values())
            for r in reports.values()
        )

    def start_report(self, missing: list[int]) -> list[str]:
        """Why each missing worker is missing, as far as the driver can tell."""
        fatal = self.fatal_errors()
        parts = []
        for i in missing:
            task = self.registry.tasks.get(i)
            if i in fatal:
                parts.append(f"worker {i} failed: {fatal[i]}")
            elif task is not None:
                attempt, started = task
                parts.append(
                    f"worker {i}'s task (attempt {attempt}, pid {started.pid} on "
                    f"{started.host}) is running but worker_main has not registered"
                )
            else:
                parts.append(f"worker {i}'s task has not started (waiting for a task slot?)")
        return parts

    # ================================================================= internals

    def _sync_live(self) -> None:
        # Deaths count from the first full registration until stop.
        self.supervisor.live = self.registry.all_registered and not self.registry.stopping

    def _register(
        self, route: bytes, index: int, attempt: int, msg: Register, now: float, out: list
    ) -> None:
        outcome = self.registry.register(route, index, attempt, msg)
        if outcome.refused is not None:
            self._refuse(route, outcome.refused, now, out)
            return
        out += outcome.sends
        if outcome.registered is not None:
            self.supervisor.registered(index, attempt, now)

    def _accepts(
        self, route: bytes, index: int, attempt: int, msg: Any, now: float, out: list
    ) -> bool:
        one_shot = isinstance(msg, ONE_SHOT)
        if not self.registry.accepts(index, attempt, route, one_shot):
            return False  # a replaced attempt, or a route not its own: dropped quietly
        current = self.registry.workers.get(index)
        bound = current is not None and current.attempt == attempt
        if one_shot and not (bound and self.registry.routes.get(index) == route):
            key = (index, type(msg))
            if attempt <= self.one_shots.get(key, -1):
                why = (
                    f"worker {index} attempt {attempt}'s {type(msg).__name__} came again "
                    "(it is sent once: a replayed frame?)"
                )
                self._refuse(route, why, now, out)
                return False
            self.one_shots[key] = attempt
        return True

    def _refuse(self, route: bytes, why: str, now: float, out: list) -> None:
        # Signed, so a replay at worst: still, one report per interval (and one on the
        # timer for what came after it, see tick).
        report = self.refused.reject(route.hex(), why, now)
        if report is not None:
            out += self.report(report, now)

    def _metrics(self, index: int, attempt: int, msg: Metrics, now: float) -> None:
        for record in msg.errors:
            if isinstance(record, TaskError | WorkerEvent):  # a worker of another version?
                self.errors.add(record.on_worker(index, attempt))
        self.timed_out.extend(TimedOutTree.from_dict(t) for t in msg.timed_out)
        previous = self.reports.get(index)
        if previous is not None and previous.attempt < attempt:
            self._fold(previous)
        self.reports[index] = Report(attempt, msg, now)

    def _fold(self, report: Report) -> None:
        self.folded = merge_snapshots([self.folded, report.metrics.snapshot])

    def _restarted(self, restart: Restart, now: float) -> list[Outcome]:
        if restart.crash_loop:
            self.crash_loops[restart.worker] = restart.reason
        else:
            self.crash_loops.pop(restart.worker, None)
        wall = now + self.epoch_offset
        event = WorkerEvent(RESTART, restart.message(), wall, restart.worker, restart.died_attempt)
        self.errors.add(event)
        return [Log(logging.WARNING, event.render())]

    def _give_up(self, why: str, now: float) -> list[Outcome]:
        if self.done:
            return []  # heard once
        self.done = True
        self.gave_up = why
        return self.report(f"the Spark job running the workers ended: {why}", now)
