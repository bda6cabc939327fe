"""DRPCSpout: emits the DRPC requests for one function as ``[args, return-info]``.

Local (``DRPCSpout(function, local_drpc)``): takes requests straight from the
LocalDRPC's book (same process; see registry.py). Remote (``DRPCSpout(function)``):
fetches them from DRPC servers over HTTP, so its tasks may run in any process; the
servers come from the topology config:

    drpc.servers            list of "host" or "host:port" (default ["127.0.0.1"])
    drpc.http.port          port for entries without one (default 3774)
    drpc.invocations.token  the servers' token, if they have one (a cluster's own
                            server sets it; docs/security.md)

As in Storm, with several servers each task serves a share of them (task i takes
servers i, i+n, ... when there are more servers than tasks, else server i mod count).

Design note: ``next_tuple`` must never block (it runs on the worker's scheduler thread,
with every other task of the worker). So the remote spout runs one background thread
per server that long-polls ``/invocations/fetch`` (returning at once when requests are
queued, else after 0.5 s) into a local deque of at most ``batch`` requests, and one
thread that posts failures back; ``next_tuple`` only pops the deque. Every request is
emitted with a message id: when its tuple tree fails (or times out), ``fail`` tells the
server, which makes the caller raise DRPCExecutionError at once instead of waiting for
drpc.request.timeout.secs. With ``failure_grace_secs`` (the linear DRPC builder's
topologies: FAILURE_GRACE_SECS) it tells the server that much later, from
``next_tuple`` (at once on deactivate and close): a failure the topology reports with
its reason (bolts.py: a user bolt's exception) reaches the server first, and the
server keeps the first failure it is told of, so the caller reads the reason.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections import deque
from typing import Any

from tupletree.drpc import registry
from tupletree.drpc.invocations import (
    DEFAULT_PORT,
    DRPC_HTTP_PORT,
    DRPC_INVOCATIONS_TOKEN,
    DRPC_SERVERS,
    InvocationsClient,
    local_return_info,
    remote_return_info,
)
from tupletree.topology.components import Spout

log = logging.getLogger("tupletree.drpc")

FAILED_REASON = (
    "the request's tuple tree failed in the topology (a bolt failed one of its tuples, "
    "a FinishedCallback raised FailedException, or it outlived "
    "topology.message.timeout.secs); the topology's errors may say more"
)
STOPPED_REASON = "the DRPC topology stopped before it processed the request"

# How long a linear DRPC topology's spout waits before telling the server a request's
# tree failed, for the reason to get there first (its path: the failing bolt,
# join-result, return-results, the server): well above a few rounds of a worker.
FAILURE_GRACE_SECS = 0.5

FETCH_BATCH = 64
FETCH_WAIT_SECS = 0.5
UNREACHABLE_KEPT = 16  # unreported "cannot fetch" events a spout keeps


class DRPCSpout(Spout):
    """The source of a DRPC topology: one tuple per request for ``function``."""

    outputs = ["args", "return-info"]

    def __init__(self, function: str, drpc: Any = None, *, failure_grace_secs: float = 0.0) -> None:
        if not isinstance(function, str) or not function:
            raise ValueError(f"a DRPC function name must be a non-empty str, got {function!r}")
        if (
            isinstance(failure_grace_secs, bool)
            or not isinstance(failure_grace_secs, int | float)
            or not 0 <= failure_grace_secs <= 60
        ):
            raise ValueError(
                f"failure_grace_secs must be a number of seconds in [0, 60], got "
                f"{failure_grace_secs!r}"
            )
        self.function = function
        self.failure_grace_secs = float(failure_grace_secs)
        # Only the key travels with the (pickled) spout; open() finds the book by it.
        self.local_key: str | None = None if drpc is None else drpc.key

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._remote: _RemoteSource | None = None
        # Requests emitted whose tree has not completed or failed yet: failed on close,
        # so a killed topology's callers hear of it now, not at drpc.request.timeout.secs.
        self._in_flight: set[Any] = set()
        # (when, msg id): failed trees to tell the server of (failure_grace_secs).
        self._failing: deque[tuple[float, Any]] = deque()
        self._now = context.now  # the cluster's clock: simulated time drives the grace
        if self.local_key is not None:
            self._book = registry.lookup(self.local_key)
            self._wakeup = context.wakeup
            self._book.register(self.function, self._wakeup)
            return
        servers = _servers(conf)
        tasks = context.this_component_tasks()
        index, n = tasks.index(context.task_id), len(tasks)
        if n < len(servers):
            mine = servers[index::n]
        else:
            mine = [servers[index % len(servers)]]
        self._remote = _RemoteSource(self.function, mine, token=conf.get(DRPC_INVOCATIONS_TOKEN))
        self._remote.start()

    def next_tuple(self) -> None:
        if self._failing:
            self._tell_failed(self._now())
        remote = self._remote
        if remote is None:
            got = self._book.fetch(self.function, 1, 0.0)
            if got:
                request_id, args = got[0]
                info = local_return_info(self.local_key, request_id)  # type: ignore[arg-type]
                self._emit_or_fail([args, info], request_id)
            return
        if remote.unreachable:
            self._report_unreachable(remote)
        try:
            host, port, request_id, args = remote.ready.popleft()
        except IndexError:
            return
        self._emit_or_fail(
            [args, remote_return_info(host, port, request_id)], (host, port, request_id)
        )

    def _emit_or_fail(self, values: list[Any], msg_id: Any) -> None:
        """Emit a request taken from its server; when the emit raises (a user's
        grouping, say), fail it at once: its caller hears of it now, not at the
        request's timeout (10 minutes by default)."""
        self._in_flight.add(msg_id)
        try:
            self._collector.emit(values, msg_id=msg_id)
        except BaseException:
            self._in_flight.discard(msg_id)
            self._fail_request(msg_id, FAILED_REASON)
            raise

    def _report_unreachable(self, remote: _RemoteSource) -> None:
        """Report each server a fetcher lost (once per streak of failures) through the
        collector, on the worker's thread: a topology whose DRPC server is not there
        shows it in ``errors()`` and the web view, not only in a worker's log."""
        while remote.unreachable:
            host, port, reason = remote.unreachable.popleft()
            self._collector.report_error(
                ConnectionError(
                    f"DRPC spout for {self.function!r} cannot fetch requests from "
                    f"{host}:{port}: {reason}; it keeps trying (is a DRPC server running "
                    "there? the topology's drpc.servers and drpc.http.port say where)"
                )
            )

    def ack(self, msg_id: Any) -> None:
        # ReturnResults already delivered the result.
        self._in_flight.discard(msg_id)

    def fail(self, msg_id: Any) -> None:
        self._in_flight.discard(msg_id)
        if self.failure_grace_secs:
            self._failing.append((self._now() + self.failure_grace_secs, msg_id))
        else:
            self._fail_request(msg_id, FAILED_REASON)

    def _tell_failed(self, now: float) -> None:
        """Tell the server of the failed trees whose grace ended by ``now`` (all of
        them for ``math.inf``)."""
        failing = self._failing
        while failing and failing[0][0] <= now:
            self._fail_request(failing.popleft()[1], FAILED_REASON)

    def _fail_request(self, msg_id: Any, reason: str) -> None:
        if self._remote is None:
            self._book.fail(msg_id, reason)
        else:
            host, port, request_id = msg_id
            self._remote.report_failure(host, port, request_id, reason)

    def activate(self) -> None:
        if self._remote is not None:
            self._remote.active = True

    def deactivate(self) -> None:
        # next_tuple is not called while inactive: the failed trees are told now.
        self._tell_failed(math.inf)
        if self._remote is not None:
            self._remote.active = False

    def close(self) -> None:
        # The topology stops (killed): its requests in flight will never complete, so
        # their callers get an error now (a result delivered already makes this a no-op).
        failing = getattr(self, "_failing", None)
        if failing:
            self._tell_failed(math.inf)
        in_flight, self._in_flight = getattr(self, "_in_flight", set()), set()
        for msg_id in in_flight:
            self._fail_request(msg_id, STOPPED_REASON)
        if self._remote is None:
            if self.local_key is not None and hasattr(self, "_book"):
                self._book.unregister(self.function, getattr(self, "_wakeup", None))
            return
        self._remote.stop()


