"""What LocalCluster and SparkCluster share: the DRPC server started with a cluster,
the checks every submit makes, and the context-manager lifecycle.

The two clusters differ in how they run workers; everything a user sees the same on
both lives here once, so it cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from tupletree.config import validate
from tupletree.topology.builder import require_topology


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
    ) -> None:
        """``drpc_port`` starts an HTTP DRPC server with the cluster (0: a free port,
        ``cluster.drpc_server.port`` tells which; ``drpc_host="0.0.0.0"`` when workers
        run on other machines); topologies submitted here find it with no config."""
        self._drpc = None
        if drpc_port is not None:
            from tupletree.drpc.hosting import ClusterDRPC

            self._drpc = ClusterDRPC(drpc_host, drpc_port, drpc_conf)

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
