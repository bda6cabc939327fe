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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tupletree.cluster import ClusterBase, WorkerStats, plan_rebalance
from tupletree.config import Config
from tupletree.distributed.driver_state import DriverState
from tupletree.distributed.scheduler import assign
from tupletree.errors import TopologyNotFoundError
from tupletree.records.errors import TaskError, WorkerEvent
from tupletree.records.metrics import ComponentMetrics
from tupletree.runtime.metrics import aggregate
from tupletree.runtime.stalls import TimedOutTree
from tupletree.runtime.worker import acker_count, make_layout, pickled_components
from tupletree.spark.errors import SparkJobFailed
from tupletree.topology.builder import Topology

log = logging.getLogger("tupletree")

START_TIMEOUT_SECS = 120.0
# On a cluster master, how long executors may take to register before a submit is
# refused for want of slots (the launcher's check; it does not wait under dynamic
# allocation, where executors come only once tasks are pending).
SLOT_WAIT_SECS = 100.0


class RunningTopology:
    """One submitted topology on the driver: its layout and config, the pickled topology
    its workers run, its executors per component (a rebalance changes them and the
    config's ``topology.workers``), and the launcher that runs its workers and keeps
    what they report (``launcher.state``). ``lock`` orders the calls that steer it."""

    def __init__(
        self,
        layout: Any,
        conf: dict[str, Any],
        blob: bytes,
        executors: dict[str, int],
        launcher: Any,
    ) -> None:
        self.layout = layout
        self.conf = conf
        self.blob = blob
        self.executors = executors
        self.launcher = launcher
        self.submitted_at = time.monotonic()
        self.lock = threading.RLock()
        self.killed = False


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
        self._running: dict[str, RunningTopology] = {}
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

        from tupletree.spark.launcher import WorkerLauncher

        full_conf = self._checked_submission(
            name, conf, topology, self._running, master=self.spark.sparkContext.master
        )
        _ship_user_modules_by_value(topology)
        pickled_components(topology, cloudpickle.dumps)  # names an unpicklable component
        blob = cloudpickle.dumps(topology)
        layout = make_layout(topology, full_conf)
        executors = {cid: spec.parallelism for cid, spec in topology.components.items()}
        workers = full_conf[Config.TOPOLOGY_WORKERS]
        launcher = WorkerLauncher(
            self.spark,
            _worker_main(name, blob, full_conf, layout, executors),
            workers,
            name=name,
            start_timeout=START_TIMEOUT_SECS,
            slot_wait=SLOT_WAIT_SECS,
            worker_timeout=full_conf[Config.SUPERVISOR_WORKER_TIMEOUT_SECS],
            active=not inactive,
        )
        try:
            launcher.start()
        except SparkJobFailed as exc:
            hinted = _with_python_hint(exc, launcher, self.spark)
            if hinted is None:
                raise
            raise hinted from exc
        problem = _wait_ready(launcher)
        if problem is not None:
            launcher.stop(timeout=10.0)
            raise SparkJobFailed(f"topology {name!r}: {problem}")
        self._running[name] = RunningTopology(layout, full_conf, blob, executors, launcher)

    def _get(self, name: str) -> RunningTopology:
        try:
            return self._running[name]
        except KeyError:
            raise TopologyNotFoundError(name) from None

    def _read(self, name: str, view: Callable[[DriverState], Any]) -> Any:
        return self._get(name).launcher.read(view)

    def activate(self, name: str) -> None:
        running = self._get(name)
        self._steerable(name)
        with running.lock:
            running.launcher.set_active(True)

    def deactivate(self, name: str) -> None:
        running = self._get(name)
        self._steerable(name)
        with running.lock:
            running.launcher.set_active(False)

    def kill_topology(self, name: str) -> None:
        """Stop the workers (they deactivate and drain briefly) and end the Spark jobs
        (after a rebalance in progress)."""
        running = self._get(name)
        running.killed = True  # ends a rebalance's wait for the trees in flight
        with running.lock:
            running.launcher.stop(timeout=15.0)
            self._running.pop(name, None)

    def _rebalance(
        self,
        name: str,
        wait_secs: float | None,
        workers: int | None,
        parallelism: Mapping[str, int] | None,
    ) -> Callable[[], None]:
        """Storm's rebalance (tupletree.cluster): every worker is stopped once the trees
        in flight are done (or ``wait_secs`` passed) and the new layout is started, each
        task on one worker at a time. The workers' slots are checked first."""
        from tupletree.spark import reservations

        running = self._get(name)
        topology = running.layout.topology
        plan = plan_rebalance(
            topology, running.conf, running.executors, wait_secs, workers, parallelism
        )
        launcher = running.launcher
        reservations.resize(launcher.sc, launcher.job_group, name, plan.workers)
        # The ackers' task count is fixed at submit, as every component's (Storm's
        # default of one per worker is resolved then).
        conf = {
            **running.conf,
            Config.TOPOLOGY_WORKERS: plan.workers,
            Config.TOPOLOGY_ACKER_EXECUTORS: acker_count(running.conf),
        }

        def run() -> None:
            with running.lock:
                if self._running.get(name) is not running:
                    return  # killed before this thread took the lock: nothing to lay out
                was_active = launcher.read(lambda s: s.active)
                launcher.set_active(False)
                try:
                    since = time.monotonic()
                    launcher.wait(
                        lambda s: running.killed or s.drained(since) or None, plan.wait_secs
                    )
                    if running.killed:
                        return
                    main = _worker_main(name, running.blob, conf, running.layout, plan.executors)
                    # The launcher runs the requested layout from here on, whatever follows.
                    running.conf, running.executors = conf, plan.executors
                    launcher.relaunch(main, plan.workers)
                    problem = _wait_ready(launcher)
                    if problem is not None:
                        raise SparkJobFailed(f"topology {name!r}, rebalancing: {problem}")
                finally:
                    # Supervision restarts the workers; each is activated as it is ready.
                    if was_active and not running.killed:
                        launcher.set_active(True)

        return run

    def topologies(self) -> list[str]:
        return sorted(self._running)

    def workers(self, name: str) -> dict[int, Any]:
        """The current attempt of every worker: pid, host, address, attempt."""
        return self._get(name).launcher.workers

    def topology_info(self, name: str) -> dict[str, Any]:
        """``{"topology", "conf", "active", "uptime_secs", "workers", "executors",
        "rebalancing"}`` of a running topology (Storm's getTopologyInfo, as plain
        values); ``active`` as last set, from the moment the call that set it returned."""
        running = self._get(name)
        active, workers = running.launcher.read(lambda s: (s.active, s.num_workers))
        return {
            "topology": running.layout.topology,
            "conf": dict(running.conf),
            "active": active,
            "uptime_secs": time.monotonic() - running.submitted_at,
            "workers": workers,
            "executors": dict(running.executors),
            "rebalancing": self.rebalancing(name),
        }

    def worker_stats(self, name: str) -> dict[int, WorkerStats]:
        """Per worker index, its current process: ``host``, ``pid``, ``attempt``,
        ``restarts`` (attempts before this one), and from its last report
        ``rss_bytes`` (resident memory), ``frames_refused`` (by kind: ``control``,
        ``data``, ``unreadable``) and ``report_age_secs`` (None before one); ``port``,
        of its data socket, and ``tasks``, those of the layout it runs."""
        running = self._get(name)
        tasks: dict[int, list[int]] = {}
        placement = assign(running.layout, running.conf[Config.TOPOLOGY_WORKERS], running.executors)
        for task, worker in sorted(placement.items()):
            tasks.setdefault(worker, []).append(task)

        def view(state: DriverState) -> dict[int, WorkerStats]:
            now = time.monotonic()
            restarts = state.restarts()
            out: dict[int, WorkerStats] = {}
            for index, info in sorted(state.registry.workers.items()):
                report = state.reports.get(index)
                if report is not None and report.attempt != info.attempt:
                    report = None  # an earlier attempt's: nothing of this process yet
                out[index] = {
                    "host": info.host,
                    "port": _port(info.address),
                    "tasks": tasks.get(index, []),
                    "pid": info.pid,
                    "attempt": info.attempt,
                    "restarts": restarts.get(index, 0),
                    "rss_bytes": None if report is None else report.metrics.rss_bytes,
                    "frames_refused": None if report is None else dict(report.metrics.refused),
                    "report_age_secs": None if report is None else now - report.at,
                }
            return out

        return running.launcher.read(view)

    def worker_restarts(self, name: str) -> dict[int, int]:
        """Worker index -> how many times it was started again since submit (after it
        died, hung, or its Spark task ended); each restart is also in ``errors(name)``."""
        return self._read(name, DriverState.restarts)

    # -- observation ----------------------------------------------------------------

    def metrics(self, name: str) -> dict[str, ComponentMetrics]:
        """Same shape as LocalCluster.metrics, summed over workers (and over the
        attempts of a worker that was restarted, and the workers a rebalance replaced).

        Raises SparkJobFailed once the workers' Spark jobs can no longer be run (Spark
        itself stopped): the last figures would otherwise stand still forever.
        ``errors(name)`` says why, and ``kill_topology(name)`` still cleans up. How often
        each worker was restarted: ``worker_restarts(name)``."""
        running = self._get(name)
        snapshot = running.launcher.read(lambda s: _raise_if_ended(name, s) or s.snapshot())
        return aggregate(snapshot, running.layout.task_to_component)

    def errors(self, name: str) -> list[str]:
        """Errors of the topology's tasks and workers, oldest first, as text (rendered
        from ``error_records`` and ``worker_events``)."""
        return self._read(name, lambda s: s.errors.texts())

    def error_records(self, name: str) -> list[TaskError]:
        """The tasks' errors, oldest first (the newest ``MAX_ERRORS_KEPT``), each with
        the worker and attempt that reported it and when."""
        return self._read(name, lambda s: s.errors.task_errors())

    def worker_events(self, name: str) -> list[WorkerEvent]:
        """The workers' own errors (an exception that ended one, a frame it could not
        read, refused control frames, the Spark job ending) and their restarts, oldest
        first, kept apart from the tasks' errors (a bounded list per kind)."""
        return self._read(name, lambda s: s.errors.events())

    def logs(self, name: str) -> list[str]:
        """Log records (WARNING and up) the topology's workers logged, oldest first."""
        return self._read(name, lambda s: list(s.logs))

    def timed_out(self, name: str) -> list[TimedOutTree]:
        """The newest trees that timed out (at most RECENT_LIMIT), oldest first, each with
        its spout message and where it stalled, as LocalCluster's. Each worker looks for
        the holders among its own tasks, so a tree that stalled on another worker than
        its spout's names no holder there. They arrive with the workers' reports."""
        return self._read(name, lambda s: list(s.timed_out))

    def wait_idle(self, timeout: float | None = 60.0) -> bool:
        """Return once every worker reports an idle round and no frame is in flight
        between workers, in reports made after this call. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, running in list(self._running.items()):
            since = time.monotonic()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            idle = running.launcher.wait(
                lambda s, since=since, name=name: (
                    _raise_if_ended(name, s) or s.all_idle(since) or None
                ),
                remaining,
            )
            if idle is None:
                return False
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


def _port(address: str) -> int | None:
    """The port of a worker's data address (``tcp://host:port``)."""
    port = address.rpartition(":")[2]
    return int(port) if port.isdigit() else None


