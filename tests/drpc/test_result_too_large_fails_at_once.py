"""A remote DRPC result larger than the server takes (its body bound, 16 MiB by default)
makes its caller fail at once, naming the cause; it used to wait for the request's
timeout (600 s by default) with nothing but a timeout."""

from __future__ import annotations

import time
from typing import Any

from tupletree import BasicBolt
from tupletree.config import Config
from tupletree.drpc import (
    DRPCClient,
    DRPCExecutionError,
    DRPCServer,
    DRPCTimeoutError,
    LinearDRPCTopologyBuilder,
)

from .support import remote_conf

MAX_BODY = 64 * 1024  # the server's bound, small so the test stays fast


class Repeat(BasicBolt):
    """[request, "N"] -> [request, "x" * N]."""

    outputs = ["request", "result"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], "x" * int(tup[1])])


def test_a_result_the_server_refuses_fails_its_request_at_once(cluster):
    """A user's DRPC function returned a result larger than the DRPC server's body
    bound: the result's post got 413, ReturnResults dropped it, and the caller waited
    for drpc.request.timeout.secs, then saw a bare timeout. Now the caller gets
    DRPCExecutionError at once saying the result was too large, and requests with
    results the server takes are answered as before."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 30}
    with DRPCServer(port=0, conf=conf, max_body_bytes=MAX_BODY) as server:
        builder = LinearDRPCTopologyBuilder("repeat")
        builder.add_bolt(Repeat(), 1)
        cluster.submit_topology("repeat", remote_conf(server), builder.create_remote_topology())
        client = DRPCClient(server.host, server.port)
        assert client.execute("repeat", "10") == "x" * 10
        started = time.monotonic()
        try:
            client.execute("repeat", str(2 * MAX_BODY))
        except DRPCExecutionError as exc:
            assert not isinstance(exc, DRPCTimeoutError), exc
            assert "large" in str(exc), exc
        else:
            raise AssertionError("a result over the server's bound was returned")
        assert time.monotonic() - started < 5
        assert client.execute("repeat", "20") == "x" * 20
        assert server.pending_requests() == 0
