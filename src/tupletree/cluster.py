"""What LocalCluster and SparkCluster share: the ``Cluster`` protocol both implement,
and ``ClusterBase``: the DRPC server and the web view started with a cluster, the checks
every submit makes, and the context-manager lifecycle.

The two clusters differ in how they run workers; everything a user sees the same on
both lives here once, so it cannot drift apart. tests/test_storm_scenarios.py and
tests/test_transcripts.py run the Storm scenarios and the reliability transcripts on
every cluster, through this protocol (the ``any_cluster`` fixture, tests/clusters.py).
"""

from __future__ import annotations

from typing import Any, Protocol, TypedDict, runtime_checkable

from tupletree.config import validate
from tupletree.runtime.error_records import ERROR, RESTART, TaskError, WorkerEvent
from tupletree.runtime.metric_shapes import ComponentMetrics, TaskStats
from tupletree.runtime.stalls import TimedOutTree
from tupletree.topology.builder import require_topology

# The protocol's answers, for its users (ui/, testing/), which import nothing of the
# runtime: the records and shapes are built there and read here by name.
__all__ = [
    "ERROR",
    "RESTART",
    "Cluster",
    "ClusterBase",
    "ComponentMetrics",
    "TaskError",
    "TaskStats",
    "TimedOutTree",
    "WorkerEvent",
    "WorkerStats",
    "check_components",
]


class WorkerStats(TypedDict):
    """One worker's current process, in ``cluster.worker_stats(name)``: where it runs,
    its ``attempt`` (``restarts``: attempts before this one), its resident memory at its
    last report (None before one, or where it cannot be read) and how old that report
    is. LocalCluster's one worker is the process the cluster runs in."""

    host: str
    pid: int
    attempt: int
    restarts: int
    rss_bytes: int | None
    report_age_secs: float | None


@runtime_checkable
class Cluster(Protocol):
    """What a test or a tool may rely on from any cluster: the web view (``ui/``) and
    the testing helpers (``testing/``) use nothing else (tests/test_cluster_protocol.py
    checks that they call no other method).

    ``simulate_time`` is True only on ``LocalCluster(simulate_time=True)``, where
    ``advance_time(secs)`` moves the clock; elsewhere time is real, ``wait_idle`` waits
    and ``advance_time`` raises RuntimeError.

    Errors come as records (``error_records``: the tasks' exceptions; ``worker_events``:
    the workers' own errors and restarts, kept apart so a flood of the first cannot push
    out the second) and as the texts rendered from both (``errors``), in the order they
    were reported.
    """

    simulate_time: bool

    def submit_topology(
        self, name: str, conf: dict[str, Any] | None, topology: Any, inactive: bool = False
    ) -> None: ...

    def activate(self, name: str) -> None: ...

    def deactivate(self, name: str) -> None: ...

    def kill_topology(self, name: str) -> None: ...

    def topologies(self) -> list[str]: ...

    def metrics(self, name: str) -> dict[str, ComponentMetrics]: ...

    def errors(self, name: str) -> list[str]: ...

    def error_records(self, name: str) -> list[TaskError]: ...

    def worker_events(self, name: str) -> list[WorkerEvent]: ...

    def timed_out(self, name: str) -> list[TimedOutTree]: ...

    def worker_stats(self, name: str) -> dict[int, WorkerStats]: ...

    def logs(self, name: str) -> list[str]: ...

    def topology_info(self, name: str) -> dict[str, Any]: ...

    def wait_idle(self, timeout: float | None = 60.0) -> bool: ...

    def advance_time(self, secs: float) -> None: ...

    def shutdown(self) -> None: ...


def check_components(topology: Any, conf: dict[str, Any]) -> None:
    """Let each component that has ``check_config(conf, component_id)`` check its own
    config at submit (a broker connector: its lease against the message timeout, the
    broker reachable); what it raises names the component and the key to change."""
    for cid, spec in topology.components.items():
        check = getattr(spec.obj, "check_config", None)
        if check is not None:
            check({**conf, **spec.conf}, cid)


class ClusterBase:
    def __init__(
        self,
        drpc_port: int | None = None,
        drpc_host: str = "127.0.0.1",
        drpc_conf: dict[str, Any] | None = None,
        ui_port: int | None = None,
        ui_host: str = "127.0.0.1",
    ) -> None:
        """``drpc_port`` starts an HTTP DRPC server with the cluster (0: a free port,
        ``cluster.drpc_server.port`` tells which; ``drpc_host="0.0.0.0"`` when workers
        run on other machines); topologies submitted here find it with no config.

        ``ui_port`` serves the web view, its REST API and Prometheus metrics
        (``tupletree.ui``) on ``ui_host`` (127.0.0.1: it is not authenticated); 0 picks a
        free port, ``cluster.ui_url`` tells which. The subclass starts it, with
        ``_start_ui()``, once it can answer ``topologies()``."""
        self._drpc = None
        self._ui: Any = None
        self._ui_address = (ui_host, ui_port)
        if drpc_port is not None:
            from tupletree.drpc.hosting import ClusterDRPC

            self._drpc = ClusterDRPC(drpc_host, drpc_port, drpc_conf)

    def _start_ui(self) -> None:
        host, port = self._ui_address
        if port is not None and self._ui is None:
            from tupletree.ui.service import UIService

            try:
                self._ui = UIService(self, host, port).start()
            except BaseException:
                self._stop_drpc()
                raise

    def _stop_ui(self) -> None:
        if self._ui is not None:
            self._ui.stop()
            self._ui = None

    @property
    def ui_url(self) -> str | None:
        """``http://host:port`` of the web view started with ``ui_port`` (None without)."""
        return None if self._ui is None else self._ui.url

    @property
    def drpc_server(self) -> Any:
        """The DRPCServer started with ``drpc_port`` (None without one)."""
        return None if self._drpc is None else self._drpc.server

    def _checked_submission(
        self, name: str, conf: dict[str, Any] | None, topology: Any, running: Any
    ) -> dict[str, Any]:
        """Validate a submission; return the full config (defaults, DRPC server)."""
        require_topology(topology)
        if name in running:
            raise ValueError(f"a topology named {name!r} is already running")
        if self._drpc is not None:
            conf = self._drpc.topology_conf(conf)
        full = validate(conf)
        check_components(topology, full)
        return full

    def _stop_drpc(self) -> None:
        if self._drpc is not None:
            self._drpc.stop()
            self._drpc = None

    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