def _with_python_hint(exc: SparkJobFailed, launcher: Any, spark: Any) -> SparkJobFailed | None:
    """``exc`` with what to do when the executors could not start their Python or import
    a module (the full Spark error is searched: the summary in ``exc`` may have cut
    it); None otherwise."""
    from tupletree.spark.errors import executor_python_hint

    text = f"{exc}\n{launcher.job_error or ''}"
    sc = spark.sparkContext
    python = getattr(sc, "pythonExec", None) or "python3"
    try:
        archives: str | None = sc.getConf().get("spark.archives", "") or ""
    except Exception:  # a session being torn down: the hint names both causes
        archives = None
    hint = executor_python_hint(text, python, archives)
    if hint is None:
        return None
    return SparkJobFailed(f"{exc}; {hint}", worker_errors=exc.worker_errors)


def _worker_main(
    name: str, blob: bytes, conf: dict[str, Any], layout: Any, executors: Mapping[str, int]
) -> Any:
    """The picklable body of the workers of one layout (Storm's even scheduler)."""
    from tupletree.distributed.worker_main import TopologyWorkerMain

    placement = assign(layout, conf[Config.TOPOLOGY_WORKERS], executors)
    return TopologyWorkerMain(name, blob, conf, placement, START_TIMEOUT_SECS)


