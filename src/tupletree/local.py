"""LocalCluster: run topologies in this process, in real or simulated time.

Each submitted topology is one Worker hosting all its tasks. In real time each worker
runs on a thread of its own; with ``simulate_time=True`` nothing runs in the background:
``advance_time`` and ``wait_idle`` run the workers on the caller's thread, so a test
sees a settled, deterministic state when they return (Storm's simulated-time cluster).

``activate``/``deactivate`` take effect in the topology's status at once (what
``topology_info`` and the web view say); the worker's thread applies them to the spouts
at the start of its next round. ``rebalance`` follows Storm's steps on the one worker:
``workers`` is accepted and recorded in the topology's config (``topology.workers``, as
Storm's LocalCluster, whose topologies also share one process), executors regroup the
tasks (what the web view shows; every task of the one worker runs on its thread either
way), and in real time the wait ends early once no tree is pending. In simulated time
the wait is not spent (time moves only when the test says): the worker is run to idle.

A kill (``kill_topology``, the web view's, the end of ``tupletree run``) asks the worker
to stop and waits for it at most ``supervisor.worker.shutdown.sleep.secs``: the worker's
thread ends its turn before the next tuple, then closes the spouts and cleans up the
bolts, once, on its own thread. A task still inside one call of user code when the wait
is over is named in a warning; the name is free again at once, and the worker's thread
cleans up whenever that call returns (a thread cannot be killed from outside).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tupletree.cluster import ClusterBase, WorkerStats, plan_rebalance
from tupletree.config import Config
from tupletree.errors import TopologyNotFoundError, WorkerDiedError
from tupletree.records.errors import TaskError, WorkerEvent
from tupletree.records.metrics import ComponentMetrics
from tupletree.records.stalls import TimedOutTree
from tupletree.runtime.clock import RealClock, SimulatedClock
from tupletree.runtime.error_log import describe
from tupletree.runtime.gc_tuning import SharedTuning
from tupletree.runtime.log_capture import TopologyLogs
from tupletree.runtime.memory import resident_bytes
from tupletree.runtime.metrics import aggregate
from tupletree.runtime.worker import Worker, pickled_components
from tupletree.topology.builder import Topology

log = logging.getLogger("tupletree")

# In simulated time a spout that never runs dry would keep "run until idle" going
# forever; each step stops after this many scheduler rounds.
SIMULATED_MAX_ROUNDS = 100_000
IDLE_SLEEP_SECS = 0.001


class _Runner:
    """A worker driven by a background thread in real time."""

    def __init__(self, worker: Worker, clock: RealClock, logs: TopologyLogs) -> None:
        self.worker = worker
        self.clock = clock
        self.logs = logs
        self.commands: deque[Callable[[], None]] = deque()
        self.wake = threading.Event()
        self.cond = threading.Condition()
        self.idle_rounds = 0
        self.failure: BaseException | None = None
        # Set (under cond) as the thread's last act: its final notify comes while the
        # thread is still alive, so a waiter woken by it cannot go by is_alive().
        self.ended = False
        self.thread = threading.Thread(
            target=self._loop, name=f"tupletree-{worker.name}", daemon=True
        )

    def _loop(self) -> None:
        with self.logs.running(self.worker.name):
            self._run()

    def _run(self) -> None:
        worker, clock = self.worker, self.clock
        try:
            while not worker.stopping:
                while self.commands:
                    self.commands.popleft()()
                now = clock.now()
                if worker.step(now):
                    continue
                with self.cond:
                    self.idle_rounds += 1
                    self.cond.notify_all()
                due = worker.next_timer_due()
                sleep = IDLE_SLEEP_SECS if due is None else min(IDLE_SLEEP_SECS, due - now)
                if sleep > 0 and self.wake.wait(sleep):
                    self.wake.clear()
        except BaseException as exc:  # a bug in tupletree itself: keep it visible
            self.failure = exc
            log.exception("worker %s died", worker.name)
            worker.report_error(f"the worker thread died (a bug in tupletree): {describe(exc)}")
            with self.cond:
                self.idle_rounds += 1
                self.cond.notify_all()
        finally:
            worker.shutdown()
            with self.cond:  # a wait_until on this worker ends now, not at its timeout
                self.ended = True
                self.cond.notify_all()

    def _gone(self) -> bool:
        return self.ended or not self.thread.is_alive()

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker's thread, soon."""
        self.commands.append(fn)
        self.wake.set()

    def wait_until(self, check: Callable[[], bool], timeout: float | None) -> bool:
        """``check()`` after each idle round until it holds (True) or ``timeout``."""
        with self.cond:
            self.wake.set()
            return self.cond.wait_for(lambda: check() or self._gone(), timeout)

    def wait_idle(self, timeout: float | None) -> bool:
        """True once idle; False on timeout; WorkerDiedError if the thread died."""
        with self.cond:
            target = self.idle_rounds + 2
            self.wake.set()
            idle = self.cond.wait_for(lambda: self.idle_rounds >= target or self._gone(), timeout)
        if self.failure is not None:
            raise WorkerDiedError(self.worker.name, describe(self.failure))
        return idle

    def stop(self, timeout: float) -> bool:
        """Ask the worker to stop; wait up to ``timeout`` for its thread to end (it
        closes and cleans up its tasks first). False if it is still running."""
        self.worker.request_stop()
        self.wake.set()
        if self.thread is threading.current_thread() or not self.thread.is_alive():
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()


