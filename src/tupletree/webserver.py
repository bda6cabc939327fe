"""Serve an aiohttp application from a thread of its own, next to code that is not async.

tupletree's HTTP services (the DRPC server, the web view of a running cluster) are
aiohttp applications; the clusters that host them are plain threaded code. A
``WebServer`` owns one event loop on one daemon thread, starts the application on it and
stops it again, so callers never touch asyncio.

Design note: aiohttp rather than ``http.server``. aiohttp parses HTTP itself (chunked
bodies, missing or negative Content-Length, keep-alive), caps request bodies
(``client_max_size``), and serves many idle long-polling connections from one thread;
a handler that must wait (a DRPC caller waiting for its result) awaits a future instead
of holding a thread.

Binds 127.0.0.1 unless told otherwise (docs/security.md: binding beyond loopback).

What a client can make a service hold, and for how long (the rules are
``connection_table.ConnectionTable``'s; this module applies them):

- connections: at most ``max_connections``, at most ``max_connections_per_peer`` from one
  address (beyond a loopback bind: half the cap by default). A newcomer displaces the
  oldest connection that has no request being handled (idle, or with half a head); only
  when every connection is busy is it refused, with a fixed ``503 Service Unavailable``
  (with ``busy_headers``) and closed. At most ``MAX_REFUSING`` refusals linger at once
  (each for at most ``REFUSE_LINGER_SECS``, reading and dropping what the client sends,
  so that it can read the answer); beyond that a connection is reset at once.
- time: a connection idle (accepted, or answered, with no byte of a new request) is
  closed after ``idle_timeout``; a request head must be complete ``header_timeout``
  after its first byte (trickling does not extend it). A request being handled is the
  application's to bound.
- descriptors: each service takes its cap from the process's budget
  (``descriptors.py``): the caps of all services plus a reserve fit under the
  open-file limit, so a flood of one service cannot take the descriptors the other, or
  the rest of the driver, needs. Beyond its cap a service holds at most
  ``MAX_REFUSING`` refusals, ``MAX_ACCEPTING`` connections accepted ahead of their
  admission and as many displaced ones being closed (``_Listener``), all in its budget.
- a client that half-closes its side after a complete HTTP/1.1 request still gets its
  answer (then the connection closes). While it waits, the connection is probed every
  sweep with an interim ``100 Continue`` (which HTTP/1.1 clients must accept): a client
  that closed for good resets the connection at the probe, and its request is dropped as
  if it had hung up. An HTTP/1.0 client's end of input ends its connection.
- malformed requests: one WARNING line each, rate-limited; no access log.

Costs: a connection's events are O(1) table updates; a sweep every
``min(0.5 s, deadline / 4)`` closes what expired (O(1 + expired)) and probes half-closed
connections (few).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from tupletree.connection_table import ConnectionTable, check_count, check_timeout
from tupletree.descriptors import PROCESS_BUDGET, DescriptorBudget
from tupletree.log_limit import ErrorLogLimiter

T = TypeVar("T")
log = logging.getLogger("tupletree.http")

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_SECS = 30.0
DEFAULT_MAX_CONNECTIONS = 128
HEADER_TIMEOUT_SECS = 10.0
IDLE_TIMEOUT_SECS = 60.0
MAX_REFUSING = 16
REFUSE_LINGER_SECS = 1.0
# Connections accepted and not yet admitted or refused (_Listener), and as many being
# closed after a newcomer displaced them: descriptors beyond the cap, in the budget.
MAX_ACCEPTING = 16
RESOURCE_PAUSE_SECS = 0.1
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
MAX_SWEEP_SECS = 0.5
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class _MalformedRequests(logging.Filter):
    """A malformed request is the client's mistake, not the server's: aiohttp logs each
    at ERROR with a full traceback, so any client could fill the log. This turns them
    into one WARNING line each (what was wrong, from whom), rate-limited per service
    as errors are elsewhere (log_limit.py); the client still gets its 400."""

    def __init__(self) -> None:
        super().__init__()
        self._limit = ErrorLogLimiter()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError) or not 400 <= exc.code < 500:
            return True
        missed = self._limit.admit(record.name, time.monotonic())
        if missed is None:
            return False
        reason = " ".join(str(exc.message).split())[:200]
        more = f" [{missed} more not logged]" if missed else ""
        record.args = (record.getMessage(), exc.code, reason, more)
        record.msg = "%s; refused with %d: %s%s"
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text = None, None
        return True


def _request_logger(name: str) -> logging.Logger:
    """The logger a service's request handler writes to (``tupletree.http.<name>``)."""
    logger = logging.getLogger(f"tupletree.http.{name}")
    if not any(isinstance(f, _MalformedRequests) for f in logger.filters):
        logger.addFilter(_MalformedRequests())
    return logger


