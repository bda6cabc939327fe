"""A running topology's recent past, kept on the server for rates, capacity and charts.

``TopologyHistory`` is fed ``(time, metrics)`` samples (``cluster.metrics(name)``, taken
every second or so by the web service) and answers with plain values: per component and
per task rates over the last ``rate_window_secs``, capacity, and a timeline of the spouts'
acked and failed trees per second and their mean complete latency per interval.

Bounded: the timeline keeps at most ``max_points`` points (600: ten minutes at one sample a
second) and the rate window at most ``max_points`` samples, whatever the sampling rate.
Pure: no clock, no cluster; a test drives it with plain dicts. One lock makes it safe to
feed from a sampler thread while request handlers read it.

Capacity is Storm's: the share of wall time a task spent executing tuples over the window
(``busy_secs`` grown over time passed). Near 1 the task is the bottleneck.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

RATED = ("emitted", "transferred", "executed", "acked", "failed")
DEFAULT_MAX_POINTS = 600
DEFAULT_RATE_WINDOW_SECS = 10.0


def _reduce(metrics: Mapping[str, Mapping[str, Any]], spouts: Collection[str]) -> dict[str, Any]:
    """The few numbers a sample needs, copied out of ``metrics``."""
    components: dict[str, dict[str, float]] = {}
    tasks: dict[int, dict[str, float]] = {}
    owners: dict[str, list[int]] = {}
    acked = failed = lat_count = 0
    lat_sum = 0.0
    for cid, entry in metrics.items():
        components[cid] = {k: entry.get(k, 0) for k in (*RATED, "busy_secs")}
        owners[cid] = []
        for task, t in entry.get("tasks", {}).items():
            tasks[int(task)] = {k: t.get(k, 0) for k in (*RATED, "busy_secs")}
            owners[cid].append(int(task))
        if cid in spouts:
            acked += entry.get("acked", 0)
            failed += entry.get("failed", 0)
            hist = entry.get("complete_latency_hist")
            if hist:
                lat_count += hist["count"]
                lat_sum += hist["sum_ms"]
    totals = {"acked": acked, "failed": failed, "lat_count": lat_count, "lat_sum": lat_sum}
    return {"components": components, "tasks": tasks, "owners": owners, "totals": totals}


def _rates(new: dict[str, float], old: dict[str, float] | None, dt: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in RATED:
        before = old.get(key, 0) if old else 0
        out[key] = max(0.0, (new.get(key, 0) - before) / dt)
    busy = new.get("busy_secs", 0) - (old.get("busy_secs", 0) if old else 0)
    out["capacity"] = max(0.0, busy / dt)
    return out


def _went_back(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Whether any counter of ``new`` is below ``old``'s (a new run's sample)."""
    for table in ("components", "tasks"):
        before = old[table]
        for key, figures in new[table].items():
            prev = before.get(key)
            if prev is not None and any(figures[k] < prev[k] for k in figures):
                return True
    return False


class TopologyHistory:
    """Samples of one topology; see the module docstring for bounds."""

    def __init__(
        self,
        spouts: Collection[str],
        max_points: int = DEFAULT_MAX_POINTS,
        rate_window_secs: float = DEFAULT_RATE_WINDOW_SECS,
    ) -> None:
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2, got {max_points!r}")
        self.spouts = frozenset(spouts)
        self.rate_window_secs = rate_window_secs
        self._samples: deque[tuple[float, dict[str, Any]]] = deque(maxlen=max_points)
        self._timeline: deque[dict[str, Any]] = deque(maxlen=max_points)
        self._lock = threading.Lock()

    def add(self, t: float, metrics: Mapping[str, Mapping[str, Any]]) -> None:
        """Record a sample taken at ``t`` (seconds, any monotonic origin). A sample not
        later than the previous one is ignored."""
        sample = _reduce(metrics, self.spouts)
        with self._lock:
            self._add(t, sample)

    def _add(self, t: float, sample: dict[str, Any]) -> None:
        if self._samples:
            t0, prev = self._samples[-1]
            if t <= t0:
                return
            if _went_back(sample, prev):
                # Counters never go back within a run: this is a new one under the name
                # (killed and submitted again). Its rates start from this sample.
                self._samples.clear()
                self._samples.append((t, sample))
                return
            dt = t - t0
            new, old = sample["totals"], prev["totals"]
            n = new["lat_count"] - old["lat_count"]
            latency = (new["lat_sum"] - old["lat_sum"]) / n if n > 0 else None
            self._timeline.append(
                {
                    "t": t,
                    "acked": max(0.0, (new["acked"] - old["acked"]) / dt),
                    "failed": max(0.0, (new["failed"] - old["failed"]) / dt),
                    "completeLatencyMs": latency,
                }
            )
        self._samples.append((t, sample))
        # Keep what the rate window needs, and the sample just before it.
        while len(self._samples) > 2 and t - self._samples[1][0] >= self.rate_window_secs:
            self._samples.popleft()

    def rates(self) -> dict[str, dict[Any, dict[str, float]]]:
        """``{"components": {cid: {...}}, "tasks": {task: {...}}}`` with emitted,
        transferred, executed, acked, failed per second and capacity (0..1) over the
        window; empty until two samples came."""
        with self._lock:
            if len(self._samples) < 2:
                return {"components": {}, "tasks": {}}
            (t0, old), (t1, new) = self._samples[0], self._samples[-1]
        dt = t1 - t0
        components = {
            cid: _rates(v, old["components"].get(cid), dt) for cid, v in new["components"].items()
        }
        tasks = {task: _rates(v, old["tasks"].get(task), dt) for task, v in new["tasks"].items()}
        # A component is as loaded as its busiest task (Storm shows the executors' maximum).
        for cid, owned in new["owners"].items():
            if owned and cid in components:
                components[cid]["capacity"] = max(tasks[t]["capacity"] for t in owned)
        return {"components": components, "tasks": tasks}

    def timeline(self) -> list[dict[str, Any]]:
        """Oldest first: ``{"t", "acked", "failed", "completeLatencyMs"}`` per interval
        (rates per second; latency None in an interval with no acked tree)."""
        with self._lock:
            return list(self._timeline)
