"""DRPCServer: the DRPC server over HTTP, for clients and for topologies in any process.

Clients (``DRPCClient``, ``tupletree drpc``, curl) call functions:

    POST /drpc/<function>          body: the argument (UTF-8)  -> 200, body: the result
    GET  /drpc/<function>/<args>   the argument percent-encoded in the path (Storm's form)
    GET  /drpc/<function>          empty argument

Errors are plain-text bodies with an ``X-DRPC-Error`` header naming the kind:
404 ``unknown-function`` (no topology serves it), 500 ``failed`` (the topology failed
the request), 504 ``timeout`` (drpc.request.timeout.secs passed), 400 ``bad-request``
(411 when a POST has neither a Content-Length nor a chunked body), 413 ``too-large``,
503 ``shutdown``, 503 ``busy`` (a bound below is reached; nothing was kept), 404
``not-found`` (no such endpoint). A request that is not HTTP (a negative Content-Length,
a broken chunk) gets aiohttp's own 400, without the header, and its connection closed.

Topologies (DRPC spouts, ReturnResults) use the ``/invocations/...`` endpoints that
``tupletree.drpc.invocations`` describes, so a topology running on SparkCluster workers
reaches the server like any other HTTP client.

Design note: an aiohttp application served by ``tupletree.webserver.WebServer`` (one
event loop on one thread). aiohttp parses HTTP (chunked bodies, Content-Length, keep-
alive); a waiting ``POST /drpc`` and a long-polling fetch await a future on the loop
instead of holding a thread each. The request book (``pending.PendingRequests``) decides
everything (queueing, timeouts, unknown functions, bounds); this module is HTTP around
it. A caller that hangs up while waiting has its request forgotten. Bind to 127.0.0.1
(the default) unless the topology runs on other hosts: the invocations endpoints are
not authenticated, as in Storm.

Bounds (all are ``DRPCServer`` arguments; the book's are in ``pending.py``):

- a request body: at most ``max_body_bytes`` (16 MiB; aiohttp's ``client_max_size``), 413
  past it, answered before reading when the Content-Length says so (aiohttp then reads
  and drops the rest for at most 10 s, so that the client can read the answer);
- bodies being read at once: at most ``max_body_bytes_in_flight`` (64 MiB) in total, a
  chunked body counting as ``max_body_bytes``; 503 busy past it;
- connections: at most ``max_connections`` (512); past it a new connection gets 503 busy
  and is closed (``WebServer``); a connection idle for ``IDLE_TIMEOUT_SECS`` is closed;
- requests held, their arguments, functions fetched: ``max_pending`` (10,000),
  ``max_pending_chars`` (64 Mi characters), ``max_functions`` (1,024); 503 busy past them;
- a fetch: at most ``MAX_FETCH_ITEMS`` requests, waiting at most ``MAX_FETCH_WAIT_SECS``;
- aiohttp's reports on malformed requests: one line each, rate-limited (``WebServer``);
  no access log.

Run a standalone server with ``python -m tupletree.drpc --port 3774``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from tupletree.config import DEFAULTS, Config
from tupletree.drpc.errors import (
    DRPCBusyError,
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
    DEFAULT_MAX_FUNCTIONS,
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_PENDING_CHARS,
    DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    PendingRequests,
    timeout_from_conf,
)
from tupletree.webserver import WebServer

log = logging.getLogger("tupletree.drpc")

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024
MAX_CONNECTIONS = 512
IDLE_TIMEOUT_SECS = 60.0
MAX_FETCH_WAIT_SECS = 30.0
MAX_FETCH_ITEMS = 1024
ERROR_HEADER = "X-DRPC-Error"
TEXT = "text/plain"


class _Refused(Exception):
    """An HTTP error answer: status, X-DRPC-Error kind, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class _Endpoints:
    """The HTTP side of one server: parse, call the book, answer."""

    def __init__(self, book: PendingRequests, max_body: int, max_in_flight: int) -> None:
        self.book = book
        self.max_body = max_body
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # bytes reserved by bodies being read (event loop only)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if request.method == "GET":
                return await self._get(request)
            if request.method == "POST":
                return await self._post(request)
            raise _Refused(405, "bad-request", f"method {request.method} not allowed")
        except _Refused as exc:
            resp = _error(exc.status, exc.kind, exc.message)
            if exc.status == 411:
                # Whatever body follows is unframed: it must not be read as the next
                # request on this connection. (A 413's unread body is framed: aiohttp
                # reads and drops it for a while, so the client can read the answer.)
                resp.force_close()
            return resp
        except DRPCBusyError as exc:
            return _error(503, "busy", str(exc))

    # -- dispatch -------------------------------------------------------------------

    async def _get(self, request: web.Request) -> web.StreamResponse:
        path, query = _split(request.raw_path)
        if path.startswith(FETCH_PATH):
            return await self._fetch(urllib.parse.unquote(path[len(FETCH_PATH) :]), query)
        if path.startswith(DRPC_PATH):
            function, _, args = path[len(DRPC_PATH) :].partition("/")
            return await self._call(urllib.parse.unquote(function), urllib.parse.unquote(args))
        raise _not_found(path)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        path, _ = _split(request.raw_path)
        if not path.startswith((RESULTS_PATH, RESULT_PATH, FAIL_PATH, DRPC_PATH)):
            raise _not_found(path)
        body = await self._body(request)
        book = self.book
        if path == RESULTS_PATH:
            return self._results(body)
        if path.startswith(RESULT_PATH):
            rid = urllib.parse.unquote(path[len(RESULT_PATH) :])
            return web.json_response({"delivered": book.respond(rid, body)})
        if path.startswith(FAIL_PATH):
            rid = urllib.parse.unquote(path[len(FAIL_PATH) :])
            return web.json_response({"delivered": book.fail(rid, body)})
        if path.startswith(DRPC_PATH):
            return await self._call(urllib.parse.unquote(path[len(DRPC_PATH) :]), body)
        raise _not_found(path)

    # -- endpoints ------------------------------------------------------------------

    async def _call(self, function: str, args: str) -> web.StreamResponse:
        if not function:
            raise _Refused(400, "bad-request", "no function name: use POST /drpc/<function>")
        book = self.book
        try:
            req = book.submit(function, args)
            woken = _Wakeup()
            req.waker = woken.set
            try:
                while (delay := book.check(req)) is not None:
                    await woken.wait(delay)
            except asyncio.CancelledError:  # the caller hung up
                book.abandon(req)
                raise
            result = req.outcome()
        except DRPCUnknownFunctionError as exc:
            return _error(404, "unknown-function", str(exc))
        except DRPCTimeoutError as exc:
            return _error(504, "timeout", str(exc))
        except DRPCBusyError as exc:
            return _error(503, "busy", str(exc))
        except DRPCExecutionError as exc:
            if book.closed:
                return _error(503, "shutdown", str(exc))
            return _error(500, "failed", str(exc))
        return web.Response(text=result, content_type=TEXT, charset="utf-8")

    def _results(self, body: str) -> web.StreamResponse:
        try:
            items = json.loads(body)
            pairs = [(str(item["id"]), str(item["result"])) for item in items]
        except (ValueError, TypeError, KeyError) as exc:
            raise _Refused(
                400, "bad-request", f"expected a JSON list of {{id, result}}: {exc}"
            ) from None
        book = self.book
        return web.json_response(
            {"delivered": sum(book.respond(rid, result) for rid, result in pairs)}
        )

    async def _fetch(self, function: str, query: dict[str, list[str]]) -> web.StreamResponse:
        try:
            max_items = int(query.get("max", ["1"])[0])
            wait = float(query.get("wait", ["0"])[0])
        except ValueError:
            raise _Refused(400, "bad-request", f"bad fetch parameters {query!r}") from None
        max_items = max(0, min(max_items, MAX_FETCH_ITEMS))
        wait = max(0.0, min(wait, MAX_FETCH_WAIT_SECS))  # NaN -> 0
        book = self.book
        items = book.fetch(function, max_items, 0.0)
        if not items and max_items > 0 and wait > 0 and not book.closed:
            items = await self._long_poll(function, max_items, wait)
        return web.json_response([{"id": rid, "args": args} for rid, args in items])

    async def _long_poll(self, function: str, max_items: int, wait: float) -> list[Any]:
        book = self.book
        loop = asyncio.get_running_loop()
        end = loop.time() + wait
        woken = _Wakeup()
        book.watch(function, woken.set)
        try:
            while (remaining := end - loop.time()) > 0 and not book.closed:
                await woken.wait(remaining)
                items = book.fetch(function, max_items, 0.0)
                if items:
                    return items
            return []
        finally:
            book.unwatch(function, woken.set)

    # -- helpers --------------------------------------------------------------------

    async def _body(self, request: web.Request) -> str:
        length = request.content_length
        if length is None and "chunked" not in request.headers.get("Transfer-Encoding", ""):
            raise _Refused(
                411,
                "bad-request",
                "a POST needs a Content-Length header (or a chunked body): send the "
                "argument as the request body, e.g. curl -d ARGS URL",
            )
        if length is not None and length > self.max_body:
            raise _Refused(
                413, "too-large", f"body of {length} bytes exceeds {self.max_body} bytes"
            )
        reserve = self.max_body if length is None else length
        if self.in_flight + reserve > self.max_in_flight:
            raise _Refused(
                503,
                "busy",
                f"bodies being read take {self.in_flight} bytes; this one ({reserve}) would "
                f"exceed {self.max_in_flight}; try again later",
            )
        self.in_flight += reserve
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise _Refused(
                413, "too-large", f"chunked body exceeds {self.max_body} bytes"
            ) from None
        finally:
            self.in_flight -= reserve
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Refused(400, "bad-request", f"the body must be UTF-8 text: {exc}") from None


