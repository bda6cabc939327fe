"""What an adversarial review of the network services found (stop 40): the web view,
REST API, DRPC server and client, and the CLI verbs that call them. Each test failed
before its fix, for the bug its docstring names."""

from __future__ import annotations

import json
import math
import socket
import time
import urllib.error
import urllib.request

from tests.ui.support import CONF, call, word_count
from tupletree import LocalCluster

API = "/api/v1/topology"


def _strict_json(text: str):
    """JSON as a browser's ``response.json()`` reads it: RFC 8259, no NaN/Infinity."""

    def refuse(constant: str):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _status(method: str, url: str) -> int | None:
    """The status of a request (None: no answer at all)."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def test_topology_answer_with_a_nan_config_value_is_valid_json():
    """A topology whose config holds a float NaN (an unchecked user key, e.g. a
    threshold not set yet) makes ``GET /api/v1/topology/<name>`` answer ``"my.ratio":
    NaN``: not JSON, so the page's ``response.json()`` throws and the topology cannot
    be viewed at all. Promised: the REST answers are JSON (the OpenAPI document).
    Root cause: views._plain passes non-finite floats through to json.dumps."""
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", {**CONF, "my.ratio": math.nan}, word_count(limit=3))
        body = _get_text(f"{cluster.ui_url}{API}/wc")
        page = _strict_json(body)  # raises ValueError: not JSON: NaN
        assert page["configuration"]["my.ratio"] is None


def test_credentials_nested_in_the_configuration_are_masked():
    """``topology.state.provider.config`` is where a user puts a redis URL or a
    postgres DSN with its password (state/provider.py documents exactly that), or a
    ``password`` entry; the web view shows that dict verbatim to every reader of
    ``GET /api/v1/topology/<name>``. Promised (docs/security.md, redact.py):
    config values whose key names a secret are shown as ***, and credentials are kept
    out of everything tupletree shows, REST included. Root cause: views.topology_page
    masks top-level keys only and never redacts URL userinfo."""
    conf = {
        **CONF,
        "topology.state.provider.config": {
            "url": "redis://:hunter2-redis@db.example:6379/0",
            "password": "hunter2-plain",
        },
    }
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", conf, word_count(limit=3))
        body = _get_text(f"{cluster.ui_url}{API}/wc")
        assert "hunter2-plain" not in body
        assert "hunter2-redis" not in body


def _stalled_rebalance(port: int) -> socket.socket:
    """A connection that sends a complete rebalance head and never its body."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        b"POST /api/v1/topology/anything/rebalance/0 HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    return sock


def test_stalled_request_bodies_cannot_lock_everyone_out_of_the_web_view():
    """Slowloris on the body: a client sends the head of ``POST .../rebalance/0`` with
    a Content-Length and then nothing. The handler awaits ``request.json()`` with no
    deadline, so the connection counts as busy forever; ``max_connections`` such
    connections (no token needed on the default loopback bind, and the topology need
    not exist) and every other client (the page, the CLI, Prometheus) gets 503
    forever. Promised (docs/security.md): connections that send nothing or trickle
    cannot keep anyone out; every buffer and wait input controls is bounded (the DRPC
    server has its 60 s body deadline; the web view has none). Root cause:
    ui/app.py rebalance() reads the body without a timeout, and WebServer never
    expires a busy connection."""
    options = {"max_connections": 4, "header_timeout": 1.0, "idle_timeout": 1.0}
    with LocalCluster(simulate_time=True, ui_port=0, ui_options=options) as cluster:
        port = int(cluster.ui_url.rsplit(":", 1)[1])
        held = [_stalled_rebalance(port) for _ in range(4)]
        try:
            time.sleep(0.5)
            deadline = time.monotonic() + 15.0
            status = None
            while time.monotonic() < deadline:
                status = _status("GET", f"{cluster.ui_url}{API}/summary")
                if status == 200:
                    break
                time.sleep(0.5)
            assert status == 200, f"the web view still refuses newcomers: {status}"
        finally:
            for sock in held:
                sock.close()


