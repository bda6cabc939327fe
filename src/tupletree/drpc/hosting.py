"""A DRPC server started with a cluster (``LocalCluster(drpc_port=...)``,
``SparkCluster(drpc_port=...)``), like Storm's DRPC daemon next to Nimbus.

The cluster adds ``drpc.servers`` / ``drpc.http.port`` to every topology it submits
(unless the topology's config sets them), so ``create_remote_topology()`` finds the
server with no configuration.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from tupletree.drpc.invocations import DRPC_HTTP_PORT, DRPC_SERVERS
from tupletree.drpc.server import DRPCServer


class ClusterDRPC:
    def __init__(self, host: str, port: int, conf: Mapping[str, Any] | None = None) -> None:
        self.server = DRPCServer(host, port, conf).start()
        # Bound to every interface: tell workers on other machines this host's address.
        self.advertised = socket.gethostbyname(socket.gethostname()) if host == "0.0.0.0" else host

    def topology_conf(self, conf: Mapping[str, Any] | None) -> dict[str, Any]:
        return {DRPC_SERVERS: [self.advertised], DRPC_HTTP_PORT: self.server.port, **(conf or {})}

    def stop(self) -> None:
        self.server.stop()
