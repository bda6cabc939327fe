"""The declared shape of metrics: what a worker reports per task, and what
``cluster.metrics(name)`` answers per component. Types only (TypedDicts: plain dicts
at run time, so they pickle, cross to a Spark driver and become JSON as they are);
``runtime/metrics.py`` fills them, ``ui/``, ``testing/`` and ``bench/`` read them by
these names.

    Worker.metrics_snapshot()  ->  {task: TaskSnapshot}          (a worker's report)
    aggregate(...)             ->  {component: ComponentMetrics}  (cluster.metrics)
                                     ComponentMetrics["tasks"]: {task: TaskStats}

Counters (``emitted``, ``transferred``, ``executed``, ``acked``, ``failed``,
``timed_out``, ``errors``: counts since submit; ``busy_secs``: seconds) are in every
entry. Gauges are where the task has them: ``pending`` (a spout's trees in flight, an
acker's trees tracked), ``queued`` (tuples in its inbox), ``queue_limit`` (a bolt's or
acker's inbox size over which spouts are held back). Latencies are milliseconds, None
until measured. ``custom`` holds what components registered with
``TopologyContext.register_metric``: ``{name: {task: value}}`` per component.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

# LatencyHistogram.to_state(): (count, total microseconds, {bucket key: count}).
HistogramState = tuple[int, int, dict[int, int]]


class HistogramDescription(TypedDict):
    """``LatencyHistogram.describe()``: what a Prometheus histogram or a chart needs."""

    count: int
    sum_ms: float
    buckets: list[list[float]]  # [upper bound in ms, count], ascending


class TaskSnapshot(TypedDict):
    """One task's figures in a worker's report (``Worker.metrics_snapshot``)."""

    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int
    errors: int
    busy_secs: float
    latency: HistogramState | None  # a spout's complete latency
    execute_latency: HistogramState | None  # a bolt's or acker's time per tuple
    pending: NotRequired[int]
    queued: NotRequired[int]
    queue_limit: NotRequired[int]
    custom: NotRequired[dict[str, Any]]  # registered metric -> its value


class TaskStats(TypedDict):
    """One task's figures in ``cluster.metrics(name)[component]["tasks"]``."""

    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int
    errors: int
    busy_secs: float
    complete_latency_ms: float | None
    execute_latency_ms: float | None
    complete_latency_hist: NotRequired[HistogramDescription]
    execute_latency_hist: NotRequired[HistogramDescription]
    pending: NotRequired[int]
    queued: NotRequired[int]
    queue_limit: NotRequired[int]


class ComponentMetrics(TypedDict):
    """One component's figures in ``cluster.metrics(name)``: sums over its tasks, the
    latencies' mean and percentiles over all of them, and ``tasks``, each task's own."""

    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int
    errors: int
    busy_secs: float
    tasks: dict[int, TaskStats]
    complete_latency_ms: float | None
    complete_latency_p50_ms: float | None
    complete_latency_p99_ms: float | None
    execute_latency_ms: float | None
    execute_latency_p50_ms: float | None
    execute_latency_p99_ms: float | None
    complete_latency_hist: NotRequired[HistogramDescription]
    execute_latency_hist: NotRequired[HistogramDescription]
    pending: NotRequired[int]
    queued: NotRequired[int]
    queue_limit: NotRequired[int]
    custom: NotRequired[dict[str, dict[int, Any]]]  # registered metric -> task -> value


TopologyMetrics = dict[str, ComponentMetrics]
