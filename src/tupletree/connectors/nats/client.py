"""Connecting to NATS JetStream on a LoopThread, with errors that say what went wrong.

``open_client(servers, timeout)`` starts a LoopThread and connects a nats-py client on
it; every later call goes through ``JetStreamClient.run`` (waits: for the session's
I/O thread and for opening and closing only). nats-py reconnects by itself a bounded
number of times; once it gives up, the next call raises and the connector's base
replaces the session. The reconnects nats-py made by itself are counted
(``take_reconnects``), for the connector's ``reconnects`` metric.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tupletree.connectors.nats.loop import LoopThread

CONNECT_ATTEMPTS = 3


class JetStreamClient:
    """A connected nats-py client and its JetStream context, on a LoopThread."""

    def __init__(
        self, loop: LoopThread, nc: Any, timeout: float, reconnects: list[int] | None = None
    ) -> None:
        self.loop = loop
        self.nc = nc
        self.js = nc.jetstream(timeout=timeout)
        self.timeout = timeout
        self._reconnects = reconnects if reconnects is not None else [0]
        self._taken = 0

    def take_reconnects(self) -> int:
        """How many times nats-py reconnected by itself since the last call. The
        connector's base sees no trouble then (the session goes on), so without this a
        connection dropped and restored would not show in the ``reconnects`` metric."""
        n = self._reconnects[0] - self._taken
        self._taken += n
        return n

    def run(self, coro: Any, timeout: float | None = None) -> Any:
        return self.loop.run(coro, self.timeout + 1 if timeout is None else timeout)

    def check_alive(self) -> None:
        if self.nc.is_closed:
            raise ConnectionError(f"the connection is closed: {self.last_error()}")

    def last_error(self) -> str:
        err = self.nc.last_error
        return f"{type(err).__name__}: {err}" if err is not None else "closed"

    async def _flush_and_close(self) -> None:
        try:
            await self.nc.flush(self.timeout)
        finally:
            await self.nc.close()

    def close(self) -> None:
        try:
            if not self.nc.is_closed:
                # What was published (acks among it) reaches the server first.
                self.loop.run(self._flush_and_close(), self.timeout * 2 + 1)
        except Exception:
            pass
        finally:
            self.loop.stop()


def open_client(servers: str, timeout: float, name: str) -> JetStreamClient:
    """Connect to ``servers`` (a URL, or several separated by commas); raise
    ConnectionError with the cause when no server answers within a few attempts."""
    import nats

    errors: list[BaseException] = []
    reconnects = [0]  # written on the loop thread only

    async def on_error(exc: BaseException) -> None:
        errors.append(exc)
        del errors[:-5]

    async def on_reconnected() -> None:
        reconnects[0] += 1

    async def connect() -> Any:
        return await nats.connect(
            servers.split(","),
            name=name,
            connect_timeout=timeout,
            max_reconnect_attempts=CONNECT_ATTEMPTS,
            reconnect_time_wait=0.2,
            error_cb=on_error,
            reconnected_cb=on_reconnected,
        )

    loop = LoopThread(f"tupletree-nats {name}")
    try:
        nc = loop.run(connect(), timeout * (CONNECT_ATTEMPTS + 2) + 2)
    except BaseException as exc:
        loop.stop()
        cause = errors[-1] if errors else exc
        raise ConnectionError(f"cannot connect: {type(cause).__name__}: {cause}") from exc
    return JetStreamClient(loop, nc, timeout, reconnects)


def explain(exc: BaseException, stream: str | None = None) -> str:
    """A sentence for a JetStream API error (a missing stream, JetStream off)."""
    from nats.errors import NoRespondersError
    from nats.js.errors import NotFoundError, ServiceUnavailableError

    if isinstance(exc, NotFoundError) and getattr(exc, "err_code", None) == 10059:
        return f"stream {stream!r} does not exist"
    if isinstance(exc, ServiceUnavailableError | NoRespondersError):
        return f"JetStream is not enabled on the server ({type(exc).__name__})"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return f"no answer from JetStream ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"