def _servers(conf: dict[str, Any]) -> list[tuple[str, int]]:
    raw = conf.get(DRPC_SERVERS) or ["127.0.0.1"]
    port = conf.get(DRPC_HTTP_PORT, DEFAULT_PORT)
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(port, bool) or not isinstance(port, int):
        raise ValueError(f"config key {DRPC_HTTP_PORT!r} must be an int, got {port!r}")
    out = []
    for entry in raw:
        if not isinstance(entry, str) or not entry:
            raise ValueError(
                f"config key {DRPC_SERVERS!r} must list host names (or 'host:port'), got {entry!r}"
            )
        host, sep, p = entry.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]")  # "[::1]:3774"
        if sep and p.isdigit() and host and (bracketed or ":" not in host):
            out.append((host.strip("[]"), int(p)))
        else:
            out.append((entry.strip("[]"), port))
    return out


class _RemoteSource:
    """Background fetchers (one per server) and a failure reporter for a remote spout."""

    def __init__(
        self,
        function: str,
        servers: list[tuple[str, int]],
        batch: int = FETCH_BATCH,
        wait_secs: float = FETCH_WAIT_SECS,
        token: str | None = None,
    ) -> None:
        self.function = function
        self.token = token
        self.servers = servers
        self.batch = batch
        self.wait_secs = wait_secs
        self.ready: deque[tuple[str, int, str, str]] = deque()
        # (host, port, reason) of each server a fetcher started failing to reach, for the
        # spout to report on its own thread; bounded, as a flapping server adds one per
        # streak.
        self.unreachable: deque[tuple[str, int, str]] = deque(maxlen=UNREACHABLE_KEPT)
        self.active = False
        self._stopping = threading.Event()
        self._failures: queue.SimpleQueue[tuple[str, int, str, str] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for host, port in self.servers:
            self._threads.append(
                threading.Thread(
                    target=self._fetch_loop,
                    args=(host, port),
                    name=f"drpc-fetch-{self.function}-{host}:{port}",
                    daemon=True,
                )
            )
        self._threads.append(
            threading.Thread(
                target=self._report_loop, name=f"drpc-report-{self.function}", daemon=True
            )
        )
        for t in self._threads:
            t.start()

    def report_failure(self, host: str, port: int, request_id: str, reason: str) -> None:
        self._failures.put((host, port, request_id, reason))

    def stop(self) -> None:
        """Stop fetching; hand requests fetched but never emitted back as failed."""
        self._stopping.set()
        if not self._threads:
            return
        *fetchers, reporter = self._threads
        for t in fetchers:  # a long-poll in flight returns within wait_secs
            t.join(timeout=self.wait_secs + 2.0)
        while True:
            try:
                host, port, request_id, _args = self.ready.popleft()
            except IndexError:
                break
            self.report_failure(host, port, request_id, STOPPED_REASON)
        self._failures.put(None)
        reporter.join(timeout=5.0)

    def _fetch_loop(self, host: str, port: int) -> None:
        client = InvocationsClient(host, port, token=self.token)
        stopping, ready = self._stopping, self.ready
        failures = 0
        try:
            while not stopping.is_set():
                want = self.batch - len(ready) if self.active else 0
                try:
                    if want <= 0:
                        # Inactive or full: only say "this function is served".
                        client.fetch(self.function, 0, 0.0)
                        stopping.wait(self.wait_secs)
                        continue
                    got = client.fetch(self.function, want, self.wait_secs)
                except Exception as exc:
                    if failures == 0:
                        self.unreachable.append((host, port, f"{type(exc).__name__}: {exc}"))
                        log.warning(
                            "DRPC spout for %r cannot fetch from %s:%s: %s (retrying)",
                            self.function,
                            host,
                            port,
                            exc,
                        )
                    failures += 1
                    stopping.wait(min(2.0, 0.05 * 2 ** min(failures, 6)))
                    continue
                if failures:
                    log.info("DRPC spout for %r reached %s:%s again", self.function, host, port)
                    failures = 0
                for request_id, args in got:
                    ready.append((host, port, request_id, args))
        finally:
            client.close()

    def _report_loop(self) -> None:
        clients: dict[tuple[str, int], InvocationsClient] = {}
        while True:
            item = self._failures.get()
            if item is None:
                break
            host, port, request_id, reason = item
            client = clients.get((host, port))
            if client is None:
                client = clients[(host, port)] = InvocationsClient(
                    host, port, timeout_secs=5.0, token=self.token
                )
            try:
                client.fail(request_id, reason)
            except Exception as exc:
                log.warning(
                    "DRPC spout for %r could not report failed request %s to %s:%s: %s",
                    self.function,
                    request_id,
                    host,
                    port,
                    exc,
                )
        for client in clients.values():
            client.close()
