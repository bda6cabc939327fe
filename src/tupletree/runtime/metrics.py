"""Per-task counters and a small latency histogram.

Counters are plain attributes incremented on the hot path; everything else (sums per
component, percentiles) is computed when someone asks.
"""

from __future__ import annotations

from typing import Any

COUNTERS = ("emitted", "transferred", "executed", "acked", "failed", "timed_out", "errors")


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

    def to_state(self) -> tuple[int, int, dict[int, int]]:
        return (self.count, self.total_us, dict(self.buckets))

    @classmethod
    def from_state(cls, state: tuple[int, int, dict[int, int]]) -> LatencyHistogram:
        h = cls()
        h.count, h.total_us, h.buckets = state[0], state[1], dict(state[2])
        return h


class TaskMetrics:
    __slots__ = (*COUNTERS, "latency")

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
        self.latency: LatencyHistogram | None = None

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = {name: getattr(self, name) for name in COUNTERS}
        snap["latency"] = self.latency.to_state() if self.latency is not None else None
        return snap


def aggregate(
    task_snapshots: dict[int, dict[str, Any]], task_components: dict[int, str]
) -> dict[str, dict[str, Any]]:
    """Per-component totals, with a ``tasks`` breakdown, from per-task snapshots.

    Snapshots may come from several workers; this is the one place that shapes them.
    Every component appears, with zero counts until one of its tasks has reported.
    """
    out: dict[str, dict[str, Any]] = {
        comp: {name: 0 for name in COUNTERS} | {"tasks": {}}
        for comp in sorted(set(task_components.values()))
    }
    hists: dict[str, LatencyHistogram] = {}
    for task, snap in sorted(task_snapshots.items()):
        comp = task_components[task]
        entry = out.setdefault(comp, {name: 0 for name in COUNTERS} | {"tasks": {}})
        task_entry = {name: snap[name] for name in COUNTERS}
        for name in COUNTERS:
            entry[name] += snap[name]
        if "pending" in snap:
            task_entry["pending"] = snap["pending"]
            entry["pending"] = entry.get("pending", 0) + snap["pending"]
        for name, value in (snap.get("custom") or {}).items():
            entry.setdefault("custom", {}).setdefault(name, {})[task] = value
        if snap.get("latency") is not None:
            h = LatencyHistogram.from_state(snap["latency"])
            hists.setdefault(comp, LatencyHistogram()).merge(h)
            task_entry["complete_latency_ms"] = h.mean_ms()
        else:
            task_entry["complete_latency_ms"] = None
        entry["tasks"][task] = task_entry
    for comp, entry in out.items():
        hc = hists.get(comp)
        entry["complete_latency_ms"] = hc.mean_ms() if hc else None
        entry["complete_latency_p50_ms"] = hc.percentile(50) if hc else None
        entry["complete_latency_p99_ms"] = hc.percentile(99) if hc else None
    return out


def merge_snapshots(parts: list[dict[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Sum per-task snapshots that cover the same tasks, e.g. the last report of a worker
    that died and the reports of the attempt that replaced it, so counts never go back."""
    merged: dict[int, dict[str, Any]] = {}
    for part in parts:
        for task, snap in part.items():
            into = merged.get(task)
            if into is None:
                merged[task] = dict(snap)
                continue
            for name in COUNTERS:
                into[name] += snap[name]
            if snap.get("latency") is not None:
                if into.get("latency") is None:
                    into["latency"] = snap["latency"]
                else:
                    h = LatencyHistogram.from_state(into["latency"])
                    h.merge(LatencyHistogram.from_state(snap["latency"]))
                    into["latency"] = h.to_state()
            if "pending" in snap:
                into["pending"] = snap["pending"]  # the newest attempt's view wins
            if "custom" in snap:
                into["custom"] = snap["custom"]
    return merged
