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


def test_the_cluster_server_gives_its_token_to_its_own_topologies_only():
    """The cluster's DRPC server requires a token on the topology's endpoints; topologies
    submitted to the cluster get it in their config (and serve callers with it), a
    stranger without it gets 401, and a topology configured for other DRPC servers does
    not get it (it would carry this server's token elsewhere)."""
    import http.client

    from tupletree.config import Config

    with LocalCluster(drpc_port=0) as cluster:
        server = cluster.drpc_server
        builder = LinearDRPCTopologyBuilder("exclaim")
        builder.add_bolt(ExclamationDRPC(), 1)
        cluster.submit_topology("ex", {}, builder.create_remote_topology())
        token = cluster.topology_info("ex")["conf"][Config.DRPC_INVOCATIONS_TOKEN]
        assert isinstance(token, str) and len(token) >= 32
        assert DRPCClient(server.host, server.port, timeout=30).execute("exclaim", "a") == "a!!!"
        conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
        conn.request("GET", "/invocations/fetch/exclaim?max=1")
        resp = conn.getresponse()
        assert (resp.status, resp.getheader("X-DRPC-Error")) == (401, "unauthorized")
        other = LinearDRPCTopologyBuilder("elsewhere")
        other.add_bolt(ExclamationDRPC(), 1)
        conf = {"drpc.servers": ["127.0.0.1"], "drpc.http.port": 1}  # nothing listens there
        cluster.submit_topology("other", conf, other.create_remote_topology(), inactive=True)
        assert cluster.topology_info("other")["conf"][Config.DRPC_INVOCATIONS_TOKEN] is None