def test_the_web_view_keeps_no_access_log(caplog):
    """Every request to the web view writes an INFO line to ``aiohttp.access`` (path and
    query string included: a token someone put in a URL lands in the log), with no rate
    limit: a client (or Prometheus, or the page polling every second) grows the log
    without bound. Promised (webserver.py's docstring, the project's standards): no
    access log; malformed requests one rate-limited line each; every log input can
    grow has a bound. The DRPC server turns it off (``access_log: None``); the web view
    does not. Root cause: ui/app.py make_app() passes no handler_args, and
    WebServer.start()'s AppRunner keeps aiohttp's default access logger."""
    import logging

    caplog.set_level(logging.INFO)
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        for _ in range(20):
            _get_text(f"{cluster.ui_url}{API}/summary?token=leaked-in-a-url")
    lines = [r for r in caplog.records if r.name.startswith("aiohttp.access")]
    assert lines == [], f"{len(lines)} access log lines, e.g. {lines[0].getMessage()!r}"


def test_the_cli_says_busy_when_the_web_view_is_full(capsys):
    """When the web view holds max_connections busy connections it answers newcomers
    with its own ``503 Service Unavailable`` and the text "tupletree-ui: too many
    connections (at most N); try again later". ``tupletree list`` turns that into
    "not an answer of tupletree's web service: is --ui the address `tupletree run`
    printed? (a Spark master's web UI also listens on 8080)": the user is sent hunting
    for a wrong address when the right service is merely busy. Promised: a clear error
    naming what happened. Root cause: ui/client.py UIClient._call reads only a JSON
    ``errorMessage`` and calls everything else NOT_OURS."""
    import threading

    from tupletree import cli
    from tupletree.webserver import _busy_response

    answer = _busy_response("tupletree-ui", 256, {})
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert cli.main(["list", "--ui", f"127.0.0.1:{port}"]) == 1
    finally:
        thread.join(10)
        listener.close()
    err = capsys.readouterr().err
    assert "not an answer of tupletree" not in err, err
    assert "too many connections" in err, err


def test_return_results_delivers_a_burst_of_results_each_within_the_body_limit():
    """ReturnResults' ResultSender batches up to 256 queued results into one POST
    /invocations/results, by count only. Results that each fit the server's body limit
    (16 MiB by default) but together exceed it make the batch 413; the sender retries
    the same oversized batch once and drops it: every caller of the batch waits out
    drpc.request.timeout.secs (600 s) and gets a timeout, for results the topology
    computed. Here the server's limit is 1,000 bytes and ten 600-byte results arrive
    together. Root cause: drpc/invocations.py ResultSender._run builds batches by
    count (max_batch) with no byte bound, and _deliver does not split on 413."""
    from tupletree.drpc import DRPCServer
    from tupletree.drpc.invocations import InvocationsClient, ResultSender

    token = "topology-token-" + "t" * 24
    with DRPCServer(port=0, max_body_bytes=1000, invocations_token=token) as server:
        requests = [server.book.submit("f", f"arg{i}") for i in range(10)]
        fetched = InvocationsClient("127.0.0.1", server.port, token=token).fetch("f", 10, 0)
        assert len(fetched) == 10
        sender = ResultSender("127.0.0.1", server.port, token=token)
        try:
            for rid, _ in fetched:
                sender.send(rid, "r" * 600)  # each alone is well within 1,000 bytes
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(r.done.is_set() for r in requests):
                time.sleep(0.05)
        finally:
            sender.close()
        answered = sum(r.done.is_set() for r in requests)
        assert answered == 10, f"{answered} of 10 callers got their result; {list(sender.errors)}"


