"""Prometheus metrics of a running cluster, read from ``cluster.metrics(name)`` on scrape.

A custom Collector: nothing is counted twice and nothing extra runs on the tuple path;
each scrape asks the cluster for its per-task figures and turns them into metric
families. Names start ``tupletree_``; counters end ``_total``; times are in seconds;
labels are ``topology``, ``component`` and ``task`` (never message ids or tuple values,
so the number of series is bounded by the number of tasks).

Failed trees are split by ``reason``: ``timeout`` (the tree outlived the message timeout)
and ``explicit`` (a bolt failed a tuple of it). A ReliableSpout's messages that used up
their retries are ``tupletree_spout_retries_exhausted_total``: a message counts there
once, after its last failed tree was counted under its reason. A windowed bolt task's
window: ``tupletree_window_held_events``, ``tupletree_window_watermark_seconds``,
``tupletree_window_late_tuples_total``.

Histograms are rebuilt from tupletree's own log-linear buckets (~12% wide), each counted
under the first Prometheus bound at or above its upper edge: a bucket is never counted
below its true bound, at worst one bound too high.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tupletree.cluster import Cluster, TaskStats
from tupletree.reliability.protocol import ACKER_COMPONENT

log = logging.getLogger("tupletree.ui")

BOUNDS_SECS = (
    0.00001,
    0.00005,
    0.0001,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
TASK_LABELS = ["topology", "component", "task"]

# (metric name, help, its figure in a task's metrics: read by name) of the per-task
# counters.
COUNTERS: tuple[tuple[str, str, Callable[[TaskStats], float]], ...] = (
    ("tupletree_tuples_emitted", "Tuples emitted by the task.", lambda t: t["emitted"]),
    (
        "tupletree_tuples_transferred",
        "Tuples delivered to target tasks (an emit to n tasks counts n).",
        lambda t: t["transferred"],
    ),
    ("tupletree_tuples_executed", "Tuples the task executed.", lambda t: t["executed"]),
    (
        "tupletree_tuples_acked",
        "Trees completed (spouts, ackers) or input tuples acked (bolts).",
        lambda t: t["acked"],
    ),
    (
        "tupletree_task_errors",
        "Errors the task reported (user exceptions).",
        lambda t: t["errors"],
    ),
    (
        "tupletree_task_busy_seconds",
        "Seconds the task spent executing tuples; its rate is Storm's capacity.",
        lambda t: t["busy_secs"],
    ),
)


def histogram_buckets(described: Mapping[str, Any]) -> list[tuple[str, float]]:
    """Cumulative Prometheus buckets (``le`` in seconds, with ``+Inf``) from
    ``LatencyHistogram.describe()``'s ``[upper_ms, count]`` pairs."""
    counts = [0] * len(BOUNDS_SECS)
    for upper_ms, n in described["buckets"]:
        upper = upper_ms / 1000.0
        for i, bound in enumerate(BOUNDS_SECS):
            if upper <= bound:
                counts[i] += n
                break
    out = []
    running = 0
    for bound, n in zip(BOUNDS_SECS, counts, strict=True):
        running += n
        out.append((repr(bound), float(running)))
    out.append(("+Inf", float(described["count"])))
    return out


