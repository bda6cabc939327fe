"""The DRPC server's state: requests waiting for a topology to fetch and answer them.

One ``PendingRequests`` sits behind both LocalDRPC (in-process) and DRPCServer (HTTP).
Its life cycle, per request:

    submit(function, args)         queue the request (refused at a bound, see below)
      -> fetch(function)           a DRPC spout takes it (long-poll, batched)
      -> respond(id, result)       ReturnResults hands the result back   -> caller returns
         or fail(id, reason)       the spout heard the request's tree fail -> caller raises
         or the deadline passes    (drpc.request.timeout.secs)           -> caller raises
         or nothing fetches its function (see below)                     -> caller raises

Waiting: whoever waits for a request (a thread in ``execute``; a coroutine of the HTTP
server, which must not hold a thread) calls ``check(req)`` whenever it wakes: None once
the request is settled (``req.outcome()`` then returns or raises), else the seconds until
the next check is due; when the request timed out or nothing serves its function,
``check`` removes every trace of it (the id map, its function's queue) and raises. So
there is no reaper thread and a given-up request leaves no state behind; a late result
for it is simply not found and dropped. ``req.waker`` (if set) is called, from whichever
thread settles the request, when it is settled.

Unknown functions: a function is *known* (``_known``) while a local spout registered
it or a remote spout fetched it within ``function_ttl_secs``. A request not yet fetched
fails with DRPCUnknownFunctionError (HTTP 404) once its function has been unknown for
``unknown_function_wait_secs`` while it waited. So a topology submitted a moment ago
gets that long to poll, and a function whose spouts stopped fetching (a killed
topology, or a made-up name someone fetched once) answers 404 at most
``function_ttl_secs + unknown_function_wait_secs`` after its last fetch, not at the
request timeout. Remote spouts poll every ~0.5 s, even when deactivated or full, so a
served function stays known.

Bounds (every table that input can grow):

- requests held (queued or fetched, until answered, failed or given up): at most
  ``max_pending``, and their arguments at most ``max_pending_bytes`` bytes of memory in
  total (``held_bytes``: the str's own size, so 4-byte characters count 4 bytes each, not
  one as characters did); ``submit`` raises DRPCBusyError beyond either, keeping nothing;
- per-function queues: one per function with queued requests, so within the above;
- functions with a fetch on record: at most ``max_functions``, kept in order of their
  last fetch; records older than ``function_ttl_secs`` make room for a new name, and a
  fetch of a new name when all are fresh raises DRPCBusyError (a served function keeps
  its record fresh, so a flood of made-up names cannot push it out);
- wakers (``watch``): one per waiting fetch; the HTTP server holds at most one per
  connection, and removes it when the fetch ends;
- registered local spouts: created by topologies in this process only.

Request ids are 128 random bits (``secrets.token_urlsafe``): knowing one's own request's
id tells nothing of another's, so a stranger cannot answer or fail a request it did not
fetch (the server's spout-side endpoints also require the topology's token; see
server.py).
"""

from __future__ import annotations

import contextlib
import math
import secrets
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import Any

from tupletree.config import DEFAULTS, Config
from tupletree.connection_table import check_timeout
from tupletree.drpc.errors import (
    DRPCBusyError,
    DRPCExecutionError,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)

DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS = 5.0
# Remote spouts long-poll every ~0.5 s even when idle, so 30 s without a fetch means
# no topology is serving the function any more.
DEFAULT_FUNCTION_TTL_SECS = 30.0
DEFAULT_MAX_PENDING = 10_000
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
ID_BYTES = 16
DEFAULT_MAX_FUNCTIONS = 1024

Waker = Callable[[], Any]


class PendingRequest:
    """One request the book holds: ``id``, ``function``, ``args``; settled once it has
    a ``result`` or an ``error`` (then ``done`` is set and ``waker`` called)."""

    __slots__ = (
        "args",
        "born",
        "deadline",
        "done",
        "error",
        "fetched",
        "function",
        "id",
        "result",
        "size",
        "timeout",
        "waker",
    )

    def __init__(
        self, request_id: str, function: str, args: str, born: float, timeout: float
    ) -> None:
        self.id = request_id
        self.function = function
        self.args = args
        self.born = born
        self.timeout = timeout
        self.deadline = born + timeout
        self.done = threading.Event()
        self.result: str | None = None
        self.error: str | None = None
        self.fetched = False
        self.waker: Waker | None = None
        self.size = held_bytes(args)

    def outcome(self) -> str:
        """The result of a settled request; DRPCExecutionError if it failed."""
        if self.error is not None:
            raise DRPCExecutionError(self.function, self.error)
        assert self.result is not None, "outcome() of a request not settled yet"
        return self.result

    def _settle(self, result: str | None, error: str | None) -> None:
        self.result, self.error = result, error
        self.done.set()
        waker = self.waker
        if waker is not None:
            waker()


