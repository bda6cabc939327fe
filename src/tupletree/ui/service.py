"""UIService: the web view of one cluster, served by a WebServer, with a sampler that
keeps each running topology's recent history for rates, capacity and charts.

The service reads and steers the cluster only through the ``Cluster`` protocol
(cluster.py: ``topologies``, ``topology_info``, ``metrics``, ``error_records``,
``worker_events``, ``worker_stats``, ``timed_out``, ``logs``, ``activate``,
``deactivate``, ``kill_topology``), so LocalCluster and SparkCluster get the same
service.

Bounds: one history per running topology (dropped when it stops running), each of at
most ``max_points`` samples; at most ``MAX_PENDING_KILLS`` delayed kills scheduled;
sampling failures logged at most ``ErrorLogLimiter``'s burst per window; connections as
``webserver.WebServer`` bounds them, at most ``MAX_CONNECTIONS``.

Options (``UIService`` keywords, and ``ui_options`` of the clusters), each checked:
``token`` (required on every request but the page's files, see app.py), ``allowed_hosts``
(names the service answers to besides its machine's), ``max_connections``,
``max_connections_per_peer``, ``header_timeout``, ``idle_timeout``, ``sample_secs``,
``max_points``. A service bound beyond loopback without a token logs a warning: anyone
who can reach it may read and steer the cluster (docs/security.md).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from tupletree.cluster import Cluster
from tupletree.connection_table import check_count, check_timeout
from tupletree.errors import TopologyRebalancingError
from tupletree.http_guard import HostPolicy, check_token
from tupletree.log_limit import ErrorLogLimiter
from tupletree.ui.graph import topology_graph
from tupletree.ui.history import DEFAULT_MAX_POINTS, TopologyHistory
from tupletree.webserver import WebServer

log = logging.getLogger("tupletree.ui")

DEFAULT_SAMPLE_SECS = 1.0
MAX_PENDING_KILLS = 64
# A page polls once a second with a few connections, Prometheus and the CLI use one
# each; the rest is room for newcomers to displace idle or half-sent connections from
# (a flood's new connections displace the oldest: the larger the pool, the longer a new
# connection has to send its head).
MAX_CONNECTIONS = 256
HEADER_TIMEOUT_SECS = 10.0
IDLE_TIMEOUT_SECS = 30.0
# A topology whose start is later than the kept history's by more than this is another
# run under the name (the estimate of a start, now - uptime, is late by the time between
# the cluster's clock read and ours: far below this).
RESUBMIT_SLACK_SECS = 1.0
OPTIONS = frozenset(
    {
        "token",
        "allowed_hosts",
        "max_connections",
        "max_connections_per_peer",
        "header_timeout",
        "idle_timeout",
        "sample_secs",
        "max_points",
    }
)


class UIService:
    """``UIService(cluster, host, port).start()``; ``url``; ``stop()``."""

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        sample_secs: float = DEFAULT_SAMPLE_SECS,
        max_points: int = DEFAULT_MAX_POINTS,
        token: str | None = None,
        allowed_hosts: Iterable[str] = (),
        max_connections: int | None = None,
        max_connections_per_peer: int | None = None,
        header_timeout: float = HEADER_TIMEOUT_SECS,
        idle_timeout: float = IDLE_TIMEOUT_SECS,
    ) -> None:
        from tupletree.ui.app import make_app

        check_timeout("tupletree-ui: sample_secs", sample_secs, 3600.0)
        check_count("tupletree-ui: max_points", max_points, 2, 10**6)
        self.cluster = cluster
        self.sample_secs = float(sample_secs)
        self.max_points = max_points
        self.token = check_token("the web view's token", token)
        self.hosts = HostPolicy(allowed_hosts)
        self._histories: dict[str, TopologyHistory] = {}
        self._graphs: dict[str, dict[str, Any]] = {}
        # Per name, the run its history is of: (its topology, its start's estimate).
        self._runs: dict[str, tuple[Any, float]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._kills: list[threading.Timer] = []
        self._sampler = threading.Thread(target=self._sample_loop, name="tupletree-ui-sampler")
        self._sampler.daemon = True
        self.server = WebServer(
            make_app(self),
            host,
            port,
            name="tupletree-ui",
            max_connections=max_connections,
            default_max_connections=MAX_CONNECTIONS,
            max_connections_per_peer=max_connections_per_peer,
            header_timeout=header_timeout,
            idle_timeout=idle_timeout,
        )
        if self.token is None and not _loopback(host):
            log.warning(
                "tupletree ui: serving %s without a token: anyone who can reach it may read "
                "and steer the cluster; set ui_options={'token': ...} (docs/security.md)",
                host,
            )

    @classmethod
    def from_options(
        cls, cluster: Cluster, host: str, port: int, options: Mapping[str, Any] | None
    ) -> UIService:
        """The service with a cluster's ``ui_options``; unknown names are refused."""
        options = dict(options or {})
        unknown = sorted(set(options) - OPTIONS)
        if unknown:
            raise ValueError(
                f"ui_options: unknown option(s) {', '.join(map(repr, unknown))}; known: "
                f"{', '.join(sorted(OPTIONS))}"
            )
        return cls(cluster, host, port, **options)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> UIService:
        self.server.start()
        self._sampler.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            kills, self._kills = self._kills, []
        for timer in kills:
            timer.cancel()
        if self._sampler.is_alive():
            self._sampler.join(10.0)
        self.server.stop()

    # -- history ----------------------------------------------------------------------

    def _sample_loop(self) -> None:
        # A failure that repeats every sample reaches the log at most a few times
        # per window, as a worker's repeated errors do.
        limiter = ErrorLogLimiter(max_keys=1)
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                self.sample()
            except Exception:  # keep sampling: a view must not die of one bad read
                missed = limiter.admit(None, started)
                if missed is not None:
                    log.exception(
                        "tupletree ui: sampling failed (%d such failures not logged before)",
                        missed,
                    )
            self._stopping.wait(max(0.0, self.sample_secs - (time.monotonic() - started)))

    def sample(self) -> None:
        """Take one sample of every running topology (the sampler calls this)."""
        names = list(self.cluster.topologies())
        for name in names:
            try:
                metrics = self.cluster.metrics(name)
                history = self.history(name)
            except Exception:  # killed meanwhile, or its Spark job ended
                continue
            history.add(time.monotonic(), metrics)
        with self._lock:
            for gone in set(self._histories) - set(names):
                del self._histories[gone]
                self._graphs.pop(gone, None)
                self._runs.pop(gone, None)

    def history(self, name: str) -> TopologyHistory:
        """The history of the topology running under ``name``: a new one when the
        topology is not the one the kept history was made for (killed and submitted
        again under the name since: another topology object, or a later start)."""
        info = self.cluster.topology_info(name)
        topology = info["topology"]
        started = time.monotonic() - info["uptime_secs"]  # at most its submit, same run
        with self._lock:
            history = self._histories.get(name)
            run = self._runs.get(name)
            if (
                history is None
                or run is None
                or run[0] is not topology
                or started > run[1] + RESUBMIT_SLACK_SECS
            ):
                spouts = [s.id for s in topology.spouts]
                history = TopologyHistory(spouts, max_points=self.max_points)
                self._histories[name] = history
                self._graphs[name] = topology_graph(topology)
                self._runs[name] = (topology, started)
            elif started > run[1]:
                self._runs[name] = (topology, started)  # a closer estimate of the start
            return history

    def graph(self, name: str) -> dict[str, Any]:
        self.history(name)
        with self._lock:
            return self._graphs[name]

    # -- steering ---------------------------------------------------------------------

    def _deactivate_after_rebalance(self, name: str, asked_at: float) -> None:
        while self.cluster.rebalancing(name):
            if self._stopping.wait(0.05):
                return
        # Gone meanwhile, or another topology under the name (younger than the ask):
        # nothing to deactivate.
        with contextlib.suppress(Exception):
            if self.cluster.topology_info(name)["uptime_secs"] >= time.monotonic() - asked_at:
                self.cluster.deactivate(name)

    def kill_later(self, name: str, wait_secs: float) -> None:
        """Storm's kill with a wait: deactivate now, kill after ``wait_secs``; unless
        the topology running under ``name`` then is another one, submitted after this
        call (its uptime is shorter than the time since this call): that one is left
        running, and the log says so."""
        with self._lock:
            self._kills = [t for t in self._kills if t.is_alive()]
            if len(self._kills) >= MAX_PENDING_KILLS:
                raise RuntimeError(f"{len(self._kills)} kills are already waiting")
        asked_at = time.monotonic()
        try:
            self.cluster.deactivate(name)
        except TopologyRebalancingError:
            # The rebalance puts back the status it found when it ends: deactivate the
            # topology then (the kill below waits for the rebalance's end anyway).
            # One such thread per kill asked, whose timer counts in MAX_PENDING_KILLS.
            threading.Thread(
                target=self._deactivate_after_rebalance, args=(name, asked_at), daemon=True
            ).start()

        def kill() -> None:
            try:
                # Both clusters count uptime from their submit on this process's
                # monotonic clock, so a topology submitted after the request is younger
                # than the request.
                uptime = self.cluster.topology_info(name)["uptime_secs"]
                if uptime < time.monotonic() - asked_at:
                    log.info(
                        "tupletree ui: not killing %r: the topology of that name was "
                        "submitted after the kill was asked for (%.1f s ago)",
                        name,
                        time.monotonic() - asked_at,
                    )
                    return
                self.cluster.kill_topology(name)
            except KeyError:
                pass  # killed by someone else meanwhile
            except Exception:
                log.exception("tupletree ui: killing %s failed", name)

        timer = threading.Timer(wait_secs, kill)
        timer.daemon = True
        with self._lock:
            self._kills.append(timer)
        timer.start()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
