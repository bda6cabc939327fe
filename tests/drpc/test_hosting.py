"""A DRPC server started with the cluster, and the ``tupletree drpc`` command."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tupletree import LocalCluster, cli
from tupletree.drpc import DRPCClient, LinearDRPCTopologyBuilder

from .support import ExclamationDRPC


def test_cluster_started_server_serves_remote_topologies(capsys):
    """LocalCluster(drpc_port=0) starts a server that remote topologies find without
    config; `tupletree drpc --port P fn arg` (options first) prints the result; the
    server stops with the cluster."""
    with LocalCluster(drpc_port=0) as cluster:
        server = cluster.drpc_server
        builder = LinearDRPCTopologyBuilder("exclaim")
        builder.add_bolt(ExclamationDRPC(), 2)
        cluster.submit_topology("ex", {}, builder.create_remote_topology())
        assert DRPCClient(server.host, server.port, timeout=30).execute("exclaim", "aaa") == (
            "aaa!!!"
        )
        code = cli.main(["drpc", "--port", str(server.port), "exclaim", "bbb"])
        assert code == 0
        assert capsys.readouterr().out.strip() == "bbb!!!"
        url = server.url
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(url + "/drpc/exclaim", data=b"x", timeout=2)
