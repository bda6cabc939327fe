"""A DRPC server started with a cluster (``LocalCluster(drpc_port=...)``,
``SparkCluster(drpc_port=...)``), like Storm's DRPC daemon next to Nimbus.

The cluster adds ``drpc.servers`` / ``drpc.http.port`` to every topology it submits
(unless the topology's config sets them), so ``create_remote_topology()`` finds the
server with no configuration.

The server's spout-side endpoints require a token made here, at start
(``secrets.token_urlsafe``, 256 bits), which the topologies submitted to this cluster
get as ``drpc.invocations.token``: only they can fetch, answer or fail requests
(server.py: trust model). A topology whose config names other DRPC servers does not
get it: the token is this server's, and is sent to no one else. It reaches workers
inside the topology's config (through Spark on a SparkCluster, as the topology itself
does), and the web view shows it masked.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Mapping
from typing import Any

from tupletree.drpc.invocations import DRPC_HTTP_PORT, DRPC_INVOCATIONS_TOKEN, DRPC_SERVERS
from tupletree.drpc.server import DRPCServer


class ClusterDRPC:
    def __init__(self, host: str, port: int, conf: Mapping[str, Any] | None = None) -> None:
        self.token = secrets.token_urlsafe(32)
        self.server = DRPCServer(host, port, conf, invocations_token=self.token).start()
        # Bound to every interface: tell workers on other machines this host's address.
        self.advertised = socket.gethostbyname(socket.gethostname()) if host == "0.0.0.0" else host

    def topology_conf(self, conf: Mapping[str, Any] | None) -> dict[str, Any]:
        conf = dict(conf or {})
        out = {DRPC_SERVERS: [self.advertised], DRPC_HTTP_PORT: self.server.port, **conf}
        if DRPC_SERVERS not in conf and DRPC_HTTP_PORT not in conf:
            out.setdefault(DRPC_INVOCATIONS_TOKEN, self.token)  # only to this server
        return out

    def stop(self) -> None:
        self.server.stop()
