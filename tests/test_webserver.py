"""The threaded aiohttp host shared by tupletree's HTTP services."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from tupletree.webserver import WebServer


def _app() -> web.Application:
    app = web.Application(client_max_size=1024)

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response({"len": len(body)})

    app.router.add_post("/echo", echo)
    return app


def test_serves_on_a_free_loopback_port_and_stops():
    """Port 0 picks a free port on 127.0.0.1; after stop nothing listens there."""
    with WebServer(_app()) as server:
        assert server.host == "127.0.0.1" and server.port > 0
        req = urllib.request.Request(server.url + "/echo", data=b"abc", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.loads(resp.read()) == {"len": 3}
        port = server.port
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_body_over_the_limit_is_refused_with_413():
    """client_max_size is enforced by aiohttp before the handler sees the body."""
    with WebServer(_app()) as server:
        req = urllib.request.Request(server.url + "/echo", data=b"x" * 4096, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 413


def test_a_taken_port_names_the_service_and_address():
    """Starting on a port already in use fails at start with the address in the message."""
    with WebServer(_app()) as first, pytest.raises(OSError, match=f"127.0.0.1:{first.port}"):
        WebServer(_app(), port=first.port, name="second").start()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"GET / HTTP/1.1\r\nHo st: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
    ],
)
def test_a_malformed_request_is_one_warning_line_not_a_traceback(request_bytes, caplog):
    """The client's mistake gets its 400 and a one-line WARNING naming what was wrong
    (aiohttp alone logs an ERROR with a full traceback for each)."""
    caplog.set_level(logging.DEBUG)
    with (
        WebServer(_app(), name="svc") as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
    ):
        sock.sendall(request_bytes)
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.") and b" 400 " in reply.split(b"\r\n")[0]
    (record,) = [r for r in caplog.records if r.name == "tupletree.http.svc"]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "refused with 400" in record.getMessage()
    assert "Traceback" not in caplog.text


# -- what a client can make a service hold (connection_table.py, descriptors.py) -------

DEADLINE = 30.0  # generous: the machine is shared; nothing here asserts a duration


def _waiting_app() -> tuple[web.Application, asyncio.Event]:
    """``/ok`` answers at once; ``/wait`` answers once the event is set (a busy
    connection for as long as the test likes)."""
    app = _app()
    release = asyncio.Event()

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def wait(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="waited")

    app.router.add_get("/ok", ok)
    app.router.add_get("/wait", wait)
    return app, release


def _connect(server: WebServer, source: str | None = None) -> socket.socket:
    sock = socket.create_connection(
        (server.host, server.port),
        timeout=DEADLINE,
        source_address=None if source is None else (source, 0),
    )
    sock.settimeout(10)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed the connection (what it sent before is ignored)."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _poll(condition: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {DEADLINE:g} s: {what}")
        time.sleep(0.01)


def _get(server: WebServer, path: str, source: str | None = None) -> bytes:
    with _connect(server, source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_trickled_head_is_cut_off_at_the_header_deadline():
    """A head must be complete header_timeout after its first byte: a client sending
    half a head and then a byte at a time is closed (it held its connection for as
    long as it liked: 60 s on DRPC, forever on the web view)."""
    with WebServer(_app(), header_timeout=0.3, idle_timeout=60) as server:
        sock = _connect(server)
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.1)
        end = time.monotonic() + DEADLINE
        closed = False
        while not closed and time.monotonic() < end:
            try:
                sock.sendall(b"X")
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                closed = True
        assert closed
        _poll(lambda: server.connections() == 0, "the trickler forgotten")


def test_a_silent_connection_is_closed_at_the_idle_deadline():
    with WebServer(_app(), header_timeout=60, idle_timeout=0.3) as server:
        sock = _connect(server)
        assert _closed_by_server(sock)
        _poll(lambda: server.connections() == 0, "the silent one forgotten")


def test_silent_and_half_sent_connections_give_way_to_a_new_client():
    """Connections that send nothing, or half a head, fill no place a newcomer needs:
    with 3x the cap of them open, a request still gets its answer at once."""
    app, _ = _waiting_app()
    with WebServer(app, max_connections=4, header_timeout=60, idle_timeout=60) as server:
        hogs = [_connect(server) for _ in range(12)]
        for sock in hogs[::2]:
            sock.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n")  # never finished
        assert _get(server, "/ok").endswith(b"ok")
        assert server.connections() <= 4
        for sock in hogs:
            sock.close()


def test_one_address_cannot_take_the_whole_service():
    """Busy connections hold their place, but one address holds at most
    max_connections_per_peer of them: past that its new connections are refused
    (503), and another address is still served."""
    app, release = _waiting_app()
    with WebServer(app, max_connections=8, max_connections_per_peer=3) as server:
        busy = [_connect(server, "127.0.0.2") for _ in range(3)]
        for sock in busy:
            sock.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        _poll(lambda: server.connections() == 3, "three waiting requests")
        refused = _get(server, "/ok", source="127.0.0.2")
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert _get(server, "/ok", source="127.0.0.3").endswith(b"ok")
        server.call_soon(release.set)
        for sock in busy:
            assert sock.recv(65536).endswith(b"waited")
            sock.close()


def test_a_client_that_half_closes_after_its_request_gets_the_answer():
    """HTTP/1.1 lets a client shut its sending side once its request is out: the
    answer still comes (it was dropped, the connection closed with it), then the
    connection closes."""
    app, release = _waiting_app()
    with WebServer(app) as server, _connect(server) as sock:
        sock.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        _poll(lambda: server.connections() == 1, "the request arrived")
        time.sleep(0.05)  # let the server start handling it (either way it must answer)
        sock.shutdown(socket.SHUT_WR)
        time.sleep(0.2)
        server.call_soon(release.set)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    statuses = [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/")]
    assert statuses[-1] == 200 and set(statuses[:-1]) <= {100}  # probes, then the answer
    assert data.endswith(b"\r\n\r\nwaited")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_connections": 0}, "max_connections must be from 1"),
        ({"max_connections": 4, "max_connections_per_peer": 5}, "per_peer must be from 1 to 4"),
        ({"header_timeout": float("nan")}, "header_timeout must be a number of seconds > 0"),
        ({"idle_timeout": float("inf")}, "idle_timeout"),
        ({"idle_timeout": "5"}, "idle_timeout must be a number of seconds, got str"),
    ],
)
def test_bad_bounds_are_refused_naming_the_service(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        WebServer(_app(), name="svc", **kwargs)
    assert str(info.value).startswith("svc: ")


_FLOODED_DRIVER = r"""
import json, resource, sys, tempfile, threading, urllib.request
resource.setrlimit(resource.RLIMIT_NOFILE, (384, 384))  # a small limit that cannot be raised
from tupletree import LocalCluster
from tupletree.drpc import DRPCClient