class _Wakeup:
    """An asyncio wake-up that any thread may set (the book settles requests and queues
    them from callers' threads, spouts' threads and the loop itself)."""

    __slots__ = ("_event", "_loop", "_thread")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._event = asyncio.Event()

    def set(self) -> None:
        if threading.get_ident() == self._thread:
            self._event.set()
        else:
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> None:
        """Until set or ``timeout`` s passed; clears it for the next wait."""
        if not self._event.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                pass
        self._event.clear()


def _split(raw_path: str) -> tuple[str, dict[str, list[str]]]:
    parts = urllib.parse.urlsplit(raw_path)
    return parts.path, urllib.parse.parse_qs(parts.query)


def _not_found(path: str) -> _Refused:
    return _Refused(
        404, "not-found", f"no such endpoint {path!r}; call a function with POST /drpc/<function>"
    )


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        text=message + "\n",
        content_type=TEXT,
        charset="utf-8",
        headers={ERROR_HEADER: kind},
    )


class DRPCServer:
    """An HTTP DRPC server: ``start()`` serves on a background thread, ``stop()`` ends.

    ``port=0`` picks a free one (``.port`` says which once started). ``conf`` may set
    ``drpc.request.timeout.secs`` (default 600). The keyword arguments are the bounds
    of the module docstring.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        conf: Mapping[str, Any] | None = None,
        *,
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
        max_connections: int = MAX_CONNECTIONS,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_chars: int = DEFAULT_MAX_PENDING_CHARS,
        max_functions: int = DEFAULT_MAX_FUNCTIONS,
    ) -> None:
        if not 1 <= max_body_bytes <= max_body_bytes_in_flight:
            raise ValueError(
                f"DRPCServer needs 1 <= max_body_bytes ({max_body_bytes}) <= "
                f"max_body_bytes_in_flight ({max_body_bytes_in_flight})"
            )
        self.book = PendingRequests(
            timeout_secs=timeout_from_conf(conf),
            unknown_function_wait_secs=unknown_function_wait_secs,
            max_pending=max_pending,
            max_pending_chars=max_pending_chars,
            max_functions=max_functions,
        )
        self._endpoints = _Endpoints(self.book, max_body_bytes, max_body_bytes_in_flight)
        app = web.Application(
            client_max_size=max_body_bytes,
            handler_args={
                "keepalive_timeout": IDLE_TIMEOUT_SECS,
                # A caller that hangs up stops waiting: its request is forgotten.
                "handler_cancellation": True,
                "access_log": None,
            },
        )
        app.router.add_route("*", "/{path:.*}", self._endpoints.handle)
        self._web = WebServer(
            app,
            host,
            port,
            name="tupletree DRPC server",
            max_connections=max_connections,
            busy_headers={ERROR_HEADER: "busy"},
        )
        self.host = host
        self._started = False
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return self._web.port

    def start(self) -> DRPCServer:
        """Listen (on a thread of its own); returns once the port is open."""
        if not self._started:
            self._started = True
            self._web.start()
        return self

    def serve_forever(self) -> None:
        """Serve until ``stop()`` or Ctrl-C (the standalone server)."""
        self.start()
        self._stopped.wait()

    def stop(self) -> None:
        """Fail waiting requests (503 to their clients), stop serving, free the port."""
        self.book.close("the DRPC server shut down")
        self._web.stop()
        self._stopped.set()

    def execute(self, function: str, args: str) -> str:
        """Call a function from this process without HTTP (same semantics)."""
        return self.book.execute(function, args)

    def pending_requests(self) -> int:
        """How many requests the server holds state for."""
        return self.book.pending()

    def connections(self) -> int:
        """HTTP connections open now."""
        return self._web.connections()

    def body_bytes_in_flight(self) -> int:
        """Bytes reserved by request bodies being read now."""
        return self._endpoints.in_flight

    @property
    def url(self) -> str:
        return self._web.url

    def __enter__(self) -> DRPCServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DRPCServer({self.url}, pending={self.book.pending()})"


def serve_main(argv: list[str] | None = None) -> int:
    """``python -m tupletree.drpc [--host H] [--port P] [--timeout SECS]
    [--max-connections N]``."""
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
    parser.add_argument(
        "--max-connections", type=int, default=MAX_CONNECTIONS, help="default %(default)s"
    )
    args = parser.parse_args(argv)
    server = DRPCServer(
        args.host,
        args.port,
        {Config.DRPC_REQUEST_TIMEOUT_SECS: args.timeout},
        max_connections=args.max_connections,
    )
    try:
        server.start()
        print(f"tupletree DRPC server on {server.url}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
