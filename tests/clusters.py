"""One harness, three clusters: the scenario suite runs unchanged on each.

- ``sim``: LocalCluster(simulate_time=True): time moves only when the test says, and
  every assertion about "not yet" is exact.
- ``real``: LocalCluster in real time.
- ``spark``: SparkCluster on the session's local Spark, topologies on 2 workers, so
  tuples, acks and timeouts cross processes.

Scenarios are written in simulated seconds. On the real-time clusters the harness
scales every timeout and tick period in the submitted config by ``SCALE`` and sleeps the
scaled time in ``advance_time``; assertions about what must have happened by then go
through ``until`` (checked once in simulated time, polled up to a deadline in real time),
and assertions about what must NOT have happened yet are made only where
``exact_time`` is True: on a shared 2-core machine a real sleep may overshoot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tupletree import Config
from tupletree.cluster import Cluster
from tupletree.config import DEFAULTS
from tupletree.topology.builder import Topology

# Real seconds per scenario second on the real-time clusters: a 10 s message timeout
# becomes 2 s.
SCALE = 0.2
# How long ``until`` polls on a real-time cluster before giving up.
UNTIL_SECS = 60.0
WAIT_IDLE_SECS = 60.0

_SCALED_KEYS = (
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS,
    Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS,
)


class ClusterHarness:
    """Wraps a cluster for the scenarios: what differs between clusters is said here."""

    def __init__(self, kind: str, cluster: Cluster, workers: int = 1) -> None:
        self.kind = kind
        self.cluster = cluster
        self.exact_time = cluster.simulate_time
        self.workers = workers
        self.scale = 1.0 if self.exact_time else SCALE

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def __repr__(self) -> str:
        return f"<{self.kind} cluster>"

    def submit_topology(
        self,
        name: str,
        conf: dict[str, Any] | None,
        topology: Topology,
        inactive: bool = False,
    ) -> None:
        self.cluster.submit_topology(name, self.conf(conf), self.scaled(topology), inactive)

    def conf(self, conf: dict[str, Any] | None) -> dict[str, Any]:
        """The scenario's config, its periods scaled, on this harness's workers."""
        conf = dict(conf or {})
        if self.scale != 1.0:
            timeout = Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS
            if conf.get(timeout) is None:  # the default is scaled too
                conf[timeout] = DEFAULTS[timeout]
            for key in _SCALED_KEYS:
                if conf.get(key) is not None:
                    conf[key] = conf[key] * self.scale
        conf.setdefault(Config.TOPOLOGY_WORKERS, self.workers)
        return conf

    def scaled(self, topology: Topology) -> Topology:
        """Per-component tick periods (add_configuration) scaled like the config's."""
        if self.scale != 1.0:
            for spec in topology.components.values():
                for key in _SCALED_KEYS:
                    if spec.conf.get(key) is not None:
                        spec.conf = {**spec.conf, key: spec.conf[key] * self.scale}
        return topology

    def advance_time(self, secs: float) -> None:
        if self.exact_time:
            self.cluster.advance_time(secs)
            return
        time.sleep(secs * self.scale)
        self.wait_idle()

    def wait_idle(self, timeout: float | None = WAIT_IDLE_SECS) -> bool:
        if self.exact_time:
            return self.cluster.wait_idle()
        # Twice: a worker's idle report may describe a round that began before the
        # test's last feed reached its spout (on Spark the feeder polls this process).
        return self.cluster.wait_idle(timeout) and self.cluster.wait_idle(timeout)

    def until(self, check: Callable[[], bool]) -> bool:
        """``check()`` now in simulated time; in real time, poll until it holds or
        UNTIL_SECS pass. Returns its last result, for ``assert``."""
        if self.exact_time:
            return check()
        return until(check, UNTIL_SECS)


def until(check: Callable[[], bool], secs: float = UNTIL_SECS) -> bool:
    """Poll ``check()`` until it holds or ``secs`` pass (real time only: in simulated
    time, advance the clock instead). Returns its last result, for ``assert``."""
    deadline = time.monotonic() + secs
    while not check():
        if time.monotonic() > deadline:
            return check()
        time.sleep(0.05)
    return True