def test_the_page_behind_the_documented_tls_proxy_can_steer():
    """docs/security.md: beyond a network of your own, "put a TLS proxy in front ...
    (the proxy's name goes in allowed_hosts)". The page then runs at
    https://ui.example.com/ and its buttons POST with ``Origin: https://ui.example.com``
    and ``Host: ui.example.com`` (a proxy passes both through): the very origin of the
    page. The web view refuses it 403 ("a page from https://ui.example.com may not use
    this service"), so activate/deactivate/kill/rebalance never work through the
    proxy the docs prescribe. Root cause: http_guard.same_origin accepts only the
    ``http`` scheme and defaults both ports to 80 (an https origin's is 443)."""
    with LocalCluster(
        simulate_time=True, ui_port=0, ui_options={"allowed_hosts": ["ui.example.com"]}
    ) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=3))
        headers = {
            "Host": "ui.example.com",
            "Origin": "https://ui.example.com",
            "Sec-Fetch-Site": "same-origin",
        }
        status, body = call("POST", f"{cluster.ui_url}{API}/wc/deactivate", headers)
        assert status == 200, body
        assert not cluster.topology_info("wc")["active"]


def test_compressed_bodies_cannot_escape_the_bodies_in_flight_bound():
    """The DRPC server promises that bodies being read at once take at most
    ``max_body_bytes_in_flight`` (docs/security.md; 503 busy past it). It reserves a
    body's Content-Length, but aiohttp inflates ``Content-Encoding: gzip`` bodies for
    the handler: a 4 KiB gzip body becomes up to ``max_body_bytes`` (16 MiB by
    default) in the handler's buffer. Sixteen unauthenticated callers that stop
    just before the end of such a body make the server hold 16x the bound for the
    60 s body deadline (512 connections: 8 GiB). Here the bound is 4 MiB and the
    server ends up holding about 60 MiB. Root cause: drpc/server.py _Endpoints._body
    reserves ``request.content_length`` (the compressed size) and never counts the
    bytes _read() actually accumulates."""
    import tracemalloc
    import zlib

    from tupletree.drpc import DRPCServer

    mib = 1 << 20
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip
    gz = packer.compress(b"x" * (4 * mib - 1024)) + packer.flush()
    with DRPCServer(port=0, max_body_bytes=4 * mib, max_body_bytes_in_flight=4 * mib) as server:
        server.book.register("f")
        tracemalloc.start()
        socks = []
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(16):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                sock.sendall(
                    b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\n"
                    b"Content-Length: %d\r\n\r\n"
                    % len(gz)
                    + gz[:-16]  # all but the gzip trailer: the body is still being read
                )
                socks.append(sock)
            time.sleep(2.0)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
            for sock in socks:
                sock.close()
        assert held < 3 * 4 * mib, f"bodies being read hold {held / mib:.0f} MiB; bound 4 MiB"


def test_the_cli_does_not_hand_its_token_to_whoever_a_redirect_names(monkeypatch):
    """``tupletree list --ui HOST:PORT`` sends ``Authorization: Bearer
    $TUPLETREE_UI_TOKEN``. When what answers at that address is not tupletree's
    service (a Spark master's UI also takes 8080, as the CLI itself warns) and answers
    ``302 Location: http://elsewhere/``, urllib follows the redirect and sends the
    bearer token to the other server: the web view's token, which steers the cluster,
    is handed to a third party. tupletree's service never redirects. Root cause:
    ui/client.py UIClient._call uses urllib.request.urlopen, whose redirect handler
    copies every header (Authorization included) to the new location."""
    import threading

    from tupletree import cli

    token = "ui-token-" + "s" * 30
    seen: list[bytes] = []
    thief = socket.create_server(("127.0.0.1", 0))
    redirector = socket.create_server(("127.0.0.1", 0))
    thief_port = thief.getsockname()[1]

    def redirect() -> None:
        conn, _ = redirector.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 302 Found\r\nLocation: http://localhost:%d/steal\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n" % thief_port
            )

    def steal() -> None:
        thief.settimeout(5)
        try:
            conn, _ = thief.accept()
        except OSError:
            return
        with conn:
            seen.append(conn.recv(65536))
            conn.sendall(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )

    threads = [threading.Thread(target=f, daemon=True) for f in (redirect, steal)]
    for t in threads:
        t.start()
    monkeypatch.setenv("TUPLETREE_UI_TOKEN", token)
    try:
        cli.main(["list", "--ui", f"127.0.0.1:{redirector.getsockname()[1]}"])
    finally:
        for t in threads:
            t.join(10)
        thief.close()
        redirector.close()
    assert not any(token.encode() in request for request in seen), seen


