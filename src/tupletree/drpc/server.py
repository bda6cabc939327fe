"""DRPCServer: the DRPC server over HTTP, for clients and for topologies in any process.

Clients (``DRPCClient``, ``tupletree drpc``, curl) call functions:

    POST /drpc/<function>          body: the argument (UTF-8)  -> 200, body: the result
    GET  /drpc/<function>/<args>   the argument percent-encoded in the path (Storm's form)
    GET  /drpc/<function>          empty argument

Errors are plain-text bodies with an ``X-DRPC-Error`` header naming the kind:
404 ``unknown-function`` (no topology serves it), 500 ``failed`` (the topology failed
the request), 504 ``timeout`` (drpc.request.timeout.secs passed), 400 ``bad-request``
(411 when a POST has neither a Content-Length nor a chunked body, 408 when its body does
not arrive within ``BODY_TIMEOUT_SECS``), 413 ``too-large``, 503 ``shutdown``, 503
``busy`` (a bound below is reached; nothing was kept), 401 ``unauthorized`` (a
spout-side endpoint without the token), 403 ``forbidden`` (a page of another origin, or
a Host that is not this server's), 404 ``not-found`` (no such endpoint). A request that
is not HTTP (a negative Content-Length, a broken chunk) gets aiohttp's own 400, without
the header, and its connection closed; an ``Expect`` other than ``100-continue``,
aiohttp's 417. tests/drpc/test_fuzz_requests.py holds the server to this list.

Topologies (DRPC spouts, ReturnResults) use the ``/invocations/...`` endpoints that
``tupletree.drpc.invocations`` describes, so a topology running on SparkCluster workers
reaches the server like any other HTTP client.

Trust model (docs/security.md):

- callers: whoever reaches the server may call any function, as in Storm. Bind
  127.0.0.1 (the default) unless topologies run on other hosts.
- topologies: with a token (``invocations_token``), the spout-side endpoints (fetch,
  result, results, fail) require ``Authorization: Bearer <token>``: only a topology can
  fetch requests (read callers' arguments), answer or fail them, or name functions, so a
  stranger can neither steal nor forge an answer, nor fill the function table with
  made-up names (``max_functions``) and lock new functions out. A cluster's server
  (``drpc_port``) always has a token, made at start and handed to the topologies
  submitted there in their config (``drpc.invocations.token``; hosting.py); a
  standalone server takes one from ``TUPLETREE_DRPC_TOKEN`` or ``--token-file``, and
  without one these endpoints are open to anyone, as in Storm. Request ids are
  unguessable besides (pending.py).
- browsers: a request from a page of another origin is refused, and so is a ``Host``
  that is not this server's (DNS rebinding; ``tupletree.http_guard``) unless the request
  carries the token.

Design note: an aiohttp application served by ``tupletree.webserver.WebServer`` (one
event loop on one thread). aiohttp parses HTTP (chunked bodies, Content-Length, keep-
alive); a waiting ``POST /drpc`` and a long-polling fetch await a future on the loop
instead of holding a thread each. The request book (``pending.PendingRequests``) decides
everything (queueing, timeouts, unknown functions, bounds); this module is HTTP around
it. A caller that hangs up while waiting has its request forgotten; one that only
half-closes after its request is answered (``WebServer``).

Bounds (all are ``DRPCServer`` arguments; the book's are in ``pending.py``):

- a request body: at most ``max_body_bytes`` (16 MiB), 413 past it, answered before
  reading when the Content-Length says so (aiohttp then reads and drops the rest for at
  most 10 s, so that the client can read the answer); it must arrive within
  ``BODY_TIMEOUT_SECS`` of its head (408 and closed after). The body is read into one
  buffer, decoded and dropped: no raw copy stays with the request while it waits.
- bodies being read at once: at most ``max_body_bytes_in_flight`` (64 MiB) in total, a
  chunked body counting as ``max_body_bytes``; 503 busy past it;
- connections: at most ``max_connections`` (512, fewer by default when the process's
  open-file limit cannot hold them), ``max_connections_per_peer`` (half) from
  one address; a newcomer displaces the oldest idle or half-sent connection, and is
  refused with 503 busy only when all are busy; a request head must be complete
  ``HEADER_TIMEOUT_SECS`` after its first byte, an idle connection closes after
  ``IDLE_TIMEOUT_SECS`` (``WebServer``, ``connection_table.py``);
- requests held, their arguments, functions fetched: ``max_pending`` (10,000),
  ``max_pending_bytes`` (64 MiB of memory), ``max_functions`` (1,024); 503 busy past them;
- a fetch: at most ``MAX_FETCH_ITEMS`` requests, waiting at most ``MAX_FETCH_WAIT_SECS``;
- aiohttp's reports on malformed requests: one line each, rate-limited (``WebServer``);
  no access log.

Run a standalone server with ``python -m tupletree.drpc --port 3774`` (``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from tupletree.config import DEFAULTS, Config
from tupletree.connection_table import check_count, check_timeout
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
    DEFAULT_MAX_PENDING_BYTES,
    DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    PendingRequests,
    timeout_from_conf,
)
from tupletree.http_guard import HostPolicy, check_token, foreign_origin, token_matches
from tupletree.webserver import WebServer

log = logging.getLogger("tupletree.drpc")

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024
MAX_CONNECTIONS = 512
# Spouts long-poll without pause and callers send their request at once: a head takes
# milliseconds, so 5 s is generous, and a slow-header client holds a place 5 s at most.
HEADER_TIMEOUT_SECS = 5.0
IDLE_TIMEOUT_SECS = 60.0
BODY_TIMEOUT_SECS = 60.0
READ_CHUNK_BYTES = 64 * 1024
TOKEN_ENV = "TUPLETREE_DRPC_TOKEN"
INVOCATIONS_PREFIX = "/invocations/"
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

    def __init__(
        self,
        book: PendingRequests,
        max_body: int,
        max_in_flight: int,
        token: str | None = None,
        hosts: HostPolicy | None = None,
        body_timeout: float = BODY_TIMEOUT_SECS,
    ) -> None:
        self.book = book
        self.max_body = max_body
        self.max_in_flight = max_in_flight
        self.in_flight = 0  # bytes reserved by bodies being read (event loop only)
        self.token = token
        self.hosts = hosts or HostPolicy()
        self.body_timeout = body_timeout

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            self._admit(request)
            if request.method == "GET":
                return await self._get(request)
            if request.method == "POST":
                return await self._post(request)
            raise _Refused(405, "bad-request", f"method {request.method} not allowed")
        except _Refused as exc:
            resp = _error(exc.status, exc.kind, exc.message)
            if exc.status == 401:
                resp.headers["WWW-Authenticate"] = 'Bearer realm="tupletree-drpc"'
            if exc.status == 411:
                # Whatever body follows is unframed: it must not be read as the next
                # request on this connection. (A 413's unread body is framed: aiohttp
                # reads and drops it for a while, so the client can read the answer.)
                resp.force_close()
            elif exc.status == 408:
                # The rest of a body too slow to wait for: not read for another 10 s
                # (aiohttp's lingering), the connection ends with the answer.
                await resp.prepare(request)
                await resp.write_eof()
                request.protocol.force_close()
            return resp
        except DRPCBusyError as exc:
            return _error(503, "busy", str(exc))

    def _admit(self, request: web.Request) -> None:
        """Refuse pages of other origins, foreign Host names and, on the spout-side
        endpoints, requests without the token (module docstring: trust model)."""
        host = request.headers.get("Host")
        refused = foreign_origin(request.headers, host)
        if refused is not None:
            raise _Refused(403, "forbidden", refused)
        token = self.token
        trusted = token is not None and token_matches(token, request.headers.get("Authorization"))
        if not trusted and host is not None and not self.hosts.allows(host):
            raise _Refused(
                403,
                "forbidden",
                f"Host {host[:200]!r} is not a name of this DRPC server (list it in the "
                "server's allowed_hosts if it is)",
            )
        spout_side = request.path.startswith(INVOCATIONS_PREFIX) or _split(request.raw_path)[
            0
        ].startswith(INVOCATIONS_PREFIX)
        if token is not None and not trusted and spout_side:
            raise _Refused(
                401,
                "unauthorized",
                "the invocations endpoints are for this server's topologies: they need its "
                "token (Authorization: Bearer <token>; the topology's drpc.invocations.token)",
            )

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
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than the parser goes (found by fuzzing).
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
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            raise _Refused(
                400,
                "bad-request",
                f"Content-Encoding {encoding[:50]!r} is not accepted: send the body as "
                "plain UTF-8 (its size is what the bounds count)",
            )
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
        # A chunked body may grow to max_body: it reserves that much while it is read.
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
            async with asyncio.timeout(self.body_timeout):
                raw = await self._read(request)
        except TimeoutError:
            raise _Refused(
                408,
                "bad-request",
                f"the body did not arrive within {self.body_timeout:g} s of the request head",
            ) from None
        finally:
            self.in_flight -= reserve
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Refused(400, "bad-request", f"the body must be UTF-8 text: {exc}") from None

    async def _read(self, request: web.Request) -> bytearray:
        """The body, in one buffer the caller drops once decoded (``request.read()``
        would keep a raw copy on the request for as long as the caller waits)."""
        buf = bytearray()
        async for chunk in request.content.iter_chunked(READ_CHUNK_BYTES):
            buf += chunk
            if len(buf) > self.max_body:
                raise _Refused(413, "too-large", f"chunked body exceeds {self.max_body} bytes")
        return buf


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
    ``drpc.request.timeout.secs`` (default 600). ``invocations_token`` guards the
    spout-side endpoints, ``allowed_hosts`` lists names besides this machine's that
    callers may use (module docstring: trust model). The other keyword arguments are
    the bounds of the module docstring.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        conf: Mapping[str, Any] | None = None,
        *,
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
        invocations_token: str | None = None,
        allowed_hosts: Iterable[str] = (),
        max_connections: int | None = None,
        max_connections_per_peer: int | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECS,
        idle_timeout: float = IDLE_TIMEOUT_SECS,
        body_timeout: float = BODY_TIMEOUT_SECS,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_functions: int = DEFAULT_MAX_FUNCTIONS,
    ) -> None:
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_body_bytes_in_flight", max_body_bytes_in_flight),
        ):
            check_count(f"DRPCServer {name}", value, 1, 2**40)
        if not max_body_bytes <= max_body_bytes_in_flight:
            raise ValueError(
                f"DRPCServer needs 1 <= max_body_bytes ({max_body_bytes}) <= "
                f"max_body_bytes_in_flight ({max_body_bytes_in_flight})"
            )
        check_timeout("DRPCServer body_timeout", body_timeout)
        self.book = PendingRequests(
            timeout_secs=timeout_from_conf(conf),
            unknown_function_wait_secs=unknown_function_wait_secs,
            max_pending=max_pending,
            max_pending_bytes=max_pending_bytes,
            max_functions=max_functions,
        )
        self._endpoints = _Endpoints(
            self.book,
            max_body_bytes,
            max_body_bytes_in_flight,
            check_token("the DRPC server's invocations_token", invocations_token),
            HostPolicy(allowed_hosts),
            float(body_timeout),
        )
        app = web.Application(
            client_max_size=max_body_bytes,
            handler_args={
                # WebServer closes idle connections (idle_timeout); this is its backstop.
                "keepalive_timeout": 2 * IDLE_TIMEOUT_SECS,
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
            default_max_connections=MAX_CONNECTIONS,
            max_connections_per_peer=max_connections_per_peer,
            header_timeout=header_timeout,
            idle_timeout=idle_timeout,
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
    [--max-connections N] [--max-connections-per-peer N] [--allow-host NAME]
    [--token-file PATH]``; the token may come from ``TUPLETREE_DRPC_TOKEN`` instead."""
    parser = argparse.ArgumentParser(
        prog="tupletree-drpc-server",
        description="Run a tupletree DRPC server over HTTP. Its topologies' endpoints "
        f"need the token in {TOKEN_ENV} (or --token-file) when one is given; the "
        "topologies get it as drpc.invocations.token (docs/security.md).",
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
        "--max-connections",
        type=int,
        default=None,
        help=f"default {MAX_CONNECTIONS}, fewer if the open-file limit cannot hold them",
    )
    parser.add_argument(
        "--max-connections-per-peer", type=int, default=None, help="default: half the above"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name callers may use for this server besides the machine's (repeatable)",
    )
    parser.add_argument(
        "--token-file", default=None, help=f"a file holding the token (else {TOKEN_ENV})"
    )
    args = parser.parse_args(argv)
    try:
        token = os.environ.get(TOKEN_ENV) or None
        if args.token_file is not None:
            token = Path(args.token_file).read_text().strip()
        server = DRPCServer(
            args.host,
            args.port,
            {Config.DRPC_REQUEST_TIMEOUT_SECS: args.timeout},
            invocations_token=token,
            allowed_hosts=args.allow_host,
            max_connections=args.max_connections,
            max_connections_per_peer=args.max_connections_per_peer,
        )
    except (OSError, ValueError) as exc:
        print(f"tupletree-drpc-server: {exc}", file=sys.stderr)
        return 2
    try:
        server.start()
        print(f"tupletree DRPC server on {server.url}", flush=True)
        if token is None and args.host not in ("127.0.0.1", "::1", "localhost"):
            print(
                f"tupletree DRPC server: no token ({TOKEN_ENV}): anyone who reaches "
                f"{server.url} may fetch and answer requests (docs/security.md)",
                file=sys.stderr,
                flush=True,
            )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