class ClusterCollector(Collector):
    """Reads a cluster on every ``collect()``: ``topologies()``, ``metrics(name)``,
    ``topology_info(name)`` and ``worker_stats(name)``. A topology killed between the
    listing and its read is skipped."""

    def __init__(
        self, cluster: Cluster, on_error: Callable[[str, BaseException], None] | None = None
    ) -> None:
        self.cluster = cluster
        self.on_error = on_error

    def describe(self) -> list[Metric]:
        return []  # no fixed set: families depend on the running topologies

    def collect(self) -> Iterator[Metric]:
        counters = [
            (CounterMetricFamily(name, doc, labels=TASK_LABELS), figure)
            for name, doc, figure in COUNTERS
        ]
        failed = CounterMetricFamily(
            "tupletree_tuples_failed",
            "Trees failed (spouts, ackers) or input tuples failed (bolts), by reason.",
            labels=[*TASK_LABELS, "reason"],
        )
        exhausted = CounterMetricFamily(
            "tupletree_spout_retries_exhausted",
            "Messages a ReliableSpout gave up on after max_retries failed trees.",
            labels=TASK_LABELS,
        )
        complete = HistogramMetricFamily(
            "tupletree_complete_latency_seconds",
            "Time from a spout tuple's emit to its tree's completion.",
            labels=TASK_LABELS,
        )
        execute = HistogramMetricFamily(
            "tupletree_execute_latency_seconds",
            "Time a bolt or acker task spends per tuple (turn time over tuples).",
            labels=TASK_LABELS,
        )
        pending = GaugeMetricFamily(
            "tupletree_spout_pending",
            "Trees of a spout task not yet acked or failed.",
            labels=TASK_LABELS,
        )
        acker_pending = GaugeMetricFamily(
            "tupletree_acker_pending_trees",
            "Trees an acker task is tracking.",
            labels=TASK_LABELS,
        )
        queued = GaugeMetricFamily(
            "tupletree_queue_depth", "Tuples waiting in the task's inbox.", labels=TASK_LABELS
        )
        capacity = GaugeMetricFamily(
            "tupletree_queue_capacity",
            "Inbox depth over which the worker stops polling its spouts (backpressure).",
            labels=TASK_LABELS,
        )
        active = GaugeMetricFamily(
            "tupletree_topology_active", "1 while the topology is active.", labels=["topology"]
        )
        restarts = CounterMetricFamily(
            "tupletree_worker_restarts",
            "Times Spark restarted the worker's task.",
            labels=["topology", "worker"],
        )
        memory = GaugeMetricFamily(
            "tupletree_worker_memory_bytes",
            "Resident memory of the worker's current process.",
            labels=["topology", "worker", "host"],
        )
        refused = CounterMetricFamily(
            "tupletree_worker_frames_refused",
            "Frames the worker's current process refused: kind control (failed "
            "authentication on its control socket), data (on its data socket), unreadable "
            "(signed data frames it could not read).",
            labels=["topology", "worker", "kind"],
        )
        window_held = GaugeMetricFamily(
            "tupletree_window_held_events",
            "Events a windowed bolt task holds in its window (its cap: "
            "tupletree.window.max.events).",
            labels=TASK_LABELS,
        )
        window_watermark = GaugeMetricFamily(
            "tupletree_window_watermark_seconds",
            "A windowed bolt task's watermark, in event-time seconds (absent before the first).",
            labels=TASK_LABELS,
        )
        window_late = CounterMetricFamily(
            "tupletree_window_late_tuples",
            "Tuples a windowed bolt task received behind its watermark.",
            labels=TASK_LABELS,
        )
        trident = TridentFamilies()
        cluster = self.cluster
        for name in cluster.topologies():
            try:
                metrics = cluster.metrics(name)
                info = cluster.topology_info(name)
            except KeyError:
                continue  # killed meanwhile
            except Exception as exc:  # a failed Spark job: other topologies still count
                if self.on_error is not None:
                    self.on_error(name, exc)
                continue
            active.add_metric([name], 1.0 if info["active"] else 0.0)
            for cid, entry in metrics.items():
                for task, t in entry["tasks"].items():
                    labels = [name, cid, str(task)]
                    for family, figure in counters:
                        family.add_metric(labels, float(figure(t)))
                    timed_out = t["timed_out"]
                    # A spout's failed counts its timed-out trees too; an acker's does
                    # not (it counts a tree it expires in timed_out alone).
                    explicit = t["failed"] if cid == ACKER_COMPONENT else t["failed"] - timed_out
                    failed.add_metric([*labels, "timeout"], float(timed_out))
                    failed.add_metric([*labels, "explicit"], float(max(0, explicit)))
                    hist = t.get("complete_latency_hist")
                    if hist:
                        complete.add_metric(labels, histogram_buckets(hist), hist["sum_ms"] / 1e3)
                    hist = t.get("execute_latency_hist")
                    if hist:
                        execute.add_metric(labels, histogram_buckets(hist), hist["sum_ms"] / 1e3)
                    if "pending" in t:
                        target = acker_pending if cid == ACKER_COMPONENT else pending
                        target.add_metric(labels, float(t["pending"]))
                    if "queued" in t:
                        queued.add_metric(labels, float(t["queued"]))
                    if "queue_limit" in t:
                        capacity.add_metric(labels, float(t["queue_limit"]))
                for task, w in entry.get("custom", {}).get("window", {}).items():
                    if not isinstance(w, Mapping):
                        continue
                    labels = [name, cid, str(task)]
                    window_held.add_metric(labels, float(w.get("held", 0)))
                    window_late.add_metric(labels, float(w.get("late", 0)))
                    if isinstance(w.get("watermark_ms"), int | float):
                        window_watermark.add_metric(labels, w["watermark_ms"] / 1e3)
                per_task = entry.get("custom", {}).get("retries_exhausted", {})
                for task, value in per_task.items():
                    if isinstance(value, int | float):
                        exhausted.add_metric([name, cid, str(task)], float(value))
                for task, view in entry.get("custom", {}).get("trident", {}).items():
                    if isinstance(view, Mapping):
                        trident.add(name, cid, str(task), view)
            try:
                workers = cluster.worker_stats(name)
            except KeyError:
                workers = {}
            for index, w in workers.items():
                restarts.add_metric([name, str(index)], float(w["restarts"]))
                rss = w["rss_bytes"]
                if rss is not None:
                    memory.add_metric([name, str(index), w["host"]], float(rss))
                for kind, count in sorted((w.get("frames_refused") or {}).items()):
                    refused.add_metric([name, str(index), kind], float(count))
        yield active
        yield from (family for family, _ in counters)
        yield failed
        yield exhausted
        yield complete
        yield execute
        yield pending
        yield acker_pending
        yield queued
        yield capacity
        yield restarts
        yield memory
        yield refused
        yield window_held
        yield window_watermark
        yield window_late
        yield from trident.families()


