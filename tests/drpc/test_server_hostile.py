"""The DRPC server under a hostile neighbour (the issue "Hold under a hostile
neighbour"): slow headers, one address taking every connection, strangers on the
topology's endpoints, half-closed callers, bodies that hold more than they count.
Each test says what it saw before the fix."""

from __future__ import annotations

import http.client
import socket
import time
import tracemalloc

import pytest

from tupletree.drpc import DRPCBusyError, DRPCClient, DRPCServer
from tupletree.drpc.server import MAX_FETCH_ITEMS

from .raw_http import (
    DEADLINE,
    call_and_wait,
    connect,
    error_kind,
    poll,
    read_response,
    read_to_close,
    send,
    serving,
    statuses,
)

TOKEN = "topology-token-" + "t" * 24
HALF_HEAD = b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Len"


def http_from(server: DRPCServer, source: str) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(
        server.host, server.port, timeout=DEADLINE, source_address=(source, 0)
    )


def request(
    server: DRPCServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str | None, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.getheader("X-DRPC-Error"), resp.read()
    finally:
        conn.close()


def test_slow_headers_cannot_keep_callers_out():
    """Three times the cap in connections that send half a head and trickle: a caller
    still gets its answer (every other client got 503 for 60 s at a time, and the
    attacker just reconnected)."""
    with DRPCServer(port=0, max_connections=16) as server:
        hogs = [connect(server) for _ in range(48)]
        for sock in hogs:
            send(sock, HALF_HEAD)
        for sock in hogs:
            send(sock, b"g")  # a byte now and then
        with serving(server.book, "f", str.upper):
            assert DRPCClient(server.host, server.port, timeout=DEADLINE).execute("f", "x") == "X"
        assert server.connections() <= 16
        for sock in hogs:
            sock.close()


def test_the_header_deadline_is_short():
    """The default header deadline (from a head's first byte) is a few seconds, not the
    minute a slow-header client used to hold its place."""
    from tupletree.drpc.server import HEADER_TIMEOUT_SECS

    assert HEADER_TIMEOUT_SECS <= 5
    with DRPCServer(port=0, header_timeout=0.3) as server, connect(server) as sock:
        send(sock, HALF_HEAD)
        data, closed = read_to_close(sock)
        assert closed and data == b""


def test_one_address_cannot_take_the_whole_server():
    """Callers from one address hold at most max_connections_per_peer connections (with
    calls waiting, so nothing can be displaced): its next is refused with 503 busy,
    while a caller from another address is served."""
    with DRPCServer(port=0, max_connections=8, max_connections_per_peer=4) as server:
        server.book.register("f")  # served, not answered: the calls wait
        hogs = [http_from(server, "127.0.0.2") for _ in range(4)]
        for conn in hogs:
            conn.request("POST", "/drpc/f", body=b"x")
        poll(lambda: server.pending_requests() == 4, "four calls waiting")
        fifth = http_from(server, "127.0.0.2")
        fifth.request("POST", "/drpc/f", body=b"x")
        resp = fifth.getresponse()
        assert (resp.status, resp.getheader("X-DRPC-Error")) == (503, "busy")
        other = http_from(server, "127.0.0.3")
        with serving(server.book, "g", str.upper):
            other.request("POST", "/drpc/g", body=b"y")
            resp = other.getresponse()
            assert (resp.status, resp.read()) == (200, b"Y")
        for conn in (*hogs, fifth, other):
            conn.close()


def test_a_caller_that_half_closes_after_its_request_gets_the_answer(server):
    """A complete request, then the caller shuts its sending side: the answer comes
    (the server closed the connection and the caller got nothing)."""
    server.book.register("f")
    with connect(server) as sock:
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx")
        poll(lambda: server.pending_requests() == 1, "the call waiting")
        sock.shutdown(socket.SHUT_WR)
        time.sleep(0.3)  # past a probe or two: the caller is still there
        assert server.pending_requests() == 1
        [(rid, args)] = server.book.fetch("f", 1)
        server.book.respond(rid, args + "!")
        data, closed = read_to_close(sock)
    assert statuses(data)[-1] == 200 and data.endswith(b"\r\n\r\nx!") and closed


def test_strangers_cannot_fetch_answer_fail_or_name_functions():
    """With a token, the spout-side endpoints refuse whoever lacks it (401
    unauthorized): a stranger cannot read a caller's argument, answer it (a caller
    received "FORGED ANSWER"), fail it, or fill the function table; the topology, with
    the token, serves the caller as usual."""
    with DRPCServer(port=0, invocations_token=TOKEN) as server:
        book = server.book
        book.register("f")
        sock = connect(server)
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 6\r\n\r\nsecret")
        poll(lambda: book.pending() == 1, "the call waiting")
        stranger = [
            ("GET", "/invocations/fetch/f?max=10", None),
            ("GET", "/invocations/fetch/made-up?max=0", None),
            ("POST", "/invocations/results", b'[{"id": "x", "result": "FORGED ANSWER"}]'),
            ("POST", "/invocations/result/x", b"FORGED ANSWER"),
            ("POST", "/invocations/fail/x", b"no"),
            ("GET", "/%69nvocations/fetch/f", None),
        ]
        for method, path, body in stranger:
            for headers in ({}, {"Authorization": "Bearer " + "w" * 40}):
                status, kind, text = request(server, method, path, body, headers)
                assert (status, kind) in ((401, "unauthorized"), (404, "not-found")), path
                assert b"secret" not in text
        assert book.functions() == 0 and book.queued() == 1
        auth = {"Authorization": f"Bearer {TOKEN}"}
        status, _, text = request(server, "GET", "/invocations/fetch/f?max=10", None, auth)
        [item] = __import__("json").loads(text)
        assert (status, item["args"]) == (200, "secret")
        status, _, text = request(
            server, "POST", f"/invocations/result/{item['id']}", b"real", auth
        )
        assert (status, text) == (200, b'{"delivered": true}')
        data = read_response(sock)
        assert statuses(data) == [200] and data.endswith(b"real")
        sock.close()


def test_chunked_bodies_count_against_the_bodies_in_flight():
    """A chunked body being read reserves max_body_bytes of the in-flight bound (the
    audit's surviving mutant: counted as nothing)."""
    with DRPCServer(port=0, max_body_bytes=1000, max_body_bytes_in_flight=2000) as server:
        server.book.register("f")
        slow = [connect(server) for _ in range(2)]
        for sock in slow:
            send(
                sock,
                b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2\r\nxx\r\n",
            )
        poll(lambda: server.body_bytes_in_flight() == 2000, "two chunked bodies being read")
        with pytest.raises(DRPCBusyError, match="bodies being read take 2000 bytes"):
            DRPCClient(server.host, server.port, timeout=DEADLINE).execute("f", "y")
        for sock in slow:
            send(sock, b"0\r\n\r\n")
        poll(lambda: server.pending_requests() == 2, "the chunked bodies arrived")
        assert server.body_bytes_in_flight() == 0
        for sock in slow:
            sock.close()


def test_a_fetch_takes_at_most_max_fetch_items(server):
    """``?max=3000`` takes 1,024 requests, not 3,000 (the audit's surviving mutant)."""
    book = server.book
    book.register("f")
    for i in range(MAX_FETCH_ITEMS + 500):
        book.submit("f", str(i))
    status, _, text = request(server, "GET", f"/invocations/fetch/f?max={MAX_FETCH_ITEMS + 500}")
    items = __import__("json").loads(text)
    assert status == 200 and len(items) == MAX_FETCH_ITEMS
    assert book.queued() == 500


def test_a_held_call_holds_little_more_than_its_argument():
    """Eight calls of 1 MiB held by the server take about 8 MiB, not 16: the body is
    read into one buffer and dropped once decoded (aiohttp's request.read() kept a raw
    copy on the request for as long as the caller waited; with 4-byte characters, 8x
    what the bound counted)."""
    body = b"x" * (1 << 20)
    with DRPCServer(port=0) as server:
        server.book.register("f")
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            socks = [connect(server) for _ in range(8)]
            for sock in socks:
                send(
                    sock,
                    b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n"
                    % len(body)
                    + body,
                )
            poll(lambda: server.pending_requests() == 8, "eight calls held")
            time.sleep(0.2)  # let the last buffers go
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert 8 * len(body) <= grown < 8 * len(body) * 1.4, grown
        assert server.book.pending_bytes() >= 8 * len(body)
        for sock in socks:
            sock.close()


def test_a_body_must_arrive_within_the_body_deadline():
    """A body sent a few bytes at a time is cut off with 408 at body_timeout, its
    connection closed and its reservation released."""
    with DRPCServer(port=0, body_timeout=0.3) as server, connect(server) as sock:
        server.book.register("f")
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nxx")
        data, closed = read_to_close(sock)
        assert statuses(data) == [408] and error_kind(data) == "bad-request" and closed
        assert server.body_bytes_in_flight() == 0 and server.pending_requests() == 0


def test_pages_of_other_origins_and_rebound_names_are_refused():
    """A browser page elsewhere (Origin, Sec-Fetch-Site) or a DNS-rebound name (Host)
    is refused with 403 forbidden before anything runs; a listed name is served, and a
    topology with the token may use any name its config gives."""
    with DRPCServer(port=0, invocations_token=TOKEN, allowed_hosts=["drpc.example"]) as server:
        server.book.register("f")
        port = server.port
        for headers in (
            {"Origin": "http://evil.example"},
            {"Origin": f"http://127.0.0.1:{port + 1}"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Host": "evil.example"},
            {"Host": f"localhost.attacker.example:{port}"},
        ):
            status, kind, _ = request(server, "POST", "/drpc/f", b"x", headers)
            assert (status, kind) == (403, "forbidden"), headers
        assert server.pending_requests() == 0
        with serving(server.book, "f", str.upper):
            status, _, text = request(server, "POST", "/drpc/f", b"x", {"Host": "drpc.example"})
            assert (status, text) == (200, b"X")
        status, _, _ = request(
            server,
            "GET",
            "/invocations/fetch/f?max=0",
            None,
            {"Host": "drpc-alias.internal", "Authorization": f"Bearer {TOKEN}"},
        )
        assert status == 200


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"invocations_token": "short"}, "invocations_token must have 16 to 512"),
        ({"body_timeout": float("nan")}, "body_timeout must be a number of seconds > 0"),
        ({"header_timeout": float("inf")}, "header_timeout"),
        ({"max_connections_per_peer": 0}, "max_connections_per_peer must be from 1"),
        ({"max_body_bytes": 2.5}, "max_body_bytes must be an integer"),
        ({"allowed_hosts": ["http://x"]}, "not a host name"),
        ({"conf": {"drpc.request.timeout.secs": float("nan")}}, "finite number > 0"),
        ({"conf": {"drpc.request.timeout.secs": float("inf")}}, "finite number > 0"),
        ({"unknown_function_wait_secs": float("nan")}, "unknown_function_wait_secs"),
    ],
)
def test_bad_settings_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DRPCServer(port=0, **kwargs)


def test_waiting_calls_from_one_address_are_displaced_never(server):
    """Busy connections (calls waiting) are never displaced by newcomers: 20 waiting
    calls stay, and each gets its answer."""
    socks = call_and_wait(server, 20)
    extra = [connect(server) for _ in range(20)]
    with serving(server.book, "f", str.upper):
        for sock in socks:
            data = read_response(sock)
            assert statuses(data) == [200] and data.endswith(b"X")
    for sock in socks + extra:
        sock.close()