class WebServer:
    """One aiohttp application served on ``host:port`` (port 0: any free port).

    ``start()`` returns once the socket listens (``port`` then says which); ``stop()``
    closes it and ends the thread. ``call(coro_fn)`` runs a coroutine on the server's
    loop from any thread and returns its result. The keyword arguments are the bounds of
    the module docstring; ``max_connections=None`` is ``default_max_connections``, shrunk
    if the process's open-file limit cannot hold it (a cap asked for is not shrunk:
    refused), ``max_connections_per_peer=None`` the whole cap on a loopback bind (all
    clients share one address there) and half of it beyond.
    """

    def __init__(
        self,
        app: web.Application,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        name: str = "tupletree-web",
        shutdown_timeout: float = 2.0,
        max_connections: int | None = None,
        default_max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_peer: int | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECS,
        idle_timeout: float = IDLE_TIMEOUT_SECS,
        busy_headers: dict[str, str] | None = None,
        budget: DescriptorBudget = PROCESS_BUDGET,
    ) -> None:
        self._explicit_cap = max_connections is not None
        cap = default_max_connections if max_connections is None else max_connections
        check_count(f"{name}: max_connections", cap, 1, 10**6)
        if max_connections_per_peer is not None:
            check_count(f"{name}: max_connections_per_peer", max_connections_per_peer, 1, cap)
        check_timeout(f"{name}: header_timeout", header_timeout)
        check_timeout(f"{name}: idle_timeout", idle_timeout)
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._shutdown_timeout = shutdown_timeout
        self.max_connections = cap
        self._per_peer = max_connections_per_peer
        self.header_timeout = float(header_timeout)
        self.idle_timeout = float(idle_timeout)
        self._busy_headers = busy_headers or {}
        self._busy_response = b""
        self._budget = budget
        self._held_descriptors = 0
        self.table: ConnectionTable | None = None
        self._by_handler: dict[Any, _Connection] = {}
        self._half_closed: set[_Connection] = set()
        self._app_handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]] | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._refusing = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def start(self) -> WebServer:
        # lingering refusals, connections accepted ahead of admission and as many
        # displaced ones closing, the listening socket
        overhead = MAX_REFUSING + 2 * MAX_ACCEPTING + 1
        cap = self._budget.take(
            self.name, self.max_connections, overhead, explicit=self._explicit_cap
        )
        self._held_descriptors = cap + overhead
        per_peer = self._per_peer
        if per_peer is None:
            # Bound to loopback, every client is this machine, at one address: a
            # per-address cap cannot tell them apart, it would only shrink the pool
            # that newcomers displace from (and so how long a new connection has to
            # send its head). Beyond loopback, one address may take half.
            per_peer = cap if _loopback(self.host) else max(1, cap // 2)
        self.max_connections = cap
        self.table = ConnectionTable(
            cap, min(per_peer, cap), self.header_timeout, self.idle_timeout
        )
        self._busy_response = _busy_response(self.name, cap, self._busy_headers)
        self._thread.start()
        try:
            self.call(self._start, timeout=START_TIMEOUT_SECS)
        except BaseException:
            self._stop_loop()
            self._give_back()
            raise
        return self

    async def _start(self) -> None:
        runner = web.AppRunner(
            self.app,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
            logger=_request_logger(self.name),
            access_log=None,
        )
        await runner.setup()
        server = runner.server
        assert server is not None
        # Every request passes here: the table learns when a connection is busy.
        self._app_handler = server.request_handler
        server.request_handler = self._tracked
        self._runner = runner
        site = _CappedSite(runner, self.host, self.port, self._accept)
        try:
            await site.start()
        except OSError as exc:
            self._runner = None
            await runner.cleanup()
            raise OSError(exc.errno, f"{self.name}: cannot listen on {self.url}: {exc}") from exc
        self.port = runner.addresses[0][1]
        self._sweeper = self._loop.call_later(self._sweep_secs(), self._sweep)

    def connections(self) -> int:
        """Connections open now (refused ones not counted)."""
        return 0 if self.table is None else len(self.table)

    def _accept(self) -> asyncio.Protocol:
        return _Connection(self)

    async def _tracked(self, request: web.BaseRequest) -> web.StreamResponse:
        handler = self._app_handler
        assert handler is not None
        conn = self._by_handler.get(request.protocol)
        table = self.table
        if conn is None or table is None:
            return await handler(request)
        table.busy(conn)
        conn.request = request
        try:
            return await handler(request)
        finally:
            conn.request = None
            if conn.eof:  # answered a half-closed connection: close it after this answer
                self._half_closed.discard(conn)
                request.protocol.close()
            else:
                table.idle(conn, self._loop.time())

    def _sweep_secs(self) -> float:
        return max(0.01, min(MAX_SWEEP_SECS, self.header_timeout / 4, self.idle_timeout / 4))

    def _sweep(self) -> None:
        """Close what outlived its deadline; probe half-closed connections."""
        if self._runner is None or self.table is None:
            return
        for conn in self.table.expired(self._loop.time()):
            conn.close_now()  # type: ignore[attr-defined]
        for conn in list(self._half_closed):
            conn.probe()
        self._sweeper = self._loop.call_later(self._sweep_secs(), self._sweep)

    def call(self, fn: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        """Run ``fn()`` on the server's loop and wait for its result (from another thread)."""
        future: Future[Any] = asyncio.run_coroutine_threadsafe(_awaited(fn), self._loop)
        return future.result(timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule a plain function on the server's loop (thread-safe; no waiting)."""
        self._loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        if self._runner is not None:
            runner, self._runner = self._runner, None
            # The loop is going away anyway; never mask the caller's own exit.
            with contextlib.suppress(Exception):
                self.call(self._cleanup(runner), timeout=self._shutdown_timeout + 5.0)
        self._stop_loop()
        self._give_back()

    def _cleanup(self, runner: web.AppRunner) -> Callable[[], Awaitable[None]]:
        async def cleanup() -> None:
            if self._sweeper is not None:
                self._sweeper.cancel()
            await runner.cleanup()

        return cleanup

    def _give_back(self) -> None:
        held, self._held_descriptors = self._held_descriptors, 0
        self._budget.give_back(held)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def peer_address(transport: asyncio.BaseTransport) -> str:
    """The client's address as the per-peer cap counts it (an IPv4 address mapped into
    IPv6 counts as the IPv4 one)."""
    peer = transport.get_extra_info("peername")
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(host)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
    return str(host)


class _Connection(asyncio.Protocol):
    """One accepted connection: admitted by the table and served by aiohttp's handler
    (``inner``), or refused (a ``_Refusal``). Tells the table when a request head
    starts; keeps a half-closed connection open while its request is handled."""

    __slots__ = ("_owner", "eof", "inner", "request", "transport")

    def __init__(self, owner: WebServer) -> None:
        self._owner = owner
        self.inner: asyncio.Protocol | None = None
        self.transport: asyncio.Transport | None = None
        self.request: web.BaseRequest | None = None
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner = self._owner
        self.transport = transport  # type: ignore[assignment]
        runner, table = owner._runner, owner.table
        if runner is None or runner.server is None or table is None:
            transport.abort()  # stopping
            return
        verdict = table.admit(self, peer_address(transport), owner.loop.time())
        for other in verdict.close:
            other.close_now()  # type: ignore[attr-defined]
        if verdict.admitted:
            self.inner = handler = runner.server()
            owner._by_handler[handler] = self
        else:
            self.inner = _Refusal(owner)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        owner = self._owner
        if owner.table is not None:
            owner.table.started(self, owner.loop.time())
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        request = self.request
        if request is not None and request.version >= (1, 1):
            # A complete request, its answer not sent: keep our side open for it.
            self.eof = True
            self._owner._half_closed.add(self)
            return True
        return None if self.inner is None else self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        owner = self._owner
        if owner.table is not None:
            owner.table.remove(self)
        owner._half_closed.discard(self)
        owner._by_handler.pop(self.inner, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()

    def close_now(self) -> None:
        """Close a connection the table gave up (displaced or past its deadline)."""
        inner = self.inner
        if hasattr(inner, "force_close"):
            inner.force_close()  # aiohttp's: stops its handler and closes the transport
        elif self.transport is not None:
            self.transport.close()

    def probe(self) -> None:
        """Is the client of a half-closed connection still there? An interim answer it
        must accept; one that closed for good resets the connection, and the next write
        (the next probe, or the answer) ends it."""
        request, transport = self.request, self.transport
        if request is None or transport is None or transport.is_closing():
            return
        if request.writer.output_size:
            return  # the answer has begun: nothing may come between its bytes
        transport.write(CONTINUE)


async def _awaited(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


def _busy_response(name: str, max_connections: int | None, headers: dict[str, str]) -> bytes:
    body = f"{name}: too many connections (at most {max_connections}); try again later\n"
    data = body.encode("utf-8")
    lines = [
        "HTTP/1.1 503 Service Unavailable",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(data)}",
        "Connection: close",
        "Retry-After: 1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


class _Refusal(asyncio.Protocol):
    """A connection over the cap: answer 503, half-close, drop what the client still
    sends for a moment (closing with unread data would reset the connection and could
    destroy the answer before the client reads it), then close."""

    def __init__(self, owner: WebServer) -> None:
        self._owner = owner
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner = self._owner
        self._transport = t = transport  # type: ignore[assignment]
        if owner._refusing >= MAX_REFUSING:
            t.abort()
            return
        owner._refusing += 1
        t.write(owner._busy_response)
        if t.can_write_eof():
            t.write_eof()
        self._timer = owner.loop.call_later(REFUSE_LINGER_SECS, t.close)

    def data_received(self, data: bytes) -> None:
        pass  # dropped

    def eof_received(self) -> bool:
        return False  # the client is done: close

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._owner._refusing -= 1


class _CappedSite(web.BaseSite):
    """``TCPSite`` with a listener of our own (``_Listener``): the connection cap, and
    a bound on connections accepted ahead of their admission."""

    __slots__ = ("_factory", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        factory: Callable[[], asyncio.Protocol],
    ) -> None:
        super().__init__(runner)
        self._host, self._port, self._factory = host, port, factory

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        listener = _Listener(asyncio.get_running_loop(), self._factory)
        listener.listen(self._host, self._port, self._backlog)
        self._server = listener  # type: ignore[assignment]


class _Listener:
    """The listening socket. asyncio's own server accepts up to its backlog (128) of
    connections per wake-up and admits each a few loop turns later, so under a flood
    hundreds of accepted sockets held descriptors no cap had counted yet (a flood ran
    the driver out of descriptors with both services within their caps). This one
    accepts at most ``MAX_ACCEPTING`` connections ahead of their admission, stops
    reading the socket while they wait (the kernel queues the rest, up to the backlog),
    and pauses for ``RESOURCE_PAUSE_SECS`` when the process is out of descriptors."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, factory: Callable[[], asyncio.Protocol]
    ) -> None:
        self._loop = loop
        self._factory = factory
        self._sock: socket.socket | None = None
        self.sockets: list[socket.socket] = []
        self._pending = 0
        self._reading = False
        self._limit = ErrorLogLimiter(max_keys=1)

    def listen(self, host: str, port: int, backlog: int) -> None:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.sockets = [sock]
        self._read(True)

    def _read(self, on: bool) -> None:
        if self._sock is None or on == self._reading:
            return
        self._reading = on
        if on:
            self._loop.add_reader(self._sock.fileno(), self._accept)
        else:
            self._loop.remove_reader(self._sock.fileno())

    def _accept(self) -> None:
        sock = self._sock
        assert sock is not None
        while self._pending < MAX_ACCEPTING:
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._read(False)
                    self._loop.call_later(RESOURCE_PAUSE_SECS, self._read, True)
                    missed = self._limit.admit(None, time.monotonic())
                    if missed is not None:
                        log.warning(
                            "%s: cannot accept connections: %s (%d such not logged)",
                            self.sockets[0].getsockname() if self.sockets else "?",
                            exc,
                            missed,
                        )
                    return
                continue  # the client went away before we took its connection
            conn.setblocking(False)
            self._pending += 1
            task = self._loop.create_task(self._loop.connect_accepted_socket(self._factory, conn))
            task.add_done_callback(self._admitted)
        self._read(False)  # MAX_ACCEPTING are waiting for admission: let them in first

    def _admitted(self, task: asyncio.Task[Any]) -> None:
        self._pending -= 1
        if not task.cancelled():
            task.exception()  # a connection that failed at once: nothing to do
        if self._sock is not None and self._pending < MAX_ACCEPTING:
            self._read(True)

    def close(self) -> None:
        self._read(False)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def wait_closed(self) -> None:
        return None
