"""Per-task counters and a small latency histogram.

Counters are plain attributes incremented on the hot path; everything else (sums per
component, percentiles) is computed when someone asks.

``busy_secs`` is the wall time a bolt or acker task spent in its turns (executing its
tuples, acks included), read from the clock twice per turn, not per tuple; the execute
latency histogram records each turn's mean per tuple once per tuple of the turn. Storm
samples execute latency (5% of tuples by default) for the same reason: two clock reads
per tuple would cost more than many bolts' work.

The shapes of a task's snapshot and of ``aggregate``'s answer are declared in
``records/metrics.py`` (``TaskSnapshot``, ``ComponentMetrics``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from tupletree.records.metrics import ComponentMetrics, HistogramDescription

COUNTERS = (
    "emitted",
    "transferred",
    "executed",
    "acked",
    "failed",
    "timed_out",
    "errors",
    "busy_secs",
)
# Histograms a task snapshot may carry: snapshot key, name in metrics(), and the counter
# (seconds) that holds their exact sum where the buckets' microseconds would round it away
# (a bolt's turn often takes well under a microsecond per tuple).
HISTOGRAMS = (
    ("latency", "complete_latency", None),
    ("execute_latency", "execute_latency", "busy_secs"),
)
# Per-task gauges: the newest report's value stands (never summed over a task's reports).
GAUGES = ("pending", "queued", "queue_limit")


class LatencyHistogram:
    """Log-linear buckets (8 per power of two, ~12% precision) of microseconds.

    Recording is one dict update; memory is bounded by the number of distinct buckets
    (about 8 per doubling, so a few hundred at most).
    """

    __slots__ = ("buckets", "count", "total_us")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.count = 0
        self.total_us = 0

    def record(self, secs: float) -> None:
        us = int(secs * 1e6)
        if us < 0:
            us = 0
        self.count += 1
        self.total_us += us
        b = us.bit_length()
        key = us if b <= 3 else (b << 3) | ((us >> (b - 4)) & 7)
        self.buckets[key] = self.buckets.get(key, 0) + 1

    def record_many(self, secs: float, n: int) -> None:
        """Record ``n`` samples of ``secs`` each (one turn's mean per tuple)."""
        us = int(secs * 1e6)
        if us < 0:
            us = 0
        self.count += n
        self.total_us += us * n
        b = us.bit_length()
        key = us if b <= 3 else (b << 3) | ((us >> (b - 4)) & 7)
        self.buckets[key] = self.buckets.get(key, 0) + n

    def merge(self, other: LatencyHistogram) -> None:
        self.count += other.count
        self.total_us += other.total_us
        for k, n in other.buckets.items():
            self.buckets[k] = self.buckets.get(k, 0) + n

    @staticmethod
    def _upper_us(key: int) -> int:
        if key < 8:
            return key
        b, frac = key >> 3, key & 7
        return ((8 | frac) + 1) << (b - 4)

    def percentile(self, q: float) -> float | None:
        """The q-th percentile in milliseconds (bucket upper bound), None if empty."""
        if not self.count:
            return None
        rank = q / 100.0 * self.count
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen >= rank:
                return self._upper_us(key) / 1000.0
        return self._upper_us(max(self.buckets)) / 1000.0

    def mean_ms(self) -> float | None:
        return self.total_us / self.count / 1000.0 if self.count else None

    def describe(self) -> HistogramDescription:
        """``{"count", "sum_ms", "buckets": [[upper_ms, count], ...]}`` (ascending): what
        a Prometheus histogram or a chart needs, as plain values."""
        return {
            "count": self.count,
            "sum_ms": self.total_us / 1000.0,
            "buckets": [
                [self._upper_us(k) / 1000.0, self.buckets[k]] for k in sorted(self.buckets)
            ],
        }

    def to_state(self) -> tuple[int, int, dict[int, int]]:
        return (self.count, self.total_us, dict(self.buckets))

    @classmethod
    def from_state(cls, state: tuple[int, int, dict[int, int]]) -> LatencyHistogram:
        h = cls()
        h.count, h.total_us, h.buckets = state[0], state[1], dict(state[2])
        return h


class TaskMetrics:
    __slots__ = (*COUNTERS, "execute_latency", "latency")

    # Each counter is assigned by name, not by setattr over COUNTERS, so that mypyc sees
    # the attributes and compiles them to native fields; COUNTERS stays the one list
    # that snapshots and aggregates read.

    def __init__(self) -> None:
        self.emitted = 0
        self.transferred = 0
        self.executed = 0
        self.acked = 0
        self.failed = 0
        self.timed_out = 0
        self.errors = 0
        self.busy_secs = 0.0
        self.latency: LatencyHistogram | None = None
        self.execute_latency: LatencyHistogram | None = None

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = {name: getattr(self, name) for name in COUNTERS}
        snap["latency"] = self.latency.to_state() if self.latency is not None else None
        ex = self.execute_latency
        snap["execute_latency"] = ex.to_state() if ex is not None else None
        return snap


def aggregate(
    task_snapshots: Mapping[int, Mapping[str, Any]], task_components: Mapping[int, str]
) -> dict[str, ComponentMetrics]:
    """Per-component totals, with a ``tasks`` breakdown, from per-task snapshots
    (``TaskSnapshot``s): ``{component: ComponentMetrics}``.

    Snapshots may come from several workers; this is the one place that shapes them.
    Every component appears, with zero counts until one of its tasks has reported.
    Gauges (``pending``, ``queued``, ``queue_limit``) are summed over a component's
    tasks. Each histogram (``complete_latency`` of spouts, ``execute_latency`` of bolts
    and ackers) gives ``<name>_ms`` (mean) per task and per component, ``_p50_ms`` and
    ``_p99_ms`` per component, and ``<name>_hist`` (``LatencyHistogram.describe``) for
    both.
    """
    out: dict[str, dict[str, Any]] = {
        comp: {name: 0 for name in COUNTERS} | {"tasks": {}}
        for comp in sorted(set(task_components.values()))
    }
    hists: dict[tuple[str, str], LatencyHistogram] = {}
    for task, snap in sorted(task_snapshots.items()):
        comp = task_components[task]
        entry = out.setdefault(comp, {name: 0 for name in COUNTERS} | {"tasks": {}})
        task_entry = {name: snap[name] for name in COUNTERS}
        for name in COUNTERS:
            entry[name] += snap[name]
        for name in GAUGES:
            if name in snap:
                task_entry[name] = snap[name]
                entry[name] = entry.get(name, 0) + snap[name]
        for name, value in (snap.get("custom") or {}).items():
            entry.setdefault("custom", {}).setdefault(name, {})[task] = value
        for key, name, exact in HISTOGRAMS:
            state = snap.get(key)
            if state is not None:
                h = LatencyHistogram.from_state(state)
                hists.setdefault((comp, name), LatencyHistogram()).merge(h)
                _describe(task_entry, name, h, task_entry.get(exact) if exact else None)
            else:
                task_entry[f"{name}_ms"] = None
        entry["tasks"][task] = task_entry
    for comp, entry in out.items():
        for _key, name, exact in HISTOGRAMS:
            hc = hists.get((comp, name))
            entry[f"{name}_ms"] = None
            entry[f"{name}_p50_ms"] = hc.percentile(50) if hc else None
            entry[f"{name}_p99_ms"] = hc.percentile(99) if hc else None
            if hc:
                _describe(entry, name, hc, entry.get(exact) if exact else None)
    return cast(dict[str, ComponentMetrics], out)


def _describe(
    entry: dict[str, Any], name: str, h: LatencyHistogram, exact_secs: float | None
) -> None:
    """Put ``<name>_ms`` (mean) and ``<name>_hist`` into ``entry``."""
    described = h.describe()
    if exact_secs is not None:
        described["sum_ms"] = exact_secs * 1000.0
    entry[f"{name}_hist"] = described
    entry[f"{name}_ms"] = described["sum_ms"] / h.count if h.count else None


def merge_snapshots(
    parts: Sequence[Mapping[int, Mapping[str, Any]]],
) -> dict[int, dict[str, Any]]:
    """Sum per-task snapshots that cover the same tasks, e.g. the last report of a worker
    that died and the reports of the attempt that replaced it, so counts never go back.
    Gauges are the newest part's (the last in ``parts``)."""
    merged: dict[int, dict[str, Any]] = {}
    for part in parts:
        for task, snap in part.items():
            into = merged.get(task)
            if into is None:
                merged[task] = dict(snap)
                continue
            for name in COUNTERS:
                into[name] += snap.get(name, 0)
            for key, _name, _exact in HISTOGRAMS:
                if snap.get(key) is not None:
                    if into.get(key) is None:
                        into[key] = snap[key]
                    else:
                        h = LatencyHistogram.from_state(into[key])
                        h.merge(LatencyHistogram.from_state(snap[key]))
                        into[key] = h.to_state()
            for name in GAUGES:
                if name in snap:
                    into[name] = snap[name]  # the newest attempt's view wins
            if "custom" in snap:
                into["custom"] = snap["custom"]
    return merged
