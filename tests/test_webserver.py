"""The threaded aiohttp host shared by tupletree's HTTP services."""

from __future__ import annotations

import json
import logging
import socket
import urllib.request

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
