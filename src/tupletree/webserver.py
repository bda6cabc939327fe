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
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_SECS = 30.0


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
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._shutdown_timeout = shutdown_timeout
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
            self.app, handle_signals=False, shutdown_timeout=self._shutdown_timeout
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(exc.errno, f"{self.name}: cannot listen on {self.url}: {exc}") from exc
        self._runner = runner
        self.port = runner.addresses[0][1]

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