class TridentFamilies:
    """Trident's progress (the ``trident`` custom metric of its coordinators and bolts):
    the current and last committed txid, active batches by phase, batches replayed, each
    committing task's last committed txid per state, and spout tasks stuck on a batch
    (value: the txid; labels: the spout and the partition it cannot read)."""

    def __init__(self) -> None:
        labels = TASK_LABELS
        self.current = GaugeMetricFamily(
            "tupletree_trident_current_txid",
            "The first txid not yet committed (the coordinator's).",
            labels=labels,
        )
        self.committed = GaugeMetricFamily(
            "tupletree_trident_last_committed_txid",
            "The last txid the coordinator committed.",
            labels=labels,
        )
        self.active = GaugeMetricFamily(
            "tupletree_trident_active_batches",
            "Batches the coordinator has active, by phase.",
            labels=[*labels, "phase"],
        )
        self.replayed = CounterMetricFamily(
            "tupletree_trident_replayed_batches",
            "Batches started again after a failure (attempt > 0), since the coordinator started.",
            labels=labels,
        )
        self.state = GaugeMetricFamily(
            "tupletree_trident_state_committed_txid",
            "The last txid a committing task committed to each of its states.",
            labels=[*labels, "state"],
        )
        self.stuck = GaugeMetricFamily(
            "tupletree_trident_stuck_txid",
            "A spout task that cannot emit a batch: the batch's txid.",
            labels=[*labels, "spout", "partition"],
        )

    def add(self, topology: str, component: str, task: str, view: Mapping[str, Any]) -> None:
        labels = [topology, component, task]
        if view.get("kind") == "coordinator":
            self.current.add_metric(labels, float(view.get("currentTxid") or 0))
            self.committed.add_metric(labels, float(view.get("lastCommittedTxid") or 0))
            self.replayed.add_metric(labels, float(view.get("replayed") or 0))
            phases = {"PROCESSING": 0, "PROCESSED": 0, "COMMITTING": 0}
            for batch in view.get("active") or []:
                phases[batch.get("phase", "PROCESSING")] = phases.get(batch.get("phase"), 0) + 1
            for phase, n in phases.items():
                self.active.add_metric([*labels, phase], float(n))
            return
        for state, txid in (view.get("lastCommittedTxid") or {}).items():
            if isinstance(txid, int | float):
                self.state.add_metric([*labels, str(state)], float(txid))
        for spout, where in (view.get("stuck") or {}).items():
            if isinstance(where, Mapping):
                self.stuck.add_metric(
                    [*labels, str(spout), str(where.get("partition"))],
                    float(where.get("txid") or 0),
                )

    def families(self) -> Iterator[Metric]:
        yield from (
            self.current,
            self.committed,
            self.active,
            self.replayed,
            self.state,
            self.stuck,
        )