class LocalCluster(ClusterBase):
    """An in-process cluster: ``submit_topology``, ``kill_topology``, ``activate``,
    ``deactivate``, ``metrics``, ``errors`` (and their records), ``logs``,
    ``worker_stats``, ``wait_idle`` and, with ``simulate_time=True``,
    ``advance_time``."""

    def __init__(
        self,
        simulate_time: bool = False,
        drpc_port: int | None = None,
        drpc_host: str = "127.0.0.1",
        drpc_conf: dict[str, Any] | None = None,
        ui_port: int | None = None,
        ui_host: str = "127.0.0.1",
        ui_options: dict[str, Any] | None = None,
        tune_gc: bool = True,
    ) -> None:
        """``tune_gc``: tune the process's cyclic GC for the workers while this cluster
        exists, as SparkCluster's workers are (runtime/gc_tuning.py says why and what it
        buys); False leaves the process's GC as it is."""
        super().__init__(drpc_port, drpc_host, drpc_conf, ui_port, ui_host, ui_options)
        self.simulate_time = simulate_time
        self._gc_tuned = False
        self.clock: SimulatedClock | RealClock = SimulatedClock() if simulate_time else RealClock()
        self._workers: dict[str, Worker] = {}
        self._runners: dict[str, _Runner] = {}
        # Per topology: active as last set (the worker's thread applies it soon after),
        # its executors per component and its workers (rebalance changes them).
        self._active: dict[str, bool] = {}
        self._executors: dict[str, dict[str, int]] = {}
        self._requested_workers: dict[str, int] = {}
        self._lock = threading.Lock()
        # Log records of the topologies' components (WARNING and up): logs(name).
        self._logs = TopologyLogs().install()
        self._start_ui()
        if tune_gc:  # last: a constructor that raised leaves the process as it was
            SharedTuning.acquire()
            self._gc_tuned = True

    # -- topologies -----------------------------------------------------------------

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: Topology,
        inactive: bool = False,
    ) -> None:
        """Start ``topology`` under ``name``; ``inactive=True`` holds its spouts until
        ``activate``. Raises InvalidConfigError / InvalidTopologyError before anything runs."""
        full_conf = self._checked_submission(name, conf, topology, self._workers)
        blobs = pickled_components(topology)
        with self._lock:
            if name in self._workers:  # submitted by another thread meanwhile
                raise ValueError(f"a topology named {name!r} is already running")
            worker = Worker(name, topology, full_conf, self.clock.now, components=blobs)
            self._workers[name] = worker
            self._active[name] = not inactive
            self._executors[name] = {c: s.parallelism for c, s in topology.components.items()}
            self._requested_workers[name] = full_conf[Config.TOPOLOGY_WORKERS]
        clock = self.clock
        runner = None if isinstance(clock, SimulatedClock) else _Runner(worker, clock, self._logs)
        if runner is not None:
            worker.wake = runner.wake.set
        try:
            with self._logs.running(name):
                worker.start(active=not inactive)
        except BaseException:
            # Not started: the name stays free for a corrected topology.
            self._forget(name)
            worker.shutdown()
            raise
        if runner is None:
            return
        self._runners[name] = runner
        runner.thread.start()

    def _worker(self, name: str) -> Worker:
        try:
            return self._workers[name]
        except KeyError:
            raise TopologyNotFoundError(name) from None

    def _on_worker(self, name: str, fn: Callable[[Worker], None]) -> None:
        worker = self._worker(name)
        runner = self._runners.get(name)
        if runner is None:
            with self._logs.running(name):
                fn(worker)
        else:
            runner.call(lambda: fn(worker))

    def activate(self, name: str) -> None:
        with self._steering(name):
            self._set_active(name, True)

    def deactivate(self, name: str) -> None:
        with self._steering(name):
            self._set_active(name, False)

    def _set_active(self, name: str, active: bool) -> None:
        self._worker(name)
        self._active[name] = active
        self._on_worker(name, Worker.activate if active else Worker.deactivate)

    def _rebalance(
        self,
        name: str,
        wait_secs: float | None,
        workers: int | None,
        parallelism: dict[str, int] | None,
    ) -> Callable[[], None]:
        worker = self._worker(name)
        conf = {**worker.conf, Config.TOPOLOGY_WORKERS: self._requested_workers[name]}
        plan = plan_rebalance(
            worker.topology, conf, self._executors[name], wait_secs, workers, parallelism
        )

        def run() -> None:
            was_active = self._active[name]
            self._set_active(name, False)
            runner = self._runners.get(name)
            if runner is None:
                worker.run_until_idle(SIMULATED_MAX_ROUNDS)
            else:
                runner.wait_until(
                    lambda: not worker.active and not any(len(s.pending) for s in worker.spouts),
                    plan.wait_secs,
                )
            self._executors[name] = plan.executors
            self._requested_workers[name] = plan.workers
            if was_active:
                self._set_active(name, True)

        return run

    def kill_topology(self, name: str) -> None:
        """Stop the topology now: the running task stops before its next tuple, then
        spouts are closed and bolts cleaned up, once, on the worker's thread. Waits at
        most ``supervisor.worker.shutdown.sleep.secs`` (then logs which task would not
        stop); a second kill meanwhile waits for the same stop."""
        worker = self._worker(name)
        runner = self._runners.get(name)
        if runner is None:  # simulated time: the caller's thread runs the worker
            with self._logs.running(name):
                worker.shutdown()
        else:
            wait = worker.conf[Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS]
            if not runner.stop(wait):
                log.warning(
                    "topology %r did not stop within %g s (%s=%g): %s is still running; "
                    "its spouts are closed and bolts cleaned up once that call returns",
                    name,
                    wait,
                    Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS,
                    wait,
                    worker.busy_task(),
                )
            # A rebalance of it ends as its worker stops: wait for that before the name
            # is free, or it could lay out (and activate) a topology submitted again
            # under the name.
            if not self._wait_rebalanced(name, max(wait, 1.0)):
                log.warning("topology %r: its rebalance did not end with it", name)
        self._forget(name, worker)

    def _forget(self, name: str, worker: Worker | None = None) -> None:
        """Free ``name`` (only if ``worker`` still holds it, when given: a second kill,
        or a topology submitted again under the name meanwhile, leaves it be)."""
        with self._lock:
            if worker is not None and self._workers.get(name) is not worker:
                return
            del self._workers[name]
            self._runners.pop(name, None)
            for table in (self._active, self._executors, self._requested_workers):
                table.pop(name, None)
        self._logs.forget(name)

    def topologies(self) -> list[str]:
        return sorted(self._workers)

    def topology_info(self, name: str) -> dict[str, Any]:
        """``{"topology", "conf", "active", "uptime_secs", "workers", "executors",
        "rebalancing"}`` of a running topology (Storm's getTopologyInfo, as plain
        values). ``workers`` is the one worker that runs it; ``conf`` holds the
        ``topology.workers`` asked for (at submit, or by the last rebalance)."""
        worker = self._worker(name)
        return {
            "topology": worker.topology,
            "conf": {**worker.conf, Config.TOPOLOGY_WORKERS: self._requested_workers[name]},
            "active": self._active[name],
            "uptime_secs": time.monotonic() - worker.created_at,
            "workers": 1,
            "executors": dict(self._executors[name]),
            "rebalancing": self.rebalancing(name),
        }

    # -- observation ----------------------------------------------------------------

    def metrics(self, name: str) -> dict[str, ComponentMetrics]:
        """Per component (and per task): emitted, transferred, executed, acked, failed,
        timed_out, errors and, for spouts, complete latency (mean, p50, p99 in ms)."""
        worker = self._worker(name)
        return aggregate(worker.metrics_snapshot(), worker.layout.task_to_component)

    def timed_out(self, name: str) -> list[TimedOutTree]:
        """Recent trees that timed out, newest last (at most 100): each names its spout
        task and message id and the tasks that still held one of its tuples, queued or
        handed to ``execute`` (runtime/stalls.py)."""
        return self._worker(name).timed_out.records()

    def errors(self, name: str) -> list[str]:
        """Errors reported by the topology's tasks (user exceptions) and its worker,
        oldest first, as text (rendered from ``error_records`` and ``worker_events``)."""
        return self._worker(name).errors.texts()

    def error_records(self, name: str) -> list[TaskError]:
        """The tasks' errors, oldest first (the newest MAX_ERRORS_KEPT)."""
        return self._worker(name).errors.task_errors()

    def worker_events(self, name: str) -> list[WorkerEvent]:
        """The worker's own errors (its thread died, a value it could not serialize),
        oldest first, kept apart from the tasks' errors."""
        return self._worker(name).errors.events()

    def logs(self, name: str) -> list[str]:
        """Log records (WARNING and up) the topology's components logged on its worker's
        thread, oldest first, ``LEVEL: logger: message`` (runtime/log_capture.py)."""
        self._worker(name)
        return self._logs.lines(name)

    def worker_stats(self, name: str) -> dict[int, WorkerStats]:
        """The one worker, 0: this process (``attempt`` and ``restarts`` 0, memory read
        now, so its report is 0 s old)."""
        worker = self._worker(name)
        stats: WorkerStats = {
            "host": socket.gethostname(),
            "port": None,
            "tasks": sorted(worker.layout.task_to_component),
            "pid": os.getpid(),
            "attempt": 0,
            "restarts": 0,
            "rss_bytes": resident_bytes(),
            "report_age_secs": 0.0,
        }
        return {0: stats}

    # -- time -----------------------------------------------------------------------

    def advance_time(self, secs: float) -> None:
        """Simulated time only: advance in 1 s steps, running every topology to idle
        after each step."""
        if not self.simulate_time:
            raise RuntimeError("advance_time needs LocalCluster(simulate_time=True)")
        clock = self.clock
        assert isinstance(clock, SimulatedClock)
        remaining = float(secs)
        while remaining > 0:
            step = min(1.0, remaining)
            # Stop at every timer due on the way, so a duty with a period under the
            # step (a 0.5 s timeout, 0.25 s ticks) fires as often as its period says.
            now = clock.now()
            for worker in self._workers.values():
                due = worker.next_timer_due()
                if due is not None and now < due < now + step:
                    step = due - now
            clock.advance(step)
            remaining -= step
            for worker in list(self._workers.values()):
                with self._logs.running(worker.name):
                    worker.run_until_idle(SIMULATED_MAX_ROUNDS)  # fires what is due first

    def wait_idle(self, timeout: float | None = 60.0) -> bool:
        """Return once nothing is queued or executing and the spouts emitted nothing in
        their last round. False if ``timeout`` passed first (real time only);
        WorkerDiedError if a topology's worker thread died (never a silent True)."""
        if self.simulate_time:
            return all(self._run_to_idle(worker) for worker in list(self._workers.values()))
        return all(runner.wait_idle(timeout) for runner in list(self._runners.values()))

    def _run_to_idle(self, worker: Worker) -> bool:
        with self._logs.running(worker.name):
            return worker.run_until_idle(SIMULATED_MAX_ROUNDS)

    # -- lifecycle --------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_ui()
        for worker in list(self._workers.values()):
            worker.request_stop()  # all at once: the waits below overlap
        for name in list(self._workers):
            self.kill_topology(name)
        self._stop_drpc()
        self._logs.uninstall()
        if self._gc_tuned:
            self._gc_tuned = False
            SharedTuning.release()