def _wait_ready(launcher: Any) -> str | None:
    """Wait until every worker said Ready (None), or say why not: a job that ended, a
    crash loop of a worker not ready yet (at once, not at the timeout), the timeout."""

    def verdict(state: DriverState) -> str | None:
        ready = state.ready
        if ready >= set(range(state.num_workers)):
            return ""
        loops = {w: e for w, e in state.crash_loops.items() if w not in ready}
        if state.done or loops:
            missing = sorted(set(range(state.num_workers)) - ready)
            first = state.errors.texts()[:1]
            detail = f"; first worker error: {first[0]}" if first else ""
            if loops:
                worker, error = min(loops.items())
                detail = f"; worker {worker} is in a crash loop: {error}{detail}"
            return f"workers {missing} did not start their tasks{detail}"
        return None

    problem = launcher.wait(verdict, START_TIMEOUT_SECS)
    if problem is None:  # the timeout
        missing, first = launcher.read(
            lambda s: (sorted(set(range(s.num_workers)) - s.ready), s.errors.texts()[:1])
        )
        detail = f"; first worker error: {first[0]}" if first else ""
        return f"workers {missing} did not start their tasks{detail}"
    return problem or None


def _raise_if_ended(name: str, state: DriverState) -> None:
    if state.gave_up is not None:
        raise SparkJobFailed(
            f"topology {name!r}: the Spark job running its workers ended: {state.gave_up}"
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
