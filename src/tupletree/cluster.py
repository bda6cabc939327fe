"""What LocalCluster and SparkCluster share: the ``Cluster`` protocol both implement,
and ``ClusterBase``: the DRPC server and the web view started with a cluster, the checks
every submit makes, and the context-manager lifecycle.

The two clusters differ in how they run workers; everything a user sees the same on
both lives here once, so it cannot drift apart. tests/test_two_clusters.py runs the
Storm scenarios and the reliability transcripts on both, through this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tupletree.config import validate
from tupletree.topology.builder import require_topology


@runtime_checkable
class Cluster(Protocol):
    """What a test or a tool may rely on from any cluster.

    ``simulate_time`` is True only on ``LocalCluster(simulate_time=True)``, which alone
    has ``advance_time(secs)``; elsewhere time is real and ``wait_idle`` waits.
    """

    simulate_time: bool

    def submit_topology(
        self, name: str, conf: dict[str, Any] | None, topology: Any, inactive: bool = False
    ) -> None: ...

    def activate(self, name: str) -> None: ...

    def deactivate(self, name: str) -> None: ...

    def kill_topology(self, name: str) -> None: ...

    def topologies(self) -> list[str]: ...

    def metrics(self, name: str) -> dict[str, dict[str, Any]]: ...

    def errors(self, name: str) -> list[str]: ...

    def topology_info(self, name: str) -> dict[str, Any]: ...

    def wait_idle(self, timeout: float | None = 60.0) -> bool: ...

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
        ui_options: dict[str, Any] | None = None,
    ) -> None:
        """``drpc_port`` starts an HTTP DRPC server with the cluster (0: a free port,
        ``cluster.drpc_server.port`` tells which; ``drpc_host="0.0.0.0"`` when workers
        run on other machines); topologies submitted here find it with no config.

        ``ui_port`` serves the web view, its REST API and Prometheus metrics
        (``tupletree.ui``) on ``ui_host`` (127.0.0.1: anyone who reaches it may steer
        the cluster, unless ``ui_options={"token": ...}``; docs/security.md); 0 picks a
        free port, ``cluster.ui_url`` tells which. ``ui_options`` are UIService's
        (token, allowed_hosts, connection bounds), checked. The subclass starts it, with
        ``_start_ui()``, once it can answer ``topologies()``."""
        self._drpc = None
        self._ui: Any = None
        self._ui_address = (ui_host, ui_port)
        self._ui_options = ui_options
        if drpc_port is not None:
            from tupletree.drpc.hosting import ClusterDRPC

            self._drpc = ClusterDRPC(drpc_host, drpc_port, drpc_conf)

    def _start_ui(self) -> None:
        host, port = self._ui_address
        if port is not None and self._ui is None:
            from tupletree.ui.service import UIService

            try:
                self._ui = UIService.from_options(self, host, port, self._ui_options).start()
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
