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

Binds 127.0.0.1 unless told otherwise: these services are not authenticated.

Connections: aiohttp accepts every connection (limits are the application's business),
so ``max_connections`` caps them here, where connections are accepted: past the cap a
new connection gets a fixed ``503 Service Unavailable`` (with ``busy_headers``) and is
closed; at most ``MAX_REFUSING`` such refusals linger at once (each for at most
``REFUSE_LINGER_SECS``, reading and dropping what the client sends so that it can read
the answer), beyond that a connection is reset at once. Idle and silent connections
are closed after the application's ``keepalive_timeout`` (``handler_args``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from tupletree.log_limit import ErrorLogLimiter

T = TypeVar("T")

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_SECS = 30.0
MAX_REFUSING = 64
REFUSE_LINGER_SECS = 1.0


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
    loop from any thread and returns its result.
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
        busy_headers: dict[str, str] | None = None,
    ) -> None:
        if max_connections is not None and (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or max_connections < 1
        ):
            raise ValueError(
                f"{name}: max_connections must be an int >= 1, got {max_connections!r}"
            )
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._shutdown_timeout = shutdown_timeout
        self.max_connections = max_connections
        self._busy_response = _busy_response(name, max_connections, busy_headers or {})
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
        self._thread.start()
        try:
            self.call(self._start, timeout=START_TIMEOUT_SECS)
        except BaseException:
            self._stop_loop()
            raise
        return self

    async def _start(self) -> None:
        runner = web.AppRunner(
            self.app,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
            logger=_request_logger(self.name),
        )
        await runner.setup()
        site: web.BaseSite
        if self.max_connections is None:
            site = web.TCPSite(runner, self.host, self.port)
        else:
            site = _CappedSite(runner, self.host, self.port, self._protocol)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(exc.errno, f"{self.name}: cannot listen on {self.url}: {exc}") from exc
        self._runner = runner
        self.port = runner.addresses[0][1]

    def connections(self) -> int:
        """Connections open now (refused ones not counted)."""
        server = self._runner.server if self._runner is not None else None
        return 0 if server is None else len(server.connections)

    def _protocol(self) -> asyncio.BaseProtocol:
        """The protocol for a connection just accepted: aiohttp's, or a refusal."""
        assert self._runner is not None and self._runner.server is not None
        server = self._runner.server
        if self.max_connections is None or len(server.connections) < self.max_connections:
            return server()
        return _Refusal(self)

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
                self.call(runner.cleanup, timeout=self._shutdown_timeout + 5.0)
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
    """``TCPSite`` with a protocol factory of our own (the connection cap)."""

    __slots__ = ("_factory", "_host", "_port")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        factory: Callable[[], asyncio.BaseProtocol],
    ) -> None:
        super().__init__(runner)
        self._host, self._port, self._factory = host, port, factory

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            self._factory, self._host, self._port, backlog=self._backlog, reuse_address=True
        )
