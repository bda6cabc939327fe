"""The DRPC server's state: requests waiting for a topology to fetch and answer them.

One ``PendingRequests`` sits behind both LocalDRPC (in-process) and DRPCServer (HTTP).
Its life cycle, per request:

    execute(function, args)        the caller's thread: queue the request, block on it
      -> fetch(function)           a DRPC spout takes it (long-poll, batched)
      -> respond(id, result)       ReturnResults hands the result back   -> caller returns
         or fail(id, reason)       the spout heard the request's tree fail -> caller raises
         or the deadline passes    (drpc.request.timeout.secs)           -> caller raises

Design note: the caller's own thread enforces the deadline (``Event.wait`` with a
timeout) and, when it gives up, removes every trace of the request (from the id map
and, if no spout took it yet, from its function's queue) before raising. So there is
no reaper thread, and a timed-out request leaves no state behind; a late result for it
is simply not found and dropped.

A function is *known* while a local spout has registered it or a remote spout fetched
it within ``function_ttl_secs``. A request for an unknown function waits up to
``unknown_function_wait_secs`` for a spout to show up (a topology submitted a moment
ago may not have polled yet) and then fails with DRPCUnknownFunctionError instead of
hanging until the request timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tupletree.config import DEFAULTS, Config
from tupletree.drpc.errors import (
    DRPCExecutionError,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)

DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS = 5.0
# Remote spouts long-poll every ~0.5 s even when idle, so 30 s without a fetch means
# no topology is serving the function any more.
DEFAULT_FUNCTION_TTL_SECS = 30.0


class _Request:
    __slots__ = ("args", "done", "error", "fetched", "function", "id", "result")

    def __init__(self, request_id: str, function: str, args: str) -> None:
        self.id = request_id
        self.function = function
        self.args = args
        self.done = threading.Event()
        self.result: str | None = None
        self.error: str | None = None
        self.fetched = False


class PendingRequests:
    """Thread-safe request book shared by callers, spouts and result returners."""

    def __init__(
        self,
        timeout_secs: float = DEFAULTS[Config.DRPC_REQUEST_TIMEOUT_SECS],
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
        function_ttl_secs: float = DEFAULT_FUNCTION_TTL_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not timeout_secs > 0:
            raise ValueError(
                f"{Config.DRPC_REQUEST_TIMEOUT_SECS} must be > 0, got {timeout_secs!r}"
            )
        self.timeout_secs = float(timeout_secs)
        self.unknown_function_wait_secs = float(unknown_function_wait_secs)
        self.function_ttl_secs = float(function_ttl_secs)
        self._clock = clock
        self._cond = threading.Condition()
        self._requests: dict[str, _Request] = {}
        self._queues: dict[str, deque[_Request]] = {}
        self._registered: dict[str, int] = {}
        self._wakeups: dict[str, list[Any]] = {}
        self._last_fetch: dict[str, float] = {}
        # Ids unique to this server instance: a topology that outlives a restarted
        # server may still post results or failures for the old instance's ids, and
        # they must not reach a new caller that happens to hold the same number.
        self._id_prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._closed = False

    # -- callers --------------------------------------------------------------------

    def execute(self, function: str, args: str, timeout_secs: float | None = None) -> str:
        """Queue a request and block until its result; raise DRPCExecutionError (or a
        subclass) if it fails, times out, or no topology serves ``function``."""
        check_text("function", function)
        check_text("args", args)
        timeout = self.timeout_secs if timeout_secs is None else timeout_secs
        deadline = self._clock() + timeout
        with self._cond:
            if self._closed:
                raise DRPCExecutionError(function, "the DRPC server is shut down")
            req = _Request(f"{self._id_prefix}-{next(self._ids)}", function, args)
            self._requests[req.id] = req
            self._queues.setdefault(function, deque()).append(req)
            known = self._known(function)
            wakeups = list(self._wakeups.get(function, ()))
            self._cond.notify_all()
        for wakeup in wakeups:  # local spouts' workers may be idle-waiting
            wakeup()
        if not known:
            req.done.wait(min(self.unknown_function_wait_secs, timeout))
            with self._cond:
                if not req.done.is_set() and not req.fetched and not self._known(function):
                    self._forget(req)
                    raise DRPCUnknownFunctionError(
                        function,
                        f"no topology serves function {function!r} (no DRPC spout has "
                        f"fetched it within {self.unknown_function_wait_secs:g} s); "
                        "is the topology submitted and active?",
                    )
        if not req.done.wait(max(0.0, deadline - self._clock())):
            with self._cond:
                if not req.done.is_set():
                    self._forget(req)
                    raise DRPCTimeoutError(
                        function,
                        f"no result within {timeout:g} s (drpc.request.timeout.secs)",
                    )
        if req.error is not None:
            raise DRPCExecutionError(function, req.error)
        assert req.result is not None
        return req.result

    # -- spouts ---------------------------------------------------------------------

    def register(self, function: str, wakeup: Any = None) -> None:
        """A local spout serving ``function`` opened: the function is known, and
        ``wakeup`` (its context's) is called when a request for it arrives."""
        with self._cond:
            self._registered[function] = self._registered.get(function, 0) + 1
            if wakeup is not None:
                self._wakeups.setdefault(function, []).append(wakeup)

    def unregister(self, function: str, wakeup: Any = None) -> None:
        with self._cond:
            if wakeup is not None and wakeup in self._wakeups.get(function, ()):
                self._wakeups[function].remove(wakeup)
            n = self._registered.get(function, 0) - 1
            if n > 0:
                self._registered[function] = n
            else:
                self._registered.pop(function, None)

    def fetch(
        self, function: str, max_items: int = 1, wait_secs: float = 0.0
    ) -> list[tuple[str, str]]:
        """Take up to ``max_items`` queued requests as (request id, args), waiting up to
        ``wait_secs`` for one to arrive. ``max_items=0`` only says "I serve this"."""
        with self._cond:
            now = self._clock()
            self._last_fetch[function] = now
            end = now + wait_secs
            while True:
                queue = self._queues.get(function)
                if queue and max_items > 0:
                    out = []
                    while queue and len(out) < max_items:
                        req = queue.popleft()
                        req.fetched = True
                        out.append((req.id, req.args))
                    if not queue:
                        del self._queues[function]
                    return out
                remaining = end - self._clock()
                if remaining <= 0 or self._closed or max_items <= 0:
                    return []
                self._cond.wait(remaining)

    # -- result returners -----------------------------------------------------------

    def respond(self, request_id: str, result: str) -> bool:
        """Hand ``result`` to the waiting caller. False if the request is gone (timed
        out, or answered already)."""
        with self._cond:
            req = self._requests.pop(request_id, None)
        if req is None:
            return False
        req.result = result
        req.done.set()
        return True

    def fail(self, request_id: str, reason: str) -> bool:
        """Make the waiting caller raise DRPCExecutionError(reason). False if gone."""
        with self._cond:
            req = self._requests.pop(request_id, None)
            if req is not None and not req.fetched:
                self._unqueue(req)
        if req is None:
            return False
        req.error = reason
        req.done.set()
        return True

    # -- observation and shutdown ---------------------------------------------------

    def pending(self) -> int:
        """Requests the server holds any state for (waiting to be fetched or answered)."""
        with self._cond:
            return len(self._requests)

    def queued(self) -> int:
        """Requests not yet fetched by any spout."""
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def close(self, reason: str = "the DRPC server shut down") -> None:
        """Fail every waiting request and refuse new ones; wake long-polling fetchers."""
        with self._cond:
            self._closed = True
            waiting = list(self._requests.values())
            self._requests.clear()
            self._queues.clear()
            self._cond.notify_all()
        for req in waiting:
            req.error = reason
            req.done.set()

    # -- internals (call with the lock held) ----------------------------------------

    def _known(self, function: str) -> bool:
        if self._registered.get(function):
            return True
        last = self._last_fetch.get(function)
        if last is None:
            return False
        if self._clock() - last <= self.function_ttl_secs:
            return True
        del self._last_fetch[function]  # stale: forget it, so the map stays small
        return False

    def _forget(self, req: _Request) -> None:
        self._requests.pop(req.id, None)
        if not req.fetched:
            self._unqueue(req)

    def _unqueue(self, req: _Request) -> None:
        queue = self._queues.get(req.function)
        if queue is None:
            return
        with contextlib.suppress(ValueError):  # already fetched
            queue.remove(req)
        if not queue:
            del self._queues[req.function]


def timeout_from_conf(conf: Mapping[str, Any] | None) -> float:
    """``drpc.request.timeout.secs`` from a config dict (default 600), checked to be a
    number; PendingRequests checks that it is > 0."""
    key = Config.DRPC_REQUEST_TIMEOUT_SECS
    value = (conf or {}).get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"config key {key!r} must be a number > 0, got {value!r}")
    return float(value)


def check_text(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"DRPC {what} must be a str, got {type(value).__name__} {value!r}; DRPC "
            "arguments and results are text, as in Storm (encode structured data, e.g. "
            "as JSON)"
        )
