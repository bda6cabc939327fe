"""SparkCluster: run topologies as workers on Spark, with LocalCluster's semantics.

The driver plays Storm's Nimbus: ``submit_topology`` validates the topology, places
its executors on ``topology.workers`` workers (Storm's even scheduler), and starts each
as a long-running task of a background Spark job of its own through a WorkerLauncher.
The launcher and Spark's task retry play the Supervisor: a worker that dies, hangs
(``supervisor.worker.timeout.secs``) or whose task ends while its topology is alive is
started again, forever, with backoff; each restart is in ``errors(name)`` and counted in
``worker_restarts(name)``. The driver keeps each worker's latest metrics and errors (sent
every half second), and relays activate, deactivate and kill.

Component classes are shipped by value (cloudpickle), so a topology defined in a script,
a test module or a file run with ``tupletree run`` works without installing it on the
executors; tupletree itself and the libraries the components import must be importable
there (on a local master they are: executors run this same Python).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from tupletree.cluster import ClusterBase
from tupletree.config import Config
from tupletree.distributed.control import (
    Activate,
    Deactivate,
    JobEnded,
    Metrics,
    WorkerRegistered,
    WorkerRestarting,
)
from tupletree.distributed.scheduler import assign
from tupletree.errors import TopologyNotFoundError
from tupletree.runtime.metrics import aggregate, merge_snapshots
from tupletree.runtime.stalls import RECENT_LIMIT, TimedOutTree
from tupletree.runtime.worker import make_layout, pickled_components
from tupletree.spark.errors import SparkJobFailed
from tupletree.topology.builder import Topology

log = logging.getLogger("tupletree")

START_TIMEOUT_SECS = 120.0
# On a cluster master, how long executors may take to register before a submit is
# refused for want of slots (the launcher's check; it does not wait under dynamic
# allocation, where executors come only once tasks are pending).
SLOT_WAIT_SECS = 100.0


class _Running:
    """Driver-side state of one submitted topology: the launcher's ``Listener``.

    Errors and log lines are the launcher's (one list each, whoever reported them);
    what is kept here is what only a topology has: its metrics, readiness and state."""

    def __init__(self, layout: Any, active: bool, conf: dict[str, Any] | None = None) -> None:
        self.layout = layout
        self.launcher: Any = None
        self.active = active
        self.conf = conf or {}
        self.submitted_at = time.monotonic()
        self.lock = threading.Lock()
        self.snapshots: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
        # worker -> (attempt, its latest metrics report, when it came)
        self.reports: dict[int, tuple[int, Metrics, float]] = {}
        self.ready_workers: set[int] = set()  # workers that said Ready (any attempt)
        self.ended: str | None = None  # why the Spark job ended, when nobody asked it to
        self.crash_loops: dict[int, str] = {}  # worker -> the last error of its crash loop
        # The newest timed-out trees over all workers, oldest first (runtime/stalls.py).
        self.timed_out: deque[TimedOutTree] = deque(maxlen=RECENT_LIMIT)
        self.changed = threading.Condition(self.lock)

    def worker_registered(self, worker: int, attempt: int, event: WorkerRegistered) -> None:
        pass  # a restarted worker is activated once it is Ready (below)

    def ready(self, worker: int, attempt: int) -> None:
        with self.lock:
            self.ready_workers.add(worker)
            # A restarted worker starts inactive (the topology may have been deactivated
            # since submit): activate it if the topology is active. Under the lock that
            # activate/deactivate hold, so it is told the state that is broadcast.
            if attempt > 0 and self.active:
                self.launcher.send(worker, Activate())
            self.changed.notify_all()

    def metrics(self, worker: int, attempt: int, report: Metrics) -> None:
        with self.lock:
            self.snapshots[(worker, attempt)] = report.snapshot
            self.reports[worker] = (attempt, report, time.monotonic())
            self.timed_out.extend(TimedOutTree.from_dict(t) for t in report.timed_out)
            self.changed.notify_all()

    def worker_restarting(self, worker: int, attempt: int, event: WorkerRestarting) -> None:
        with self.lock:
            if event.crash_loop:
                self.crash_loops[worker] = event.reason
            else:
                self.crash_loops.pop(worker, None)
            self.changed.notify_all()

    def job_ended(self, event: JobEnded) -> None:
        with self.lock:
            if not event.requested:
                self.ended = event.error or "it ended without being asked to"
            self.changed.notify_all()


class SparkCluster(ClusterBase):
    """Run topologies on Spark: ``SparkCluster(spark=None, master=None)``.

    ``spark=None`` uses the running SparkSession or starts a local one (``master``,
    default ``local[*]``, with task retries so a dead worker is re-run). Same methods as
    LocalCluster, without simulated time.
    """

    simulate_time = False

    def __init__(
        self,
        spark: Any = None,
        master: str | None = None,
        drpc_port: int | None = None,
        drpc_host: str = "127.0.0.1",
        drpc_conf: dict[str, Any] | None = None,
        ui_port: int | None = None,
        ui_host: str = "127.0.0.1",
        ui_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(drpc_port, drpc_host, drpc_conf, ui_port, ui_host, ui_options)
        self._spark = spark
        self._requested_master = master
        self._owns_session = False
        self._running: dict[str, _Running] = {}
        self._start_ui()

    # -- session ----------------------------------------------------------------------

    @property
    def spark(self) -> Any:
        if self._spark is None:
            from tupletree.spark.session import get_or_create_session

            self._spark, self._owns_session = get_or_create_session(self._requested_master)
        return self._spark

    @property
    def master(self) -> str:
        if self._spark is None:
            return self._requested_master or "local[*]"
        return self._spark.sparkContext.master

    # -- topologies -----------------------------------------------------------------

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: Topology,
        inactive: bool = False,
    ) -> None:
        """Start ``topology`` as ``topology.workers`` Spark tasks; return once every worker
        is ready. Raises at once (with the numbers) when Spark lacks the task slots."""
        from pyspark import cloudpickle

        from tupletree.distributed.worker_main import TopologyWorkerMain
        from tupletree.spark.launcher import WorkerLauncher

        full_conf = self._checked_submission(name, conf, topology, self._running)
        _ship_user_modules_by_value(topology)
        pickled_components(topology, cloudpickle.dumps)  # names an unpicklable component
        blob = cloudpickle.dumps(topology)
        layout = make_layout(topology, full_conf)
        workers = full_conf[Config.TOPOLOGY_WORKERS]
        placement = assign(layout, workers)
        main = TopologyWorkerMain(
            name, blob, full_conf, placement, not inactive, START_TIMEOUT_SECS
        )
        running = _Running(layout, active=not inactive, conf=full_conf)
        launcher = WorkerLauncher(
            self.spark,
            main,
            workers,
            name=name,
            start_timeout=START_TIMEOUT_SECS,
            slot_wait=SLOT_WAIT_SECS,
            listener=running,
            worker_timeout=full_conf[Config.SUPERVISOR_WORKER_TIMEOUT_SECS],
        )
        running.launcher = launcher
        launcher.start()
        deadline = time.monotonic() + START_TIMEOUT_SECS
        with running.lock:
            while running.ready_workers != set(range(workers)):
                if launcher.job_error is not None or not launcher.running:
                    break
                if set(running.crash_loops) - running.ready_workers:
                    break  # a worker that cannot get ready: say so now, not at the timeout
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                running.changed.wait(min(remaining, 0.5))
            ready = set(running.ready_workers)
            loops = {w: e for w, e in running.crash_loops.items() if w not in ready}
        errors = launcher.errors()
        if ready != set(range(workers)):
            launcher.stop(timeout=10.0)
            detail = f"; first worker error: {errors[0]}" if errors else ""
            if loops:
                worker, error = min(loops.items())
                detail = f"; worker {worker} is in a crash loop: {error}{detail}"
            raise RuntimeError(
                f"topology {name!r}: workers {sorted(set(range(workers)) - ready)} did not "
                f"start their tasks{detail}"
            )
        self._running[name] = running

    def _get(self, name: str) -> _Running:
        try:
            return self._running[name]
        except KeyError:
            raise TopologyNotFoundError(name) from None

    def activate(self, name: str) -> None:
        running = self._get(name)
        # Under the lock that the listener's ready() holds, so a worker restarting meanwhile is
        # told the state that is broadcast, not the one before it.
        with running.lock:
            running.active = True
            running.launcher.broadcast(Activate())

    def deactivate(self, name: str) -> None:
        running = self._get(name)
        with running.lock:
            running.active = False
            running.launcher.broadcast(Deactivate())

    def kill_topology(self, name: str) -> None:
        """Deactivate, let workers drain briefly, stop them and end the Spark job."""
        running = self._get(name)
        running.launcher.stop(timeout=15.0)
        del self._running[name]

    def topologies(self) -> list[str]:
        return sorted(self._running)

    def workers(self, name: str) -> dict[int, Any]:
        """The current attempt of every worker: pid, host, address, attempt."""
        return self._get(name).launcher.workers

    def topology_info(self, name: str) -> dict[str, Any]:
        """``{"topology", "conf", "active", "uptime_secs", "workers"}`` of a running
        topology (Storm's getTopologyInfo, as plain values)."""
        running = self._get(name)
        return {
            "topology": running.layout.topology,
            "conf": dict(running.conf),
            "active": running.active,
            "uptime_secs": time.monotonic() - running.submitted_at,
            "workers": running.launcher.num_workers,
        }

    def worker_stats(self, name: str) -> dict[int, dict[str, Any]]:
        """Per worker index, its current process: ``host``, ``pid``, ``attempt``,
        ``restarts`` (attempts before this one), ``rss_bytes`` (resident memory at its
        last report, None before one) and ``report_age_secs``."""
        running = self._get(name)
        now = time.monotonic()
        with running.lock:
            reports = dict(running.reports)
        out = {}
        restarts = running.launcher.restarts
        for index, info in sorted(running.launcher.workers.items()):
            attempt, report, at = reports.get(index, (-1, None, None))
            current = report is not None and attempt == info.attempt
            out[index] = {
                "host": info.host,
                "pid": info.pid,
                "attempt": info.attempt,
                "restarts": restarts.get(index, 0),
                "rss_bytes": report.rss_bytes if current else None,
                "report_age_secs": now - at if current and at is not None else None,
            }
        return out

    def worker_restarts(self, name: str) -> dict[int, int]:
        """Worker index -> how many times it was started again since submit (after it
        died, hung, or its Spark task ended); each restart is also in ``errors(name)``."""
        return self._get(name).launcher.restarts

    # -- observation ----------------------------------------------------------------

    def metrics(self, name: str) -> dict[str, dict[str, Any]]:
        """Same shape as LocalCluster.metrics, summed over workers (and over the
        attempts of a worker that was restarted).

        Raises SparkJobFailed once the workers' Spark jobs can no longer be run (Spark
        itself stopped): the last figures would otherwise stand still forever.
        ``errors(name)`` says why, and ``kill_topology(name)`` still cleans up. How often
        each worker was restarted: ``worker_restarts(name)``."""
        running = self._get(name)
        with running.lock:
            _raise_if_ended(name, running)
            parts = list(running.snapshots.values())
        return aggregate(merge_snapshots(parts), running.layout.task_to_component)

    def errors(self, name: str) -> list[str]:
        """Errors of the topology's tasks and workers, oldest first (the newest 1000)."""
        return self._get(name).launcher.errors()

    def logs(self, name: str) -> list[str]:
        """Log records (WARNING and up) the topology's workers logged, oldest first."""
        return self._get(name).launcher.logs()

    def timed_out(self, name: str) -> list[TimedOutTree]:
        """The newest trees that timed out (at most RECENT_LIMIT), oldest first, each with
        its spout message and where it stalled, as LocalCluster's. Each worker looks for
        the holders among its own tasks, so a tree that stalled on another worker than
        its spout's names no holder there. They arrive with the workers' reports."""
        running = self._get(name)
        with running.lock:
            return list(running.timed_out)

    def wait_idle(self, timeout: float | None = 60.0) -> bool:
        """Return once every worker reports an idle round and no frame is in flight
        between workers, in reports made after this call. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, running in list(self._running.items()):
            since = time.monotonic()
            with running.lock:
                while not _all_idle(running, since):
                    _raise_if_ended(name, running)
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    running.changed.wait(0.2 if remaining is None else min(remaining, 0.2))
        return True

    def advance_time(self, secs: float) -> None:
        raise RuntimeError("SparkCluster runs in real time; advance_time needs LocalCluster")

    # -- lifecycle --------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop_ui()
        for name in list(self._running):
            self.kill_topology(name)
        self._stop_drpc()
        if self._owns_session and self._spark is not None:
            self._spark.stop()
            self._spark = None


def _raise_if_ended(name: str, running: _Running) -> None:
    if running.ended is not None:
        raise SparkJobFailed(
            f"topology {name!r}: the Spark job running its workers ended: {running.ended}"
        )


def _all_idle(running: _Running, since: float) -> bool:
    """Every worker's current process reported an idle round after ``since``, and each
    has read every frame another current process sent it. Frames to or from a process
    that died are lost with it (their trees time out): they are not waited for, which
    is why frames are counted per peer address and not in total."""
    current = running.launcher.workers
    if len(current) < running.launcher.num_workers:
        return False
    reports: dict[str, Metrics] = {}  # data address (from registration) -> report
    for w, info in current.items():
        entry = running.reports.get(w)
        if entry is None:
            return False
        attempt, report, at = entry
        if attempt != info.attempt or at < since or not report.idle:
            return False
        reports[info.address] = report
    return all(
        a.sent_to.get(b_address, 0) == b.received_from.get(a_address, 0)
        for a_address, a in reports.items()
        for b_address, b in reports.items()
        if a is not b
    )


def _ship_user_modules_by_value(topology: Topology) -> None:
    """Let cloudpickle carry the classes of components defined outside installed
    packages (scripts, tests, ``tupletree run`` files), which executors cannot import.

    Components wrapped by tupletree (a CoordinatedBolt's user bolt, the testing
    wrappers) are found by walking the attributes of tupletree's own components.
    """
    from pyspark import cloudpickle

    seen: set[int] = set()
    todo: list[Any] = [spec.obj for spec in topology.components.values()]
    todo += [
        sub.grouping.custom
        for spec in topology.components.values()
        for sub in spec.inputs
        if sub.grouping.custom is not None
    ]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if type(obj).__module__.split(".")[0] == "tupletree":
            todo.extend(v for v in getattr(obj, "__dict__", {}).values() if hasattr(v, "__dict__"))
        for cls in type(obj).__mro__:
            module = sys.modules.get(cls.__module__)
            if module is None or cls.__module__ in ("builtins", "__main__"):
                continue
            if cls.__module__.split(".")[0] == "tupletree":
                continue
            file = getattr(module, "__file__", None)
            if file is None or "site-packages" in Path(file).parts:
                continue
            if Path(file).is_relative_to(Path(sys.base_prefix)):
                continue  # the standard library
            cloudpickle.register_pickle_by_value(module)
