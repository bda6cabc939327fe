"""The DRPC server against a hostile or careless client: raw sockets where an HTTP
library would not send what an attacker sends. Each test names the limit it proves."""

from __future__ import annotations

import contextlib
import http.client
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tupletree.drpc import (
    DRPCBusyError,
    DRPCClient,
    DRPCConnectionError,
    DRPCExecutionError,
    DRPCServer,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)
from tupletree.drpc.pending import PendingRequests
from tupletree.drpc.server import MAX_BODY_BYTES

DEADLINE = 30.0  # generous: the machine is shared; nothing here asserts a duration


def poll(condition: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {deadline:g} s: {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def serving(book: PendingRequests, function: str, fn: Callable[[str], str]) -> Iterator[list[str]]:
    """A stand-in topology on a thread: fetches ``function`` (as a remote spout would)
    and answers ``fn(args)``; yields the list of arguments it saw."""
    seen: list[str] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            for rid, args in book.fetch(function, 16, 0.1):
                seen.append(args)
                book.respond(rid, fn(args))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(5)


def connect(server: DRPCServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=DEADLINE)
    sock.settimeout(10)
    return sock


def send(sock: socket.socket, data: bytes) -> None:
    """Send what the server still reads (it may answer and close first)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def read_to_close(sock: socket.socket) -> tuple[bytes, bool]:
    """Everything the server sends until it closes; (data, closed) - closed is False if
    it kept the connection open for 10 s."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionResetError:
        pass
    return data, True


def read_response(sock: socket.socket) -> bytes:
    """One response (head and a Content-Length body), leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return data


def statuses(data: bytes) -> list[int]:
    """The status codes of the HTTP responses in ``data``."""
    return [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.")]


def call_and_wait(server: DRPCServer, n: int) -> list[socket.socket]:
    """``n`` connections, each with a ``POST /drpc/f`` (argument "x") the server holds."""
    socks = [connect(server) for _ in range(n)]
    for sock in socks:
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
    poll(lambda: server.pending_requests() == n, f"{n} requests waiting")
    return socks


def error_kind(data: bytes) -> str | None:
    for line in data.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-drpc-error":
            return value.strip().decode()
    return None


def test_negative_content_length_is_refused(server):
    """Content-Length: -1 used to pass the size check and read the body to EOF into the
    topology: now a 400, the connection closed, and nothing reaches the book."""
    with serving(server.book, "f", lambda a: a + "!") as seen, connect(server) as sock:
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n" + b"x" * 100)
        data, closed = read_to_close(sock)
    assert statuses(data) == [400]
    assert closed
    assert seen == []
    assert server.pending_requests() == 0


def test_malformed_requests_are_logged_within_a_bound(server, caplog):
    """A flood of malformed requests reaches the log as one WARNING line each, with no
    traceback, at most LOG_BURST times per window (the web view shares the rule:
    tests/test_webserver.py)."""
    from tupletree.log_limit import LOG_BURST

    caplog.set_level(logging.DEBUG, logger="tupletree.http")
    for _ in range(LOG_BURST * 4):
        with connect(server) as sock:
            send(sock, b"POST /drpc/f HTTP/1.1\r\nContent-Length: -1\r\n\r\n")
            read_to_close(sock)
    logged = [r for r in caplog.records if r.name.startswith("tupletree.http")]
    assert 1 <= len(logged) <= LOG_BURST
    assert all(r.levelname == "WARNING" and r.exc_info is None for r in logged)
    assert "refused with 400" in logged[0].getMessage()


def test_chunked_body_is_the_argument(server):
    """A chunked body is read, chunk by chunk, as the argument (it used to be ignored,
    and the function ran on "")."""
    body = "héllo wörld".encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:4], body[4:])) + b"0\r\n\r\n"
    with serving(server.book, "f", lambda a: a + "!") as seen, connect(server) as sock:
        send(
            sock,
            b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n" + chunks,
        )
        data, _ = read_to_close(sock)
    assert statuses(data) == [200]
    assert data.endswith("héllo wörld!".encode())
    assert seen == ["héllo wörld"]


def test_chunked_body_over_the_limit_is_refused():
    """A chunked body has no Content-Length to check up front: it is cut off at the
    body limit with 413, and nothing is kept."""
    with DRPCServer(port=0, max_body_bytes=1024) as server, connect(server) as sock:
        server.book.register("f")
        chunk = b"x" * 512
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        send(sock, b"".join(b"200\r\n%s\r\n" % chunk for _ in range(4)) + b"0\r\n\r\n")
        data = read_response(sock)
        assert statuses(data) == [413]
        assert error_kind(data) == "too-large"
        assert server.pending_requests() == 0


def test_post_without_content_length_cannot_smuggle_a_request(server):
    """A POST without Content-Length (nor chunks) gets 411 and the connection closes:
    its "body" is not run as the next request on the connection (here a fetch that
    would steal requests), and the function does not run on ""."""
    smuggled = b"GET /invocations/fetch/f?max=5 HTTP/1.1\r\nHost: x\r\n\r\n"
    with serving(server.book, "f", lambda a: a + "!") as seen, connect(server) as sock:
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: x\r\n\r\n" + smuggled)
        data, closed = read_to_close(sock)
    assert statuses(data) == [411]
    assert error_kind(data) == "bad-request"
    assert b"Content-Length" in data
    assert closed
    assert seen == []


def test_oversized_body_is_refused_before_it_is_sent(server):
    """A Content-Length over the limit gets 413 at once: the server does not wait for
    (or read) the body."""
    with connect(server) as sock:
        send(
            sock,
            b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            % (MAX_BODY_BYTES + 1),
        )
        data = read_response(sock)
    assert statuses(data) == [413]
    assert error_kind(data) == "too-large"


def test_client_reports_413_as_too_large_naming_server_and_function(server):
    """DRPCClient used to report the server's 413 as "cannot reach the server"."""
    server.book.register("f")
    client = DRPCClient(server.host, server.port, timeout=DEADLINE)
    with pytest.raises(DRPCExecutionError) as info:
        client.execute("f", "x" * (MAX_BODY_BYTES + 1))
    assert not isinstance(info.value, DRPCConnectionError)
    assert info.value.function == "f"
    assert "too large" in info.value.reason
    assert f"HTTP 413 from the DRPC server {server.host}:{server.port}" in info.value.reason
    assert server.pending_requests() == 0
    with serving(server.book, "g", str.upper):  # the client still works afterwards
        assert client.execute("g", "ok") == "OK"


def test_made_up_function_names_are_bounded_and_answer_404(server):
    """Fetching made-up function names used to grow the server's tables without bound
    and make their callers wait for the request timeout. Now the table stops at
    max_functions (503 busy past it), a function that keeps being fetched stays
    served, and a caller of a made-up name gets 404 once it is stale."""
    limit = server.book.max_functions
    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    answers: list[tuple[int, str | None]] = []
    with serving(server.book, "real", str.upper):
        for i in range(limit + 50):
            conn.request("GET", f"/invocations/fetch/ghost-{i}?max=0")
            resp = conn.getresponse()
            resp.read()
            answers.append((resp.status, resp.getheader("X-DRPC-Error")))
        assert server.book.functions() <= limit
        assert (503, "busy") in answers[limit - 1 :]
        client = DRPCClient(server.host, server.port, timeout=DEADLINE)
        assert client.execute("real", "still served") == "STILL SERVED"
    server.book.function_ttl_secs = 1.0  # instead of 30 s, to be quick
    with pytest.raises(DRPCUnknownFunctionError, match="no topology serves function 'ghost-3'"):
        client.execute("ghost-3", "x")
    assert server.pending_requests() == 0


def test_connections_are_capped():
    """Past max_connections a new connection gets 503 busy (DRPCBusyError naming the
    server) and is closed; connections already open are not disturbed, and once some
    close the server takes new ones again."""
    with DRPCServer(port=0, max_connections=8) as server:
        idle = [connect(server) for _ in range(8)]
        poll(lambda: server.connections() == 8, "8 connections open")
        extra = [connect(server) for _ in range(40)]  # all refused
        for sock in extra[:3]:
            data, closed = read_to_close(sock)
            assert statuses(data) == [503] and error_kind(data) == "busy" and closed
        client = DRPCClient(server.host, server.port, timeout=DEADLINE)
        with pytest.raises(DRPCBusyError, match=f"{server.host}:{server.port}") as info:
            client.execute("f", "x")
        assert "too many connections" in info.value.reason
        for sock in idle + extra:
            sock.close()
        poll(lambda: server.connections() == 0, "idle connections closed")
        with serving(server.book, "f", str.upper):
            assert client.execute("f", "x") == "X"


def test_waiting_calls_hold_no_thread_and_hanging_up_forgets_them(server):
    """A waiting POST /drpc awaits on the server's event loop rather than holding a
    thread (the old server had one per connection); a caller that hangs up has its
    request forgotten."""
    server.book.register("f")  # served, but never answered
    before = threading.active_count()
    socks = call_and_wait(server, 50)
    assert threading.active_count() < before + 10
    for sock in socks:
        sock.close()
    poll(lambda: server.pending_requests() == 0, "abandoned requests forgotten")


def test_pending_requests_are_bounded():
    """Past max_pending a call is refused with 503 busy, keeping nothing; the requests
    already waiting are answered normally."""
    with DRPCServer(port=0, max_pending=3) as server:
        server.book.register("f")
        socks = call_and_wait(server, 3)
        with pytest.raises(DRPCBusyError, match="max_pending=3"):
            DRPCClient(server.host, server.port, timeout=DEADLINE).execute("f", "y")
        assert server.pending_requests() == 3
        for rid, args in server.book.fetch("f", 10):
            server.book.respond(rid, args.upper())
        for sock in socks:
            data = read_response(sock)
            assert statuses(data) == [200] and data.endswith(b"X")
            sock.close()


def test_bodies_being_read_are_bounded():
    """Slow senders cannot make the server hold more than max_body_bytes_in_flight of
    bodies at once: the next body is refused with 503 busy until they finish."""
    with DRPCServer(port=0, max_body_bytes=1000, max_body_bytes_in_flight=2000) as server:
        server.book.register("f")
        slow = [connect(server) for _ in range(2)]
        for sock in slow:
            send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nxx")
        poll(lambda: server.body_bytes_in_flight() == 2000, "two bodies being read")
        with pytest.raises(DRPCBusyError, match="bodies being read"):
            DRPCClient(server.host, server.port, timeout=DEADLINE).execute("f", "y")
        for sock in slow:
            send(sock, b"x" * 998)
        poll(lambda: server.pending_requests() == 2, "the slow bodies arrived")
        assert server.body_bytes_in_flight() == 0
        for sock in slow:
            sock.close()


def test_client_reports_each_http_error_as_what_it_is(server):
    """500 failed, 400 bad request, 503 shutdown, 404 not-found: each its own error or
    status, naming the server."""
    name = f"{server.host}:{server.port}"
    client = DRPCClient(server.host, server.port, timeout=DEADLINE)
    book = server.book
    book.register("f")

    def answer_with(settle: Callable[[str], object]) -> None:
        def run() -> None:
            [(rid, _)] = book.fetch("f", 1, DEADLINE)
            settle(rid)

        threading.Thread(target=run, daemon=True).start()

    answer_with(lambda rid: book.fail(rid, "a bolt failed it"))
    with pytest.raises(DRPCExecutionError) as info:
        client.execute("f", "x")
    assert type(info.value) is DRPCExecutionError
    assert info.value.reason == f"a bolt failed it (HTTP 500 from the DRPC server {name})"

    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    conn.request("POST", "/drpc/", body=b"x")
    resp = conn.getresponse()
    assert (resp.status, resp.getheader("X-DRPC-Error")) == (400, "bad-request")
    resp.read()

    shut: list[BaseException] = []
    caller = threading.Thread(target=lambda: _record(shut, client.execute, "f", "x"))
    caller.start()
    poll(lambda: book.pending() == 1, "the caller waiting")
    book.close("bye")
    caller.join(DEADLINE)
    [error] = shut
    assert isinstance(error, DRPCConnectionError)
    assert error.reason == f"bye (HTTP 503 from the DRPC server {name})"

    conn.request("POST", "/nope", body=b"x")
    resp = conn.getresponse()
    assert (resp.status, resp.getheader("X-DRPC-Error")) == (404, "not-found")


def test_client_names_the_server_for_404_and_504():
    """DRPCUnknownFunctionError and DRPCTimeoutError say which server answered."""
    conf = {"drpc.request.timeout.secs": 1}
    with DRPCServer(port=0, conf=conf, unknown_function_wait_secs=0.2) as server:
        name = f"{server.host}:{server.port}"
        client = DRPCClient(server.host, server.port, timeout=DEADLINE)
        with pytest.raises(DRPCUnknownFunctionError, match=f"HTTP 404 from the DRPC server {name}"):
            client.execute("nobody", "x")
        server.book.register("f")  # served, never answered
        with pytest.raises(DRPCTimeoutError, match=f"HTTP 504 from the DRPC server {name}"):
            client.execute("f", "x")


def _record(out: list[BaseException], fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except BaseException as exc:
        out.append(exc)


def test_only_get_and_post_call_functions(server):
    """HEAD (or PUT...) on /drpc/<function>/<args> is refused with 405; it must not run
    the function."""
    server.book.register("f")
    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    for method in ("HEAD", "PUT", "DELETE"):
        conn.request(method, "/drpc/f/x")
        resp = conn.getresponse()
        resp.read()
        assert (resp.status, resp.getheader("X-DRPC-Error")) == (405, "bad-request")
    assert server.pending_requests() == 0
