"""Fuzzing the DRPC server's request parsing with hypothesis, on a live server: made-up
paths, query strings, headers and bodies on every endpoint. Whatever arrives, the server
answers with one of its documented statuses (never a 500), keeps nothing of a refused
request, and serves the next caller. Bounded: a few hundred requests, a few seconds."""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tupletree.drpc import DRPCClient, DRPCServer

from .raw_http import DEADLINE, connect, read_to_close, send, serving, statuses

TOKEN = "fuzz-token-" + "f" * 24
DOCUMENTED = {200, 400, 401, 403, 404, 405, 408, 411, 413, 417, 503, 504}
QUERY_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e9", "99999999999999999999", ""]),
    st.text(max_size=6),
    st.integers(-(2**70), 2**70).map(str),
)
PATHS = st.one_of(
    st.builds(lambda f: "/drpc/" + urllib.parse.quote(f, safe="/%"), st.text(max_size=12)),
    st.builds(
        lambda f, q: "/invocations/fetch/" + urllib.parse.quote(f, safe="") + "?" + q,
        st.text(max_size=8),
        st.dictionaries(st.sampled_from(["max", "wait", "x"]), QUERY_VALUES, max_size=3).map(
            urllib.parse.urlencode
        ),
    ),
    st.sampled_from(["/invocations/results", "/invocations/result/x", "/invocations/fail/y"]),
    st.text(max_size=16).map(lambda p: "/" + urllib.parse.quote(p, safe="/%?&=")),
)
BODIES = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.text(max_size=32).map(str.encode),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=4),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=6,
    ).map(lambda v: json.dumps(v).encode()),
    st.lists(
        st.fixed_dictionaries({"id": st.text(max_size=6), "result": st.text(max_size=6)}),
        max_size=3,
    ).map(lambda v: json.dumps(v).encode()),
)
HEADERS = st.dictionaries(
    st.sampled_from(["Authorization", "Origin", "Transfer-Encoding", "Content-Type", "Expect"]),
    st.one_of(
        st.sampled_from([f"Bearer {TOKEN}", "Bearer x", "chunked", "http://evil.example"]),
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    ),
    max_size=2,
)


@pytest.fixture(scope="module")
def server():
    with DRPCServer(
        port=0, invocations_token=TOKEN, unknown_function_wait_secs=0.05, body_timeout=1.0
    ) as s:
        yield s


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.sampled_from(["GET", "POST", "PUT", "HEAD"]), PATHS, HEADERS, BODIES)
def test_any_request_gets_a_documented_answer(server, method, path, headers, body):
    if "Transfer-Encoding" in headers:
        headers = {k: v for k, v in headers.items() if k != "Transfer-Encoding"}
    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
    finally:
        conn.close()
    assert resp.status in DOCUMENTED, (method, path, headers, body, resp.status)
    assert server.body_bytes_in_flight() == 0


@settings(max_examples=60, deadline=None, database=None)
@given(st.binary(min_size=1, max_size=200))
def test_any_bytes_get_an_answer_or_a_close(server, data):
    """Bytes that are not HTTP at all: an answer (aiohttp's own 400 for most) or the
    connection closed, within the deadlines; never a 500, and the server goes on."""
    with connect(server) as sock:
        send(sock, data + b"\r\n\r\n")
        answer, _ = read_to_close(sock)
    assert all(code in DOCUMENTED for code in statuses(answer)), answer[:200]


def test_deeply_nested_json_is_a_bad_request_not_a_crash(server):
    """A results body nested deeper than the JSON parser's recursion: 400 (it was a 500
    with a RecursionError traceback in the log)."""
    body = b"[" * 100_000 + b"]" * 100_000
    conn = http.client.HTTPConnection(server.host, server.port, timeout=DEADLINE)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    conn.request("POST", "/invocations/results", body=body, headers=auth)
    resp = conn.getresponse()
    assert (resp.status, resp.getheader("X-DRPC-Error")) == (400, "bad-request")


def test_the_server_serves_after_the_fuzzing(server):
    with serving(server.book, "after", str.upper):
        assert DRPCClient(server.host, server.port, timeout=DEADLINE).execute("after", "ok") == "OK"
    assert server.pending_requests() == 0
