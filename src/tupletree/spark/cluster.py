"""SparkCluster: run topologies as workers on Spark, with LocalCluster's semantics.

The driver plays Storm's Nimbus: ``submit_topology`` validates the topology, places
its executors on ``topology.workers`` workers (Storm's even scheduler), and starts them
as long-running tasks of one background Spark job through a WorkerLauncher; Spark plays
the Supervisor, re-running a worker whose process died. The driver keeps each worker's
latest metrics and errors (sent every half second), and relays activate, deactivate
and kill.

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
from tupletree.errors import TopologyNotFoundError
from tupletree.runtime.metrics import aggregate, merge_snapshots
from tupletree.runtime.worker import MAX_ERRORS_KEPT, make_layout, pickled_components
from tupletree.spark.scheduler import assign
from tupletree.topology.builder import Topology

log = logging.getLogger("tupletree")

START_TIMEOUT_SECS = 120.0
# On a cluster master, how long executors may take to register before a submit is
# refused for want of slots (the launcher's check; it does not wait under dynamic
# allocation, where executors come only once tasks are pending).
SLOT_WAIT_SECS = 100.0


class _Running:
    """Driver-side state of one submitted topology."""

    def __init__(self, layout: Any, launcher: Any, active: bool) -> None:
        self.layout = layout
        self.launcher = launcher
        self.active = active
        self.lock = threading.Lock()
        self.snapshots: dict[tuple[int, int], dict[int, dict[str, Any]]] = {}
        self.reports: dict[int, dict[str, Any]] = {}  # worker -> its latest metrics message
        self.report_times: dict[int, float] = {}
        self.ready: set[int] = set()  # workers that said "ready" (any attempt)
        self.errors: deque[str] = deque(maxlen=MAX_ERRORS_KEPT)
        self.logs: deque[str] = deque(maxlen=MAX_ERRORS_KEPT)
        self.changed = threading.Condition(self.lock)

    def on_message(self, message: Any) -> None:
        msg = message.msg
        kind = msg.get("type")
        with self.lock:
            if kind == "metrics":
                self.snapshots[(message.worker, message.attempt)] = msg["snapshot"]
                self.reports[message.worker] = msg
                self.report_times[message.worker] = time.monotonic()
                for text in msg.get("errors", ()):
                    self.errors.append(f"worker {message.worker}: {text}")
            elif kind == "ready":
                self.ready.add(message.worker)
                if message.attempt and message.attempt > 0:
                    # A restarted worker starts in the state the topology had at submit.
                    self.launcher.send(
                        message.worker, {"type": "activate" if self.active else "deactivate"}
                    )
            elif kind == "error":
                self.errors.append(
                    f"worker {message.worker} (attempt {message.attempt}): "
                    f"{msg.get('error')}\n{msg.get('traceback', '')}"
                )
            elif kind == "log":
                self.logs.append(f"worker {message.worker} {msg.get('level')}: {msg.get('line')}")
                log.log(
                    logging.getLevelName(msg.get("level", "INFO")),
                    "worker %s: %s",
                    message.worker,
                    msg.get("line"),
                )
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
    ) -> None:
        super().__init__(drpc_port, drpc_host, drpc_conf)
        self._spark = spark
        self._requested_master = master
        self._owns_session = False
        self._running: dict[str, _Running] = {}

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
        from tupletree.spark.worker_process import TopologyWorkerMain

        full_conf = self._checked_submission(name, conf, topology, self._running)
        _ship_user_modules_by_value(topology)
        pickled_components(topology, cloudpickle.dumps)  # names an unpicklable component
        blob = cloudpickle.dumps(topology)
        layout = make_layout(topology, full_conf)
        workers = full_conf[Config.TOPOLOGY_WORKERS]
        placement = assign(layout, workers)
        main = TopologyWorkerMain(name, blob, full_conf, placement, active=not inactive)
        running = _Running(layout, None, active=not inactive)
        launcher = WorkerLauncher(
            self.spark,
            main,
            workers,
            name=name,
            start_timeout=START_TIMEOUT_SECS,
            slot_wait=SLOT_WAIT_SECS,
            on_message=running.on_message,
        )
        running.launcher = launcher
        launcher.start()
        deadline = time.monotonic() + START_TIMEOUT_SECS
        with running.lock:
            while running.ready != set(range(workers)):
                if launcher.job_error is not None or not launcher.running:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                running.changed.wait(min(remaining, 0.5))
            ready = set(running.ready)
            errors = list(running.errors)
        if ready != set(range(workers)):
            launcher.stop(timeout=10.0)
            detail = f"; first worker error: {errors[0]}" if errors else ""
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
        running.active = True
        running.launcher.broadcast({"type": "activate"})

    def deactivate(self, name: str) -> None:
        running = self._get(name)
        running.active = False
        running.launcher.broadcast({"type": "deactivate"})

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

    # -- observation ----------------------------------------------------------------

    def metrics(self, name: str) -> dict[str, dict[str, Any]]:
        """Same shape as LocalCluster.metrics, summed over workers (and over the
        attempts of a worker that was restarted)."""
        running = self._get(name)
        with running.lock:
            parts = list(running.snapshots.values())
        return aggregate(merge_snapshots(parts), running.layout.task_to_component)

    def errors(self, name: str) -> list[str]:
        running = self._get(name)
        with running.lock:
            return list(running.errors)

    def logs(self, name: str) -> list[str]:
        """Log records (WARNING and up) the topology's workers logged, oldest first."""
        running = self._get(name)
        with running.lock:
            return list(running.logs)

    def wait_idle(self, timeout: float | None = 60.0) -> bool:
        """Return once every worker reports an idle round and no frame is in flight
        between workers, in reports made after this call. False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for running in list(self._running.values()):
            since = time.monotonic()
            with running.lock:
                while not _all_idle(running, since):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    running.changed.wait(0.2 if remaining is None else min(remaining, 0.2))
        return True

    def advance_time(self, secs: float) -> None:
        raise RuntimeError("SparkCluster runs in real time; advance_time needs LocalCluster")

    # -- lifecycle --------------------------------------------------------------------

    def shutdown(self) -> None:
        for name in list(self._running):
            self.kill_topology(name)
        self._stop_drpc()
        if self._owns_session and self._spark is not None:
            self._spark.stop()
            self._spark = None


def _all_idle(running: _Running, since: float) -> bool:
    workers = running.launcher.num_workers
    if any(running.report_times.get(w, 0) < since for w in range(workers)):
        return False
    reports = [running.reports[w] for w in range(workers)]
    sent = sum(r["frames_sent"] for r in reports)
    received = sum(r["frames_received"] for r in reports)
    return all(r["idle"] for r in reports) and sent == received


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
