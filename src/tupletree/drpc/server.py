"""DRPCServer: the DRPC server over HTTP, for clients and for topologies in any process.

Clients (``DRPCClient``, ``tupletree drpc``, curl) call functions:

    POST /drpc/<function>          body: the argument (UTF-8)  -> 200, body: the result
    GET  /drpc/<function>/<args>   the argument percent-encoded in the path (Storm's form)
    GET  /drpc/<function>          empty argument

Errors are plain-text bodies with an ``X-DRPC-Error`` header naming the kind:
404 ``unknown-function`` (no topology serves it), 500 ``failed`` (the topology failed
the request), 504 ``timeout`` (drpc.request.timeout.secs passed), 400 ``bad-request``,
413 ``too-large``, 503 ``shutdown``.

Topologies (DRPC spouts, ReturnResults) use the ``/invocations/...`` endpoints that
``tupletree.drpc.invocations`` describes, so a topology running on SparkCluster workers
reaches the server like any other HTTP client.

Design note: stdlib ``ThreadingHTTPServer``, one thread per connection. A waiting
``POST /drpc`` holds its thread (blocked on an Event, no CPU) until the result comes,
exactly like Storm's DRPC server holds a Thrift call; long-polling spouts hold one
thread each. Bind to 127.0.0.1 (the default) unless the topology runs on other hosts:
the invocations endpoints are not authenticated, as in Storm.

Run a standalone server with ``python -m tupletree.drpc --port 3774``.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tupletree.config import DEFAULTS, Config
from tupletree.drpc.errors import (
    DRPCExecutionError,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)
from tupletree.drpc.invocations import (
    DEFAULT_PORT,
    DRPC_PATH,
    FAIL_PATH,
    FETCH_PATH,
    RESULT_PATH,
    RESULTS_PATH,
)
from tupletree.drpc.pending import (
    DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    PendingRequests,
    timeout_from_conf,
)

log = logging.getLogger("tupletree.drpc")

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_FETCH_WAIT_SECS = 30.0
MAX_FETCH_ITEMS = 1024
ERROR_HEADER = "X-DRPC-Error"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: spouts and ReturnResults reuse connections
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle + delayed ACK
    # add ~40 ms to every answer on a kept-alive connection (measured: 54 ms -> ~1 ms).
    disable_nagle_algorithm = True
    timeout = 300  # close connections idle this long (a waiting call reads nothing)
    server: _HTTPServer

    # -- dispatch -------------------------------------------------------------------

    def do_GET(self) -> None:
        path, query = self._split()
        if path.startswith(FETCH_PATH):
            self._fetch(path[len(FETCH_PATH) :], query)
        elif path.startswith(DRPC_PATH):
            rest = path[len(DRPC_PATH) :]
            function, _, args = rest.partition("/")
            self._call(urllib.parse.unquote(function), urllib.parse.unquote(args))
        else:
            self._not_found(path)

    def do_POST(self) -> None:
        path, _ = self._split()
        body = self._body()
        if body is None:
            return
        if path == RESULTS_PATH:
            self._results(body)
        elif path.startswith(RESULT_PATH):
            rid = urllib.parse.unquote(path[len(RESULT_PATH) :])
            self._json({"delivered": self.server.book.respond(rid, body)})
        elif path.startswith(FAIL_PATH):
            rid = urllib.parse.unquote(path[len(FAIL_PATH) :])
            self._json({"delivered": self.server.book.fail(rid, body)})
        elif path.startswith(DRPC_PATH):
            function = urllib.parse.unquote(path[len(DRPC_PATH) :])
            self._call(function, body)
        else:
            self._not_found(path)

    # -- endpoints ------------------------------------------------------------------

    def _call(self, function: str, args: str) -> None:
        if not function:
            self._error(400, "bad-request", "no function name: use POST /drpc/<function>")
            return
        try:
            result = self.server.book.execute(function, args)
        except DRPCUnknownFunctionError as exc:
            self._error(404, "unknown-function", str(exc))
        except DRPCTimeoutError as exc:
            self._error(504, "timeout", str(exc))
        except DRPCExecutionError as exc:
            kind = "shutdown" if self.server.book.closed else "failed"
            self._error(503 if kind == "shutdown" else 500, kind, str(exc))
        else:
            self._send(200, result.encode("utf-8"), "text/plain; charset=utf-8")

    def _results(self, body: str) -> None:
        try:
            items = json.loads(body)
            pairs = [(str(item["id"]), str(item["result"])) for item in items]
        except (ValueError, TypeError, KeyError) as exc:
            self._error(400, "bad-request", f"expected a JSON list of {{id, result}}: {exc}")
            return
        book = self.server.book
        self._json({"delivered": sum(book.respond(rid, result) for rid, result in pairs)})

    def _fetch(self, function_quoted: str, query: dict[str, list[str]]) -> None:
        function = urllib.parse.unquote(function_quoted)
        try:
            max_items = int(query.get("max", ["1"])[0])
            wait = float(query.get("wait", ["0"])[0])
        except ValueError:
            self._error(400, "bad-request", f"bad fetch parameters {query!r}")
            return
        max_items = max(0, min(max_items, MAX_FETCH_ITEMS))
        wait = max(0.0, min(wait, MAX_FETCH_WAIT_SECS))
        items = self.server.book.fetch(function, max_items, wait)
        self._json([{"id": rid, "args": args} for rid, args in items])

    # -- helpers --------------------------------------------------------------------

    def _split(self) -> tuple[str, dict[str, list[str]]]:
        parts = urllib.parse.urlsplit(self.path)
        return parts.path, urllib.parse.parse_qs(parts.query)

    def _body(self) -> str | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._error(400, "bad-request", "bad Content-Length")
            return None
        if length > MAX_BODY_BYTES:
            self._error(413, "too-large", f"body of {length} bytes exceeds {MAX_BODY_BYTES}")
            self.close_connection = True
            return None
        raw = self.rfile.read(length) if length else b""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._error(400, "bad-request", f"the body must be UTF-8 text: {exc}")
            return None

    def _not_found(self, path: str) -> None:
        self._error(
            404,
            "not-found",
            f"no such endpoint {path!r}; call a function with POST /drpc/<function>",
        )

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send(status, (message + "\n").encode("utf-8"), "text/plain; charset=utf-8", kind)

    def _json(self, value: Any) -> None:
        self._send(200, json.dumps(value).encode("utf-8"), "application/json")

    def _send(self, status: int, body: bytes, content_type: str, error: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if error is not None:
            self.send_header(ERROR_HEADER, error)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("drpc %s - %s", self.address_string(), format % args)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # many clients connecting at once (the default is 5)
    book: PendingRequests

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up while waiting is not the server's problem: no traceback
        # on stderr (socketserver's default), a debug line instead.
        log.debug("drpc: connection from %s ended with an error", client_address, exc_info=True)


class DRPCServer:
    """An HTTP DRPC server: ``start()`` serves on a background thread, ``stop()`` ends.

    ``port=0`` picks a free port (read it back from ``.port``). ``conf`` may set
    ``drpc.request.timeout.secs`` (default 600).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        conf: Mapping[str, Any] | None = None,
        *,
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    ) -> None:
        self.book = PendingRequests(
            timeout_secs=timeout_from_conf(conf),
            unknown_function_wait_secs=unknown_function_wait_secs,
        )
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.book = self.book
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> DRPCServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name=f"tupletree-drpc-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on this thread until interrupted (the standalone server)."""
        self._httpd.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        """Fail waiting requests (503 to their clients), stop serving, free the port."""
        self.book.close("the DRPC server shut down")
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def execute(self, function: str, args: str) -> str:
        """Call a function from this process without HTTP (same semantics)."""
        return self.book.execute(function, args)

    def pending_requests(self) -> int:
        """How many requests the server holds state for."""
        return self.book.pending()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> DRPCServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DRPCServer({self.url}, pending={self.book.pending()})"


def serve_main(argv: list[str] | None = None) -> int:
    """``python -m tupletree.drpc [--host H] [--port P] [--timeout SECS]``."""
    parser = argparse.ArgumentParser(
        prog="tupletree-drpc-server", description="Run a tupletree DRPC server over HTTP."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="default %(default)s")
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(DEFAULTS[Config.DRPC_REQUEST_TIMEOUT_SECS]),
        help=f"{Config.DRPC_REQUEST_TIMEOUT_SECS} (default %(default)g)",
    )
    args = parser.parse_args(argv)
    server = DRPCServer(args.host, args.port, {Config.DRPC_REQUEST_TIMEOUT_SECS: args.timeout})
    print(f"tupletree DRPC server on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