class PendingRequests:
    """Thread-safe request book shared by callers, spouts and result returners."""

    def __init__(
        self,
        timeout_secs: float = DEFAULTS[Config.DRPC_REQUEST_TIMEOUT_SECS],
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
        function_ttl_secs: float = DEFAULT_FUNCTION_TTL_SECS,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        max_functions: int = DEFAULT_MAX_FUNCTIONS,
    ) -> None:
        if not (isinstance(timeout_secs, int | float) and 0 < timeout_secs < math.inf):
            raise ValueError(
                f"{Config.DRPC_REQUEST_TIMEOUT_SECS} must be a finite number > 0, got "
                f"{timeout_secs!r}"
            )
        check_timeout("unknown_function_wait_secs", unknown_function_wait_secs)
        check_timeout("function_ttl_secs", function_ttl_secs)
        for name, bound in (
            ("max_pending", max_pending),
            ("max_pending_bytes", max_pending_bytes),
            ("max_functions", max_functions),
        ):
            if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
                raise ValueError(f"PendingRequests {name} must be an int >= 1, got {bound!r}")
        self.timeout_secs = float(timeout_secs)
        self.unknown_function_wait_secs = float(unknown_function_wait_secs)
        self.function_ttl_secs = float(function_ttl_secs)
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self.max_functions = max_functions
        self._clock = clock
        self._cond = threading.Condition()
        self._requests: dict[str, PendingRequest] = {}
        self._pending_bytes = 0
        self._queues: dict[str, deque[PendingRequest]] = {}
        self._registered: dict[str, int] = {}
        self._wakeups: dict[str, list[Waker]] = {}
        self._last_fetch: OrderedDict[str, float] = OrderedDict()
        self._closed = False

    # -- callers --------------------------------------------------------------------

    def execute(self, function: str, args: str, timeout_secs: float | None = None) -> str:
        """Queue a request and block until its result; raise DRPCExecutionError (or a
        subclass) if it fails, times out, or no topology serves ``function``."""
        req = self.submit(function, args, timeout_secs)
        while (delay := self.check(req)) is not None:
            req.done.wait(delay)
        return req.outcome()

    def submit(self, function: str, args: str, timeout_secs: float | None = None) -> PendingRequest:
        """Queue a request without waiting for it (wait with ``check``). Raises
        DRPCExecutionError when the book is closed, DRPCBusyError at a bound."""
        check_text("function", function)
        check_text("args", args)
        timeout = self.timeout_secs if timeout_secs is None else timeout_secs
        with self._cond:
            if self._closed:
                raise DRPCExecutionError(function, "the DRPC server is shut down")
            if len(self._requests) >= self.max_pending:
                raise DRPCBusyError(
                    function,
                    f"the DRPC server holds {len(self._requests)} requests, its maximum "
                    f"(max_pending={self.max_pending}); try again later",
                )
            size = held_bytes(args)
            if self._pending_bytes + size > self.max_pending_bytes:
                raise DRPCBusyError(
                    function,
                    f"the arguments of the requests held ({self._pending_bytes} bytes) and "
                    f"this one ({size}) exceed max_pending_bytes={self.max_pending_bytes}; "
                    "try again later",
                )
            # Unguessable, and unique across server instances: a topology that outlives
            # a restarted server may still post results for the old instance's ids.
            req = PendingRequest(
                secrets.token_urlsafe(ID_BYTES), function, args, self._clock(), timeout
            )
            self._requests[req.id] = req
            self._pending_bytes += req.size
            self._queues.setdefault(function, deque()).append(req)
            wakeups = list(self._wakeups.get(function, ()))
            self._cond.notify_all()
        for wakeup in wakeups:  # idle local spouts' workers, long-polling fetches
            wakeup()
        return req

    def check(self, req: PendingRequest) -> float | None:
        """None once ``req`` is settled; raise (forgetting it) DRPCTimeoutError past its
        deadline, DRPCUnknownFunctionError when nothing fetched its function for
        ``unknown_function_wait_secs``; else the seconds until the next check is due."""
        if req.done.is_set():
            return None
        with self._cond:
            if req.done.is_set():
                return None
            now = self._clock()
            next_check = req.deadline - now
            if next_check <= 0:
                self._forget(req)
                raise DRPCTimeoutError(
                    req.function,
                    f"no result within {req.timeout:g} s (drpc.request.timeout.secs)",
                )
            if not req.fetched and not self._registered.get(req.function):
                unknown_since = max(
                    req.born,
                    self._last_fetch.get(req.function, -math.inf) + self.function_ttl_secs,
                )
                give_up = unknown_since + self.unknown_function_wait_secs
                if now >= give_up:
                    self._forget(req)
                    raise DRPCUnknownFunctionError(
                        req.function,
                        f"no topology serves function {req.function!r} (no DRPC spout has "
                        f"fetched it within {self.unknown_function_wait_secs:g} s); "
                        "is the topology submitted and active?",
                    )
                next_check = min(next_check, give_up - now)
            return next_check

    def abandon(self, req: PendingRequest) -> None:
        """The caller went away (an HTTP client hung up): forget the request."""
        with self._cond:
            if not req.done.is_set():
                self._forget(req)

    # -- spouts ---------------------------------------------------------------------

    def register(self, function: str, wakeup: Waker | None = None) -> None:
        """A local spout serving ``function`` opened: the function is known, and
        ``wakeup`` (its context's) is called when a request for it arrives."""
        with self._cond:
            self._registered[function] = self._registered.get(function, 0) + 1
            if wakeup is not None:
                self._wakeups.setdefault(function, []).append(wakeup)

    def unregister(self, function: str, wakeup: Waker | None = None) -> None:
        with self._cond:
            if wakeup is not None:
                self._unwatch(function, wakeup)
            n = self._registered.get(function, 0) - 1
            if n > 0:
                self._registered[function] = n
            else:
                self._registered.pop(function, None)

    def watch(self, function: str, wakeup: Waker) -> None:
        """Call ``wakeup`` (from the submitting thread) whenever a request for
        ``function`` is queued, and on ``close``; until ``unwatch``."""
        with self._cond:
            self._wakeups.setdefault(function, []).append(wakeup)

    def unwatch(self, function: str, wakeup: Waker) -> None:
        with self._cond:
            self._unwatch(function, wakeup)

    def fetch(
        self, function: str, max_items: int = 1, wait_secs: float = 0.0
    ) -> list[tuple[str, str]]:
        """Take up to ``max_items`` queued requests as (request id, args), waiting up to
        ``wait_secs`` for one to arrive. ``max_items=0`` only says "I serve this".
        DRPCBusyError if ``function`` is new and the function table is full."""
        with self._cond:
            now = self._clock()
            self._record_fetch(function, now)
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
            if req is not None:
                self._pending_bytes -= req.size
        if req is None:
            return False
        req._settle(result, None)
        return True

    def fail(self, request_id: str, reason: str) -> bool:
        """Make the waiting caller raise DRPCExecutionError(reason). False if gone."""
        with self._cond:
            req = self._requests.get(request_id)
            if req is not None:
                self._forget(req)
        if req is None:
            return False
        req._settle(None, reason)
        return True

    # -- observation and shutdown ---------------------------------------------------

    def pending(self) -> int:
        """Requests the server holds any state for (waiting to be fetched or answered)."""
        with self._cond:
            return len(self._requests)

    def pending_bytes(self) -> int:
        """Memory held by the arguments of the requests held (at most max_pending_bytes)."""
        with self._cond:
            return self._pending_bytes

    def queued(self) -> int:
        """Requests not yet fetched by any spout."""
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def functions(self) -> int:
        """Functions with a fetch on record (at most ``max_functions``)."""
        with self._cond:
            return len(self._last_fetch)

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
            self._pending_bytes = 0
            self._queues.clear()
            wakeups = [w for ws in self._wakeups.values() for w in ws]
            self._cond.notify_all()
        for req in waiting:
            req._settle(None, reason)
        for wakeup in wakeups:
            wakeup()

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

    def _record_fetch(self, function: str, now: float) -> None:
        table = self._last_fetch
        if function in table:
            table[function] = now
            table.move_to_end(function)
            return
        if len(table) >= self.max_functions:
            # Oldest fetch first: drop the records that are no longer fresh.
            limit = now - self.function_ttl_secs
            while table:
                oldest, last = next(iter(table.items()))
                if last >= limit:
                    break
                del table[oldest]
            if len(table) >= self.max_functions:
                raise DRPCBusyError(
                    function,
                    f"the DRPC server already tracks {len(table)} functions fetched within "
                    f"{self.function_ttl_secs:g} s (max_functions={self.max_functions}); "
                    "try again later",
                )
        table[function] = now

    def _unwatch(self, function: str, wakeup: Waker) -> None:
        wakeups = self._wakeups.get(function)
        if wakeups is None:
            return
        with contextlib.suppress(ValueError):
            wakeups.remove(wakeup)
        if not wakeups:
            del self._wakeups[function]

    def _forget(self, req: PendingRequest) -> None:
        if self._requests.pop(req.id, None) is not None:
            self._pending_bytes -= req.size
        if not req.fetched:
            self._unqueue(req)

    def _unqueue(self, req: PendingRequest) -> None:
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


def held_bytes(text: str) -> int:
    """The memory a str holds: CPython stores every character in the width of its widest
    (1, 2 or 4 bytes), so one emoji makes a megabyte of ASCII take four."""
    return sys.getsizeof(text)


def check_text(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"DRPC {what} must be a str, got {type(value).__name__} {value!r}; DRPC "
            "arguments and results are text, as in Storm (encode structured data, e.g. "
            "as JSON)"
        )
