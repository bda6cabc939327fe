"""What LocalCluster and SparkCluster share: the ``Cluster`` protocol both implement,
and ``ClusterBase``: the DRPC server and the web view started with a cluster, the checks
every submit makes, Storm's rebalance (its checks, and the REBALANCING status), and the
context-manager lifecycle.

The two clusters differ in how they run workers; everything a user sees the same on
both lives here once, so it cannot drift apart. tests/scenarios/test_storm_scenarios.py
and tests/scenarios/test_transcripts.py run the Storm scenarios and the reliability
transcripts on every cluster, through this protocol (the ``any_cluster`` fixture,
tests/clusters.py).

Rebalance, as Storm's: the topology is deactivated, the trees in flight get
``wait_secs`` (default: the message timeout) to finish or fail, the tasks are dealt to
the new workers and executors, and the topology is activated again if it was active.
A component's number of tasks never changes (so per-task state, keyed by task, is
found again), which bounds its executors: asking for more is refused with the numbers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, Protocol, TypedDict, runtime_checkable

from tupletree.config import Config, validate
from tupletree.errors import InvalidConfigError, InvalidTopologyError, TopologyRebalancingError
from tupletree.records.errors import ERROR, RESTART, TaskError, WorkerEvent
from tupletree.records.metrics import ComponentMetrics, TaskStats
from tupletree.records.stalls import TimedOutTree
from tupletree.topology.builder import require_topology

# The protocol's answers, for its users (ui/, testing/), which import nothing of the
# runtime: the records and shapes are built there and read here by name.
__all__ = [
    "ERROR",
    "RESTART",
    "Cluster",
    "ClusterBase",
    "ComponentMetrics",
    "TaskError",
    "TaskStats",
    "TimedOutTree",
    "WorkerEvent",
    "WorkerStats",
    "check_components",
    "plan_rebalance",
]

log = logging.getLogger("tupletree")

MAX_REBALANCE_WAIT_SECS = 24 * 3600.0


class WorkerStats(TypedDict):
    """One worker's current process, in ``cluster.worker_stats(name)``: where it runs,
    its ``attempt`` (``restarts``: attempts before this one), its resident memory at its
    last report (None before one, or where it cannot be read) and how old that report
    is. LocalCluster's one worker is the process the cluster runs in. A distributed
    worker also counts the frames it refused so far, by kind (``frames_refused``:
    ``control``, ``data``, ``unreadable``; see ``control.Metrics``). ``port`` is the
    port of its data socket (None for LocalCluster's, which has none) and ``tasks`` the
    ids of the tasks it runs (Storm's executor host and port, in the web view)."""

    host: str
    port: NotRequired[int | None]
    tasks: NotRequired[list[int]]
    pid: int
    attempt: int
    restarts: int
    rss_bytes: int | None
    report_age_secs: float | None
    frames_refused: NotRequired[dict[str, int] | None]


@runtime_checkable
class Cluster(Protocol):
    """What a test or a tool may rely on from any cluster: the web view (``ui/``) and
    the testing helpers (``testing/``) use nothing else (tests/test_cluster_protocol.py
    checks that they call no other method).

    ``simulate_time`` is True only on ``LocalCluster(simulate_time=True)``, where
    ``advance_time(secs)`` moves the clock; elsewhere time is real, ``wait_idle`` waits
    and ``advance_time`` raises RuntimeError.

    Errors come as records (``error_records``: the tasks' exceptions; ``worker_events``:
    the workers' own errors and restarts, kept apart so a flood of the first cannot push
    out the second) and as the texts rendered from both (``errors``), in the order they
    were reported.
    """

    simulate_time: bool

    def submit_topology(
        self, name: str, conf: dict[str, Any] | None, topology: Any, inactive: bool = False
    ) -> None: ...

    def activate(self, name: str) -> None: ...

    def deactivate(self, name: str) -> None: ...

    def kill_topology(self, name: str) -> None: ...

    def topologies(self) -> list[str]: ...

    def metrics(self, name: str) -> dict[str, ComponentMetrics]: ...

    def errors(self, name: str) -> list[str]: ...

    def error_records(self, name: str) -> list[TaskError]: ...

    def worker_events(self, name: str) -> list[WorkerEvent]: ...

    def timed_out(self, name: str) -> list[TimedOutTree]: ...

    def worker_stats(self, name: str) -> dict[int, WorkerStats]: ...

    def logs(self, name: str) -> list[str]: ...

    def topology_info(self, name: str) -> dict[str, Any]: ...

    def rebalance(
        self,
        name: str,
        wait_secs: float | None = None,
        workers: int | None = None,
        parallelism: Mapping[str, int] | None = None,
        *,
        block: bool = True,
    ) -> None: ...

    def rebalancing(self, name: str) -> bool: ...

    def wait_idle(self, timeout: float | None = 60.0) -> bool: ...

    def advance_time(self, secs: float) -> None: ...

    def shutdown(self) -> None: ...


# The services a cluster can start beside its workers, by name ("drpc", "ui"): filled
# in by tupletree/services.py, one layer up, so this module imports no service.
SERVICES: dict[str, Callable[..., Any]] = {}


def _service(name: str) -> Callable[..., Any]:
    try:
        return SERVICES[name]
    except KeyError:
        raise RuntimeError(
            f"the {name!r} service is not wired in: import tupletree (its __init__ imports "
            "tupletree.services) before starting a cluster"
        ) from None


def check_components(topology: Any, conf: dict[str, Any]) -> None:
    """Let each component that has ``check_config(conf, component_id)`` check its own
    config at submit (a broker connector: its lease against the message timeout, the
    broker reachable); what it raises names the component and the key to change."""
    for cid, spec in topology.components.items():
        check = getattr(spec.obj, "check_config", None)
        if check is not None:
            check({**conf, **spec.conf}, cid)


@dataclass(frozen=True)
class RebalancePlan:
    """A checked rebalance: ``workers`` workers, ``executors`` per component (every
    component), wait ``wait_secs`` for the trees in flight."""

    workers: int
    executors: dict[str, int]
    wait_secs: float


def plan_rebalance(
    topology: Any,
    conf: Mapping[str, Any],
    executors: Mapping[str, int],
    wait_secs: float | None,
    workers: int | None,
    parallelism: Mapping[str, int] | None,
) -> RebalancePlan:
    """Check a rebalance of a topology running with ``conf`` and ``executors``; the
    plan, or an error naming the offending option and the numbers."""
    if wait_secs is None:
        wait_secs = conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]
    if (
        isinstance(wait_secs, bool)
        or not isinstance(wait_secs, int | float)
        or not 0 <= wait_secs <= MAX_REBALANCE_WAIT_SECS
        or math.isnan(wait_secs)
    ):
        raise InvalidConfigError(
            f"rebalance wait_secs must be a number of seconds from 0 to "
            f"{MAX_REBALANCE_WAIT_SECS:.0f}, got {wait_secs!r}",
            key="wait_secs",
            value=wait_secs,
        )
    if workers is None:
        workers = conf[Config.TOPOLOGY_WORKERS]
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidConfigError(
            f"rebalance workers must be an integer >= 1, got {workers!r}",
            key=Config.TOPOLOGY_WORKERS,
            value=workers,
        )
    else:
        validate({**conf, Config.TOPOLOGY_WORKERS: workers})  # submit's bounds too
    if parallelism is not None and not isinstance(parallelism, Mapping):
        # A str ("count=4") or a list would raise AttributeError from deep inside.
        raise InvalidTopologyError(
            f"rebalance parallelism must map component ids to executor counts "
            f"(e.g. {{'count': 4}}), got {type(parallelism).__name__} {parallelism!r}"
        )
    plan = dict(executors)
    for cid, n in (parallelism or {}).items():
        spec = topology.components.get(cid)
        if spec is None:
            raise InvalidTopologyError(
                f"rebalance: the topology has no component {cid!r} "
                f"(its components: {', '.join(sorted(topology.components))})",
                component=str(cid),
            )
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= spec.tasks:
            # Only a number above the task count is mended by more tasks at submit.
            more = (
                f"; submit it with tasks={n} to allow {n}"
                if isinstance(n, int) and not isinstance(n, bool) and n > spec.tasks
                else ""
            )
            kind = (
                f" (a {type(n).__name__}: an executor count is an int)"
                if isinstance(n, bool) or not isinstance(n, int)
                else ""
            )
            raise InvalidTopologyError(
                f"rebalance: component {cid!r} has {spec.tasks} task(s), so it can run on "
                f"1 to {spec.tasks} executor(s), not {n!r}{kind} (as in Storm a "
                f"component's task count never changes{more})",
                component=cid,
            )
        plan[cid] = n
    return RebalancePlan(workers, plan, float(wait_secs))


def _rebalancing_refusal(name: str) -> TopologyRebalancingError:
    return TopologyRebalancingError(
        name,
        f"topology {name!r} is rebalancing: it is activated again, if it was active, when "
        "the rebalance ends",
    )


class ClusterBase:
    simulate_time = False  # LocalCluster(simulate_time=True) sets it

    def __init__(
        self,
        drpc_port: int | None = None,
        drpc_host: str = "127.0.0.1",
        drpc_conf: dict[str, Any] | None = None,
        ui_port: int | None = None,
        ui_host: str = "127.0.0.1",
        ui_options: dict[str, Any] | None = None,
    ) -> None:
        """``drpc_port`` starts an HTTP DRPC server with the cluster (0: a free port,
        ``cluster.drpc_server.port`` tells which; ``drpc_host="0.0.0.0"`` when workers
        run on other machines); topologies submitted here find it with no config.

        ``ui_port`` serves the web view, its REST API and Prometheus metrics
        (``tupletree.ui``) on ``ui_host`` (127.0.0.1: anyone who reaches it may steer
        the cluster, unless ``ui_options={"token": ...}``; docs/security.md); 0 picks a
        free port, ``cluster.ui_url`` tells which. ``ui_options`` are UIService's
        (token, allowed_hosts, connection bounds), checked. The subclass starts it, with
        ``_start_ui()``, once it can answer ``topologies()``."""
        self._drpc = None
        self._ui: Any = None
        self._rebalancing: set[str] = set()
        self._rebalancing_lock = threading.Lock()
        self._ui_address = (ui_host, ui_port)
        self._ui_options = ui_options
        if drpc_port is not None:
            self._drpc = _service("drpc")(drpc_host, drpc_port, drpc_conf)

    def _start_ui(self) -> None:
        host, port = self._ui_address
        if port is not None and self._ui is None:
            try:
                self._ui = _service("ui")(self, host, port, self._ui_options)
            except BaseException:
                self._stop_drpc()
                raise

    def _stop_ui(self) -> None:
        if self._ui is not None:
            self._ui.stop()
            self._ui = None

    @property
    def ui_url(self) -> str | None:
        """``http://host:port`` of the web view started with ``ui_port`` (None without)."""
        return None if self._ui is None else self._ui.url

    @property
    def drpc_server(self) -> Any:
        """The DRPCServer started with ``drpc_port`` (None without one)."""
        return None if self._drpc is None else self._drpc.server

    def _checked_submission(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: Any,
        running: Any,
        master: str = "local",
    ) -> dict[str, Any]:
        """Validate a submission; return the full config (defaults, DRPC server, and
        ``tupletree.cluster.master``: where it runs, for the components' checks of the
        stores they need)."""
        require_topology(topology)
        if not isinstance(name, str) or not name.strip():
            # The web view, the CLI and cluster.topologies() address a topology by it.
            raise ValueError(f"a topology name must be a non-empty string, got {name!r}")
        if conf is not None and not isinstance(conf, Mapping):
            validate(conf)  # InvalidConfigError: the config must be a dict
        if name in running:
            raise ValueError(f"a topology named {name!r} is already running")
        if self._drpc is not None:
            conf = self._drpc.topology_conf(conf)
        conf = {**(conf or {}), Config.TUPLETREE_CLUSTER_MASTER: master}
        full = validate(conf)
        check_components(topology, full)
        from tupletree.state.planner import warn_unbounded_aligned

        warn_unbounded_aligned(name, topology, full)
        return full

    # -- rebalance ------------------------------------------------------------------

    def rebalance(
        self,
        name: str,
        wait_secs: float | None = None,
        workers: int | None = None,
        parallelism: Mapping[str, int] | None = None,
        *,
        block: bool = True,
    ) -> None:
        """Storm's rebalance (see the module docstring): ``workers`` workers,
        ``parallelism`` executors per named component, after waiting up to
        ``wait_secs`` (default: the message timeout; it ends early once no tree is in
        flight) for the trees in flight. Returns once the topology runs on its new
        layout. The options are checked first, and a bad one raises before anything
        changes. ``block=False`` returns once they are checked (the topology's status
        is REBALANCING from then on) and rebalances on a thread of its own; what goes
        wrong there is logged. While a topology rebalances, activating, deactivating or
        rebalancing it is refused (TopologyRebalancingError)."""
        self.topology_info(name)  # an unknown topology: TopologyNotFoundError
        with self._rebalancing_lock:
            if name in self._rebalancing:
                raise TopologyRebalancingError(name, f"topology {name!r} is rebalancing already")
            self._rebalancing.add(name)
        try:
            run = self._rebalance(name, wait_secs, workers, parallelism)
        except BaseException:
            self._rebalanced(name)
            raise

        def finish() -> None:
            try:
                run()
            finally:
                self._rebalanced(name)

        # In simulated time nothing runs behind the caller's back: a rebalance too.
        if block or self.simulate_time:
            finish()
            return

        def logged() -> None:
            try:
                finish()
            except Exception:
                log.exception("rebalancing topology %r failed", name)

        threading.Thread(target=logged, name=f"tupletree-rebalance-{name}", daemon=True).start()

    def _rebalance(
        self,
        name: str,
        wait_secs: float | None,
        workers: int | None,
        parallelism: Mapping[str, int] | None,
    ) -> Callable[[], None]:
        """Check the options (raise on a bad one) and return what does the rebalance."""
        raise NotImplementedError

    def _rebalanced(self, name: str) -> None:
        with self._rebalancing_lock:
            self._rebalancing.discard(name)

    def rebalancing(self, name: str) -> bool:
        """True while ``name`` rebalances (Storm's REBALANCING status)."""
        with self._rebalancing_lock:
            return name in self._rebalancing

    def _steerable(self, name: str) -> None:
        """Refuse to activate or deactivate a topology that rebalances: the rebalance
        puts back the status it found when it ends."""
        if self.rebalancing(name):
            raise _rebalancing_refusal(name)

    @contextlib.contextmanager
    def _steering(self, name: str) -> Iterator[None]:
        """``_steerable``'s check held until the status is set: a rebalance that began
        between the two read the status before the set and put it back when it ended,
        so a deactivate that returned normally was undone."""
        with self._rebalancing_lock:
            if name in self._rebalancing:
                raise _rebalancing_refusal(name)
            yield

    def _wait_rebalanced(self, name: str, timeout: float) -> bool:
        """Wait up to ``timeout`` for a rebalance of ``name`` to end (True if none runs)."""
        deadline = time.monotonic() + timeout
        while self.rebalancing(name):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def _stop_drpc(self) -> None:
        if self._drpc is not None:
            self._drpc.stop()
            self._drpc = None

    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
