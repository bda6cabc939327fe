"""DRPC over HTTP: DRPCServer, remote topologies (spout and ReturnResults talk HTTP),
DRPCClient, plain HTTP clients, and the ``tupletree drpc`` command."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tupletree import Config, LocalCluster
from tupletree.drpc import (
    DRPCClient,
    DRPCConnectionError,
    DRPCExecutionError,
    DRPCServer,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
    LinearDRPCTopologyBuilder,
    cli_main,
)

from .support import (
    CountAggregator,
    CreateTuples,
    ExclamationDRPC,
    FailFinish,
    NeverFinish,
    PartialCount,
    remote_conf,
)


def submit_square(cluster: LocalCluster, server: DRPCServer, name: str = "square") -> None:
    builder = LinearDRPCTopologyBuilder("square")
    builder.add_bolt(CreateTuples(), 2)
    builder.add_bolt(PartialCount(), 2).shuffle_grouping()
    builder.add_bolt(CountAggregator(), 2).fields_grouping(["request"])
    cluster.submit_topology(name, remote_conf(server), builder.create_remote_topology())


def post(server: DRPCServer, path: str, body: str) -> tuple[int, str, str | None]:
    req = urllib.request.Request(server.url + path, data=body.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(), resp.headers.get("X-DRPC-Error")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers.get("X-DRPC-Error")


def test_remote_topology_over_http(cluster, server):
    """A remote topology fetches requests and returns results over HTTP."""
    submit_square(cluster, server)
    client = DRPCClient(server.host, server.port)
    assert client.execute("square", "2") == "4"
    assert client.execute("square", "10") == "100"
    assert client.execute("square", "0") == "0"
    assert cluster.errors("square") == []
    assert server.pending_requests() == 0


def test_plain_http_clients(cluster, server):
    """curl-style POST /drpc/<function> with the argument as body; GET with it in the path."""
    builder = LinearDRPCTopologyBuilder("ex claim/x")  # needs percent-encoding in URLs
    builder.add_bolt(ExclamationDRPC(), 2)
    cluster.submit_topology("ex", remote_conf(server), builder.create_remote_topology())
    fn = urllib.parse.quote("ex claim/x", safe="")
    assert post(server, f"/drpc/{fn}", "héllo") == (200, "héllo!!!", None)
    with urllib.request.urlopen(f"{server.url}/drpc/{fn}/a%20b", timeout=10) as resp:
        assert resp.read().decode() == "a b!!!"
    assert DRPCClient(server.host, server.port).execute("ex claim/x", "") == "!!!"


def test_http_errors_are_clear(cluster, server):
    """Unknown function -> 404, failed -> 500, with X-DRPC-Error; the client raises to match."""
    builder = LinearDRPCTopologyBuilder("fail")
    builder.add_bolt(FailFinish(), 2)
    cluster.submit_topology("fail", remote_conf(server), builder.create_remote_topology())

    status, body, kind = post(server, "/drpc/nothing-here", "x")
    assert (status, kind) == (404, "unknown-function")
    assert "no topology serves function 'nothing-here'" in body
    status, body, kind = post(server, "/drpc/fail", "x")
    assert (status, kind) == (500, "failed")
    assert "tuple tree failed" in body
    status, body, kind = post(server, "/nope", "x")
    assert (status, kind) == (404, "not-found")

    client = DRPCClient(server.host, server.port)
    with pytest.raises(DRPCUnknownFunctionError):
        client.execute("nothing-here", "x")
    with pytest.raises(DRPCExecutionError) as info:
        client.execute("fail", "x")
    assert type(info.value) is DRPCExecutionError
    assert info.value.function == "fail"
    assert "tuple tree failed" in info.value.reason
    assert server.pending_requests() == 0


def test_http_request_timeout(cluster):
    """Outliving the server's timeout -> 504 and DRPCTimeoutError; the server keeps nothing."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: 1}
    with DRPCServer(port=0, conf=conf) as server:
        builder = LinearDRPCTopologyBuilder("slow")
        builder.add_bolt(NeverFinish(), 1)
        cluster.submit_topology("slow", remote_conf(server), builder.create_remote_topology())
        with pytest.raises(DRPCTimeoutError, match="within 1 s"):
            DRPCClient(server.host, server.port).execute("slow", "x")
        assert server.pending_requests() == 0
        assert server.book.queued() == 0


def test_concurrent_http_clients(cluster, server):
    """60 requests in flight over HTTP to two functions all get their own answers."""
    submit_square(cluster, server)
    builder = LinearDRPCTopologyBuilder("exclaim")
    builder.add_bolt(ExclamationDRPC(), 2)
    cluster.submit_topology("exclaim", remote_conf(server), builder.create_remote_topology())
    client = DRPCClient(server.host, server.port)
    calls = [
        ("square", str(i), str(i * i)) if i % 2 else ("exclaim", f"x{i}", f"x{i}!!!")
        for i in range(60)
    ]
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        results = list(pool.map(lambda c: client.execute(c[0], c[1]), calls))
    assert results == [want for _, _, want in calls]
    assert server.pending_requests() == 0


