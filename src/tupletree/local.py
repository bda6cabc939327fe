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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tupletree.cluster import ClusterBase, plan_rebalance
from tupletree.config import Config
from tupletree.errors import TopologyNotFoundError, WorkerDiedError
from tupletree.runtime.clock import RealClock, SimulatedClock
from tupletree.runtime.error_log import describe
from tupletree.runtime.metrics import aggregate
from tupletree.runtime.stalls import TimedOutTree
from tupletree.runtime.worker import Worker, pickled_components
from tupletree.topology.builder import Topology

log = logging.getLogger("tupletree")

# In simulated time a spout that never runs dry would keep "run until idle" going
# forever; each step stops after this many scheduler rounds.
SIMULATED_MAX_ROUNDS = 100_000
IDLE_SLEEP_SECS = 0.001


class _Runner:
    """A worker driven by a background thread in real time."""

    def __init__(self, worker: Worker, clock: RealClock) -> None:
        self.worker = worker
        self.clock = clock
        self.commands: deque[Callable[[], None]] = deque()
        self.wake = threading.Event()
        self.cond = threading.Condition()
        self.idle_rounds = 0
        self.stopping = False
        self.failure: BaseException | None = None
        self.thread = threading.Thread(
            target=self._loop, name=f"tupletree-{worker.name}", daemon=True
        )

    def _loop(self) -> None:
        worker, clock = self.worker, self.clock
        try:
            while not self.stopping:
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

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker's thread, soon."""
        self.commands.append(fn)
        self.wake.set()

    def wait_until(self, check: Callable[[], bool], timeout: float | None) -> bool:
        """``check()`` after each idle round until it holds (True) or ``timeout``."""
        with self.cond:
            self.wake.set()
            return self.cond.wait_for(lambda: check() or not self.thread.is_alive(), timeout)

    def wait_idle(self, timeout: float | None) -> bool:
        """True once idle; False on timeout; WorkerDiedError if the thread died."""
        with self.cond:
            target = self.idle_rounds + 2
            self.wake.set()
            idle = self.cond.wait_for(
                lambda: self.idle_rounds >= target or not self.thread.is_alive(), timeout
            )
        if self.failure is not None:
            raise WorkerDiedError(self.worker.name, describe(self.failure))
        return idle

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()
        if self.thread is not threading.current_thread():
            self.thread.join()


class LocalCluster(ClusterBase):
    """An in-process cluster: ``submit_topology``, ``kill_topology``, ``activate``,
    ``deactivate``, ``metrics``, ``errors``, ``wait_idle`` and, with
    ``simulate_time=True``, ``advance_time``."""

    def __init__(
        self,
        simulate_time: bool = False,
        drpc_port: int | None = None,
        drpc_host: str = "127.0.0.1",
        drpc_conf: dict[str, Any] | None = None,
        ui_port: int | None = None,
        ui_host: str = "127.0.0.1",
    ) -> None:
        super().__init__(drpc_port, drpc_host, drpc_conf, ui_port, ui_host)
        self.simulate_time = simulate_time
        self.clock: SimulatedClock | RealClock = SimulatedClock() if simulate_time else RealClock()
        self._workers: dict[str, Worker] = {}
        self._runners: dict[str, _Runner] = {}
        # Per topology: active as last set (the worker's thread applies it soon after),
        # its executors per component and its workers (rebalance changes them).
        self._active: dict[str, bool] = {}
        self._executors: dict[str, dict[str, int]] = {}
        self._requested_workers: dict[str, int] = {}
        self._lock = threading.Lock()
        self._start_ui()

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
        runner = None if self.simulate_time else _Runner(worker, self.clock)  # type: ignore[arg-type]
        if runner is not None:
            worker.wake = runner.wake.set
        try:
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
            fn(worker)
        else:
            runner.call(lambda: fn(worker))

    def activate(self, name: str) -> None:
        self._steerable(name)
        self._set_active(name, True)

    def deactivate(self, name: str) -> None:
        self._steerable(name)
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
        """Stop the topology now: spouts are closed and bolts cleaned up."""
        worker = self._worker(name)
        runner = self._runners.pop(name, None)
        if runner is None:
            worker.shutdown()
        else:
            runner.stop()
        self._forget(name)

    def _forget(self, name: str) -> None:
        with self._lock:
            del self._workers[name]
            for table in (self._active, self._executors, self._requested_workers):
                table.pop(name, None)

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

    def metrics(self, name: str) -> dict[str, dict[str, Any]]:
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
        """Errors reported by the topology's tasks (user exceptions), oldest first."""
        return list(self._worker(name).errors)

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
            clock.advance(step)
            remaining -= step
            for worker in list(self._workers.values()):
                worker.run_until_idle(SIMULATED_MAX_ROUNDS)  # fires what is due first

    def wait_idle(self, timeout: float | None = 60.0) -> bool:
        """Return once nothing is queued or executing and the spouts emitted nothing in
        their last round. False if ``timeout`` passed first (real time only);
        WorkerDiedError if a topology's worker thread died (never a silent True)."""
        if self.simulate_time:
            return all(
                worker.run_until_idle(SIMULATED_MAX_ROUNDS)
                for worker in list(self._workers.values())
            )
        return all(runner.wait_idle(timeout) for runner in list(self._runners.values()))

    # -- lifecycle --------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_ui()
        for name in list(self._workers):
            self.kill_topology(name)
        self._stop_drpc()