with LocalCluster(drpc_port=0, ui_port=0) as cluster:
    server = cluster.drpc_server
    def serve():
        while True:
            for rid, args in server.book.fetch("f", 16, 1.0):
                server.book.respond(rid, args.upper())
    threading.Thread(target=serve, daemon=True).start()
    print(json.dumps({"ui": cluster.ui_url, "drpc": server.port}), flush=True)
    for _ in sys.stdin:
        result = {}
        try:
            result["drpc"] = DRPCClient("127.0.0.1", server.port, timeout=20).execute("f", "x")
        except Exception as exc:
            result["drpc"] = repr(exc)
        try:
            url = cluster.ui_url + "/api/v1/topology/summary"
            with urllib.request.urlopen(url, timeout=20) as r:
                result["ui"] = json.loads(r.read())
        except Exception as exc:
            result["ui"] = repr(exc)
        try:
            files = [tempfile.TemporaryFile() for _ in range(50)]
            result["files"] = len(files)
            for f in files:
                f.close()
        except Exception as exc:
            result["files"] = repr(exc)
        print(json.dumps(result), flush=True)
"""


@pytest.mark.slow
def test_a_flood_of_one_service_leaves_the_other_and_the_process_their_descriptors():
    """A driver whose open-file limit (384) cannot be raised: one client opens 700
    connections to the web view and 300 to the DRPC server and sends nothing. The web
    view still answers, a DRPC call still returns, and the driver can still open files
    (the web view took every descriptor: the page and DRPC stopped answering, the
    driver could not open a file)."""
    import json as _json
    import os
    import subprocess
    import sys
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    child = subprocess.Popen(
        [sys.executable, "-c", _FLOODED_DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    flood: list[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        ports = _json.loads(_readline(child, DEADLINE))
        ui_port = int(ports["ui"].rsplit(":", 1)[1])
        end = time.monotonic() + DEADLINE
        for port, n in ((ui_port, 700), (ports["drpc"], 300)):
            for _ in range(n):
                if time.monotonic() > end:
                    break
                with contextlib.suppress(OSError):  # refused, reset, or never accepted
                    flood.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
        time.sleep(0.5)  # the refusals answered, the rest held open
        child.stdin.write("check\n")
        child.stdin.flush()
        result = _json.loads(_readline(child, DEADLINE) or "{}")
    finally:
        for sock in flood:
            sock.close()
        child.kill()
        child.wait(30)
    assert result == {"drpc": "X", "ui": {"topologies": []}, "files": 50}


def _readline(child: Any, timeout: float) -> str:
    """A line of the child's output, or "" if none comes within ``timeout``."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return child.stdout.readline()