def test_killed_topology_makes_function_unknown(cluster):
    """Once its topology is killed, a function is unknown again after the function TTL
    (and a request for it gets 404 then, without waiting for the request timeout)."""
    with DRPCServer(port=0, unknown_function_wait_secs=0.2) as server:
        server.book.function_ttl_secs = 0.5
        builder = LinearDRPCTopologyBuilder("ex")
        builder.add_bolt(ExclamationDRPC(), 1)
        cluster.submit_topology("ex", remote_conf(server), builder.create_remote_topology())
        assert server.execute("ex", "a") == "a!!!"
        cluster.kill_topology("ex")
        with pytest.raises(DRPCUnknownFunctionError):
            DRPCClient(server.host, server.port).execute("ex", "b")


def test_server_down_is_a_connection_error(server):
    """A client of a server that is not there gets DRPCConnectionError naming it."""
    port = server.port
    server.stop()
    with pytest.raises(DRPCConnectionError, match=f"127.0.0.1:{port}"):
        DRPCClient("127.0.0.1", port, timeout=2).execute("f", "x")


def test_cli(cluster, server, capsys):
    """``tupletree drpc FUNCTION ARGS`` prints the result (0) or the error (1)."""
    builder = LinearDRPCTopologyBuilder("exclaim")
    builder.add_bolt(ExclamationDRPC(), 1)
    cluster.submit_topology("exclaim", remote_conf(server), builder.create_remote_topology())
    port = ["--port", str(server.port)]
    assert cli_main(["exclaim", "hi", *port]) == 0
    assert capsys.readouterr().out == "hi!!!\n"
    assert cli_main(["unknown-fn", "hi", *port]) == 1
    assert "no topology serves function 'unknown-fn'" in capsys.readouterr().err
    assert cli_main([]) == 2


def test_servers_config():
    """drpc.servers takes hosts or host:port ([IPv6]:port); a bad entry names the key."""
    from tupletree.drpc.spout import _servers

    conf = {"drpc.servers": ["a", "b:4000", "[::1]:5000", "::1"], "drpc.http.port": 3775}
    assert _servers(conf) == [("a", 3775), ("b", 4000), ("::1", 5000), ("::1", 3775)]
    assert _servers({}) == [("127.0.0.1", 3774)]
    with pytest.raises(ValueError, match=r"drpc\.servers"):
        _servers({"drpc.servers": [3]})


def test_a_remote_topology_with_no_server_there_says_so_in_its_errors(cluster):
    """A remote DRPC topology pointed where no DRPC server listens keeps trying (the
    server may come later), and reports it once in the topology's errors, naming the
    function, the address and where that is configured (it used to be one line in the
    worker's log, and nothing a user of errors() or the web view could see)."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    builder = LinearDRPCTopologyBuilder("nowhere")
    builder.add_bolt(ExclamationDRPC(), 1)
    conf = {"drpc.servers": ["127.0.0.1"], "drpc.http.port": port}
    cluster.submit_topology("nowhere", conf, builder.create_remote_topology())
    deadline = time.monotonic() + 20
    while not cluster.errors("nowhere") and time.monotonic() < deadline:
        time.sleep(0.05)
    errors = cluster.errors("nowhere")
    assert len(errors) == 1, errors
    message = str(errors[0])
    assert f"127.0.0.1:{port}" in message and "'nowhere'" in message
    assert "drpc.servers" in message and "ConnectionError" in message
    cluster.kill_topology("nowhere")


def test_a_fetcher_records_each_streak_of_failures_once_and_keeps_a_bounded_few(monkeypatch):
    """What the spout reports: one entry per server per streak of failed fetches (a
    retry that fails again adds nothing; a success ends the streak), and at most
    UNREACHABLE_KEPT of them for a server that flaps while nobody reports."""
    from tupletree.drpc import spout as spout_module

    script: list[bool] = []  # per fetch: True succeeds, False is refused

    class Stop:
        """Stands for the fetcher's Event: no real waiting; set once the script ends."""

        def is_set(self) -> bool:
            return not script

        def wait(self, secs: float) -> bool:
            return not script

    class ScriptedClient:
        def __init__(self, host, port, token=None) -> None:
            pass

        def fetch(self, function, n, wait):
            if not script.pop(0):
                raise ConnectionRefusedError("refused")
            return []

        def close(self) -> None:
            pass

    monkeypatch.setattr(spout_module, "InvocationsClient", ScriptedClient)

    def fetch_through(steps: list[bool]) -> Any:
        source = spout_module._RemoteSource("f", [("h", 1)])
        source.active = True
        source._stopping = Stop()  # type: ignore[assignment]
        script[:] = steps
        source._fetch_loop("h", 1)
        return source.unreachable

    streaks = fetch_through(([False] * 4 + [True]) * 3)
    assert [entry[:2] for entry in streaks] == [("h", 1)] * 3
    assert "ConnectionRefusedError: refused" in streaks[0][2]
    assert len(fetch_through([False, True] * 40)) == spout_module.UNREACHABLE_KEPT