def test_a_failing_topology_does_not_flood_the_log_with_tracebacks(caplog):
    """When a cluster call fails (a SparkCluster whose job ended: SparkJobFailed), every
    REST request for that topology answers a JSON 500 and logs a WARNING with the full
    traceback, with no rate limit. The open page polls the topology and its history
    every second, and any client can ask as fast as it likes: the log grows by a
    traceback per request, without bound. Promised: every log input can grow has a
    bound (the sampler and the malformed-request filter rate-limit theirs with
    ErrorLogLimiter, 5 per 10 s). Root cause: ui/app.py _guard's ``except Exception``
    logs every failure with exc_info, unthrottled."""
    import logging

    from tupletree.spark.errors import SparkJobFailed

    class Ended(LocalCluster):
        def metrics(self, name: str):
            raise SparkJobFailed(f"topology {name!r}: the Spark job running its workers ended")

    caplog.set_level(logging.WARNING, logger="tupletree.ui")
    with Ended(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=3))
        for _ in range(60):
            assert _status("GET", f"{cluster.ui_url}{API}/wc") == 500
    lines = [r for r in caplog.records if r.name == "tupletree.ui" and "failed" in r.getMessage()]
    assert len(lines) <= 10, f"{len(lines)} log records (with tracebacks) for 60 requests"


def test_the_cli_can_kill_a_topology_whose_job_failed(capsys):
    """``tupletree kill NAME`` without ``--wait`` first reads the whole topology page
    for its message timeout (Storm's default wait). For a topology whose Spark job
    ended (SparkJobFailed), that page is a 500, so the kill is never sent: "tupletree
    kill: ... 500 SparkJobFailed: ..." and the dead topology stays listed, in exactly
    the case where the user most needs to kill it (``kill`` itself works: the cluster
    can kill it). Root cause: cli.py cmd_remote reads
    ``client.topology(name)["msgTimeout"]`` and lets its failure abort the kill."""
    from tupletree import cli
    from tupletree.spark.errors import SparkJobFailed

    class Ended(LocalCluster):
        def metrics(self, name: str):
            raise SparkJobFailed(f"topology {name!r}: the Spark job running its workers ended")

    with Ended(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=3))
        address = cluster.ui_url.removeprefix("http://")
        code = cli.main(["kill", "wc", "--ui", address])
        err = capsys.readouterr().err
        assert code == 0, err
        assert "wc" not in cluster.topologies()


def test_encoded_ids_address_the_topology_and_its_components():
    """Storm UI's REST answers carry ``encodedId`` (and ``encodedSpoutId``,
    ``encodedBoltId``) so that clients can put an id in a URL path; Storm's own UI
    and scripts written for it build ``/api/v1/topology/<encodedId>`` from them. Here
    they are the raw names: a topology named "reports/daily" (names are not
    restricted) has ``encodedId`` "reports/daily", and the URL built from it answers
    404 "Not Found". Root cause: ui/views.py summary_entry and topology_page copy
    the name into the encoded fields instead of percent-encoding it (views.logs_link
    already does)."""
    import urllib.parse

    from tests.ui.support import Sentences, Split
    from tupletree import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout("in/put", Sentences(3))
    builder.set_bolt("split words", Split()).shuffle_grouping("in/put")
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("reports/daily", CONF, builder.create_topology())
        (entry,) = json.loads(_get_text(f"{cluster.ui_url}{API}/summary"))["topologies"]
        assert urllib.parse.unquote(entry["encodedId"]) == "reports/daily"
        assert _status("GET", f"{cluster.ui_url}{API}/{entry['encodedId']}") == 200
        quoted = urllib.parse.quote("reports/daily", safe="")
        page = json.loads(_get_text(f"{cluster.ui_url}{API}/{quoted}"))
        (spout,) = page["spouts"]
        url = f"{cluster.ui_url}{API}/{entry['encodedId']}/component/{spout['encodedSpoutId']}"
        assert _status("GET", url) == 200
