"""The REST answers, shaped as Storm UI's (``/api/v1/...``, camelCase field names), from
plain values: a cluster's metrics (``ComponentMetrics``), its error records
(``TaskError``, ``WorkerEvent``: read as fields, never parsed from text), the history's
rates.

Pure functions; ``tupletree.ui.app`` feeds them what it read from the cluster. Storm's
names where Storm has the figure (``emitted``, ``transferred``, ``executed``, ``acked``,
``failed``, ``completeLatency``, ``executeLatency``, ``processLatency``, ``capacity``,
latencies in milliseconds as strings-free numbers); tupletree's own figures are added
under names in the same style (``timedOut``, ``pending``, ``queued``,
``queueCapacity``, ``rates``, and a windowed bolt's ``window``: see
``window_summary``). Counts are totals since submit (Storm's ``:all-time``
window); ``rates`` and ``capacity`` cover the history's rate window.

A topology's id is its name: ``/api/v1/topology/<name>`` addresses it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from tupletree.cluster import ComponentMetrics, TaskError, WorkerEvent
from tupletree.redact import MASK, is_secret_key, redact
from tupletree.reliability.protocol import ACKER_COMPONENT

RECENT_ERRORS = 50


def error_entry(name: str, record: TaskError, now: float) -> dict[str, Any]:
    """One task error as JSON: the record's fields, and Storm UI's ``error`` (``Type:
    message``), ``errorTime`` (epoch seconds), ``errorLapsedSecs`` (since, at ``now``,
    wall clock) and ``errorWorkerLogLink`` (the topology's log lines)."""
    return {
        "component": record.component,
        "task": record.task,
        "where": record.where,
        "exception": record.exception,
        "message": record.message,
        "error": record.error,
        "traceback": record.traceback,
        "worker": record.worker,
        "attempt": record.attempt,
        "errorTime": int(record.time),
        "errorLapsedSecs": max(0, int(now - record.time)),
        "errorWorkerLogLink": logs_link(name),
    }


def event_entry(name: str, event: WorkerEvent, now: float) -> dict[str, Any]:
    """One worker event (an error of the worker's own, a restart) as JSON, with the
    same time fields as ``error_entry``."""
    return {
        "kind": event.kind,
        "worker": event.worker,
        "attempt": event.attempt,
        "message": event.message,
        "traceback": event.traceback,
        "text": event.render(),
        "errorTime": int(event.time),
        "errorLapsedSecs": max(0, int(now - event.time)),
        "errorWorkerLogLink": logs_link(name),
    }


def logs_link(name: str) -> str:
    """Where the topology's log lines are served (``GET .../logs``)."""
    return f"/api/v1/topology/{quote(name, safe='')}/logs"


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def uptime_text(secs: float) -> str:
    """Storm's ``uptime`` style: ``1d 2h 3m 4s``."""
    secs = int(secs)
    days, secs = divmod(secs, 86400)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    parts = [f"{days}d"] if days else []
    if days or hours:
        parts.append(f"{hours}h")
    if days or hours or minutes:
        parts.append(f"{minutes}m")
    parts.append(f"{secs}s")
    return " ".join(parts)


def status(info: Mapping[str, Any]) -> str:
    """Storm's topology status: ACTIVE, INACTIVE or REBALANCING."""
    if info.get("rebalancing"):
        return "REBALANCING"
    return "ACTIVE" if info["active"] else "INACTIVE"


def executors(info: Mapping[str, Any], spec: Any) -> int:
    """The executors a component runs on now (a rebalance changes them)."""
    return info.get("executors", {}).get(spec.id, spec.parallelism)


def summary_entry(
    name: str, info: Mapping[str, Any], metrics: Mapping[str, ComponentMetrics]
) -> dict[str, Any]:
    """One topology of ``GET /api/v1/topology/summary``."""
    topology = info["topology"]
    user = {cid: m for cid, m in metrics.items() if cid in topology.components}
    return {
        "id": name,
        "encodedId": quote(name, safe=""),
        "name": name,
        "status": status(info),
        "uptime": uptime_text(info["uptime_secs"]),
        "uptimeSeconds": int(info["uptime_secs"]),
        "tasksTotal": sum(len(m["tasks"]) for m in metrics.values()),
        "executorsTotal": sum(executors(info, spec) for spec in topology.components.values())
        + (len(metrics[ACKER_COMPONENT]["tasks"]) if ACKER_COMPONENT in metrics else 0),
        "workersTotal": info.get("workers", 1),
        "emitted": sum(m["emitted"] for m in user.values()),
        "acked": sum(metrics[s.id]["acked"] for s in topology.spouts if s.id in metrics),
        "failed": sum(metrics[s.id]["failed"] for s in topology.spouts if s.id in metrics),
    }


def _common(m: Mapping[str, Any], rates: Mapping[str, float] | None) -> dict[str, Any]:
    return {
        "emitted": m["emitted"],
        "transferred": m["transferred"],
        "acked": m["acked"],
        "failed": m["failed"],
        "timedOut": m["timed_out"],
        "errors": m["errors"],
        "queued": m.get("queued", 0),
        "rates": {k: _r(v) for k, v in (rates or {}).items() if k != "capacity"},
    }


def _spout(m: Mapping[str, Any], rates: Mapping[str, float] | None) -> dict[str, Any]:
    return _common(m, rates) | {
        "completeLatency": _r(m.get("complete_latency_ms")),
        "completeLatencyP50": _r(m.get("complete_latency_p50_ms")),
        "completeLatencyP99": _r(m.get("complete_latency_p99_ms")),
        "pending": m.get("pending", 0),
    }


def _bolt(m: Mapping[str, Any], rates: Mapping[str, float] | None, basic: bool) -> dict:
    execute = _r(m.get("execute_latency_ms"), 4)
    return _common(m, rates) | {
        "executed": m["executed"],
        "capacity": _r((rates or {}).get("capacity", 0.0)),
        "executeLatency": execute,
        "executeLatencyP99": _r(m.get("execute_latency_p99_ms"), 4),
        # A BasicBolt acks as execute returns: its process latency is its execute
        # latency. A Bolt may ack later; that delay is not measured (None).
        "processLatency": execute if basic else None,
        "queueCapacity": m.get("queue_limit", 0),
    }


def window_task(m: Mapping[str, Any]) -> dict[str, Any]:
    """One task's ``window`` metric (tupletree.windowing's executor) in REST names."""
    return {
        "window": m.get("window"),
        "watermark": m.get("watermark_ms"),
        "held": m.get("held", 0),
        "cap": m.get("cap"),
        "lateTuples": m.get("late", 0),
        "windows": m.get("windows", 0),
        "failedWindows": m.get("failed_windows", 0),
        "refused": m.get("refused", 0),
        "lastWindowSize": m.get("last_window_size", 0),
        "sessions": m.get("sessions"),
    }


def window_summary(per_task: Mapping[Any, Any]) -> dict[str, Any] | None:
    """A windowed bolt's ``window`` metrics over its tasks (None for other bolts):
    counts summed; ``watermark`` the lowest of the tasks that have one (ms of event
    time: how far the bolt's slowest task has got), None while none has;
    ``lastWindowSize`` the largest; ``cap`` per task."""
    tasks = [window_task(m) for m in per_task.values() if isinstance(m, Mapping)]
    if not tasks:
        return None
    marks = [t["watermark"] for t in tasks if isinstance(t["watermark"], int | float)]
    sessions = [t["sessions"] for t in tasks if isinstance(t["sessions"], int)]
    out = {"window": tasks[0]["window"], "cap": tasks[0]["cap"], "tasks": len(tasks)}
    for key in ("held", "lateTuples", "windows", "failedWindows", "refused"):
        out[key] = sum(t[key] for t in tasks if isinstance(t[key], int | float))
    out["watermark"] = min(marks) if marks else None
    out["lastWindowSize"] = max(t["lastWindowSize"] for t in tasks)
    out["sessions"] = sum(sessions) if sessions else None
    return out


def _window(m: Mapping[str, Any]) -> dict[str, Any]:
    summary = window_summary(m.get("custom", {}).get("window", {}))
    return {} if summary is None else {"window": summary}


def _last_error(errors: Sequence[TaskError], cid: str) -> str:
    for err in reversed(errors):
        if err.component == cid:
            return err.error
    return ""


def edge_rates(
    graph: Mapping[str, Any], rates: Mapping[str, Mapping[str, float]]
) -> list[dict[str, Any]]:
    """The graph's edges with ``rate`` (tuples/s) and ``exact``.

    No counter is kept per stream on the emit path, so each edge takes the nearest
    figure that is exact for it: the target's executed rate when the edge is the
    target's only input; else the source's transferred rate when it is the source's
    only output; else the source's emitted rate, an estimate (``exact`` False)."""
    edges = graph["edges"]
    inputs: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for e in edges:
        inputs[e["target"]] = inputs.get(e["target"], 0) + 1
        outputs[e["source"]] = outputs.get(e["source"], 0) + 1
    out = []
    for e in edges:
        src, dst = rates.get(e["source"], {}), rates.get(e["target"], {})
        if inputs[e["target"]] == 1:
            rate, exact = dst.get("executed"), True
        elif outputs[e["source"]] == 1:
            rate, exact = src.get("transferred"), True
        else:
            rate, exact = src.get("emitted"), False
        out.append(dict(e) | {"rate": _r(rate, 1), "exact": exact})
    return out


def topology_page(
    name: str,
    info: Mapping[str, Any],
    metrics: Mapping[str, ComponentMetrics],
    rates: Mapping[str, Any],
    errors: Sequence[TaskError],
    events: Sequence[WorkerEvent],
    graph: Mapping[str, Any],
    now: float,
) -> dict[str, Any]:
    """``GET /api/v1/topology/<name>``: ``errors`` are the tasks' (the newest
    RECENT_ERRORS), ``workerEvents`` the workers' own errors and restarts (as many)."""
    topology = info["topology"]
    comp_rates = rates.get("components", {})
    spouts, bolts = [], []
    for spec in topology.components.values():
        m = metrics.get(spec.id)
        if m is None:
            continue
        base = {
            "executors": executors(info, spec),
            "tasks": spec.tasks,
            "lastError": _last_error(errors, spec.id),
        }
        if spec.is_spout:
            spouts.append(
                {"spoutId": spec.id, "encodedSpoutId": quote(spec.id, safe="")}
                | base
                | _spout(m, comp_rates.get(spec.id))
            )
        else:
            bolts.append(
                {"boltId": spec.id, "encodedBoltId": quote(spec.id, safe="")}
                | base
                | _bolt(m, comp_rates.get(spec.id), spec.is_basic)
                | _window(m)
            )
    acker = metrics.get(ACKER_COMPONENT)
    ackers = None
    if acker is not None:
        ackers = {
            "tasks": len(acker.get("tasks", {})),
            "pendingTrees": acker.get("pending", 0),
            "executed": acker["executed"],
            "timedOut": acker["timed_out"],
            "capacity": _r(comp_rates.get(ACKER_COMPONENT, {}).get("capacity", 0.0)),
            "executeLatency": _r(acker.get("execute_latency_ms"), 4),
            "queued": acker.get("queued", 0),
            "queueCapacity": acker.get("queue_limit", 0),
        }
    conf = info.get("conf", {})
    entry = summary_entry(name, info, metrics)
    return (
        entry
        | {
            "msgTimeout": conf.get("topology.message.timeout.secs"),
            "topologyStats": [
                {
                    "window": ":all-time",
                    "windowPretty": "All time",
                    "emitted": entry["emitted"],
                    "transferred": sum(s["transferred"] for s in spouts + bolts),
                    "completeLatency": _r(_complete_latency(topology, metrics)),
                    "acked": entry["acked"],
                    "failed": entry["failed"],
                }
            ],
            "spouts": spouts,
            "bolts": bolts,
            "ackers": ackers,
            "graph": {
                "nodes": graph["nodes"],
                "edges": edge_rates(graph, comp_rates),
            },
            "errors": [error_entry(name, e, now) for e in errors[-RECENT_ERRORS:]],
            "workerEvents": [event_entry(name, e, now) for e in events[-RECENT_ERRORS:]],
            "configuration": {k: _shown(k, v) for k, v in conf.items()},
        }
        | ({"trident": trident} if (trident := trident_view(metrics)) is not None else {})
    )


def _complete_latency(topology: Any, metrics: Mapping[str, Any]) -> float | None:
    """Storm's topology complete latency: the mean (ms) over every tree its spouts
    completed, each spout weighted by its trees; None until one completed."""
    count, total_ms = 0, 0.0
    for spec in topology.spouts:
        hist = metrics.get(spec.id, {}).get("complete_latency_hist")
        if hist:
            count += hist["count"]
            total_ms += hist["sum_ms"]
    return total_ms / count if count else None


def trident_view(metrics: Mapping[str, Any]) -> dict[str, Any] | None:
    """A Trident topology's progress, from its components' ``trident`` metric (None for
    a topology without one): per coordinator the current txid, the active batches with
    their attempt and phase, batches replayed, the last committed txid; per committing
    task its states' last committed txid; every spout task stuck on a batch it cannot
    emit, with the txid, partition and error."""
    coordinators: list[dict[str, Any]] = []
    committers: list[dict[str, Any]] = []
    stuck: list[dict[str, Any]] = []
    for cid in sorted(metrics):
        per_task = metrics[cid].get("custom", {}).get("trident")
        if not isinstance(per_task, Mapping):
            continue
        for task in sorted(per_task, key=str):
            view = per_task[task]
            if not isinstance(view, Mapping):
                continue
            if view.get("kind") == "coordinator":
                coordinators.append({"component": cid, "task": task} | dict(_plain(view)))
                continue
            for state, txid in (view.get("lastCommittedTxid") or {}).items():
                committers.append(
                    {"component": cid, "task": task, "state": state, "lastCommittedTxid": txid}
                )
            for spout, where in (view.get("stuck") or {}).items():
                stuck.append({"component": cid, "task": task, "spout": spout} | dict(_plain(where)))
    if not (coordinators or committers or stuck):
        return None
    return {"coordinators": coordinators, "committers": committers, "stuck": stuck}


def component_page(
    name: str,
    info: Mapping[str, Any],
    cid: str,
    metrics: Mapping[str, ComponentMetrics],
    rates: Mapping[str, Any],
    errors: Sequence[TaskError],
    now: float,
    workers: Mapping[int, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``GET /api/v1/topology/<name>/component/<id>``; ``cid`` must be in ``metrics``.
    Each task's ``worker``, ``host`` and ``port`` (Storm's) are those of the worker in
    ``workers`` (``cluster.worker_stats``) whose ``tasks`` hold it (None if none does)."""
    topology = info["topology"]
    where = {t: (i, w) for i, w in (workers or {}).items() for t in w.get("tasks", ())}
    spec = topology.components.get(cid)
    m = metrics[cid]
    is_spout = spec is not None and spec.is_spout
    basic = spec is not None and spec.is_basic
    task_rates = rates.get("tasks", {})
    executor_stats = []
    for task, t in sorted(m.get("tasks", {}).items()):
        tr = task_rates.get(task)
        index, worker = where.get(task, (None, {}))
        stats = {
            "id": f"[{task}-{task}]",
            "encodedId": f"[{task}-{task}]",
            "taskId": task,
            "worker": index,
            "host": worker.get("host"),
            "port": worker.get("port"),
        }
        tm = t | {"queued": t.get("queued", 0), "queue_limit": t.get("queue_limit", 0)}
        if is_spout:
            stats |= _spout(
                tm | {"complete_latency_p50_ms": None, "complete_latency_p99_ms": None}, tr
            )
        else:
            stats |= _bolt(tm | {"execute_latency_p99_ms": None}, tr, basic)
            window = m.get("custom", {}).get("window", {}).get(task)
            if isinstance(window, Mapping):
                stats["window"] = window_task(window)
        executor_stats.append(stats)
    mine = [e for e in errors if e.component == cid]
    kind = "spout" if is_spout else "bolt"
    comp_rates = rates.get("components", {}).get(cid)
    stats = _spout(m, comp_rates) if is_spout else _bolt(m, comp_rates, basic) | _window(m)
    inputs = (
        [
            {"component": s.source, "stream": s.stream, "grouping": s.grouping.kind}
            for s in spec.inputs
        ]
        if spec is not None
        else []
    )
    outputs = (
        [
            {"stream": stream, "fields": st.fields.to_list(), "direct": st.direct}
            for stream, st in spec.streams.items()
        ]
        if spec is not None
        else []
    )
    return {
        "id": cid,
        "name": name,
        "topologyId": name,
        "topologyStatus": status(info),
        "componentType": kind if cid != ACKER_COMPONENT else "bolt",
        "executors": executors(info, spec) if spec is not None else len(executor_stats),
        "tasks": len(executor_stats),
        "stats": stats,
        "executorStats": executor_stats,
        "inputStats": inputs,
        "outputStats": outputs,
        "componentErrors": [error_entry(name, e, now) for e in mine[-RECENT_ERRORS:]],
        "custom": {
            k: {str(t): _plain(v) for t, v in per.items()} for k, per in m.get("custom", {}).items()
        },
    }


def _shown(key: Any, value: Any) -> Any:
    """A config value as the web view shows it: masked under a secret's name at any
    depth, credentials redacted from addresses."""
    if value is not None and is_secret_key(str(key)):
        return MASK
    if isinstance(value, str):
        return redact(value) if ("@" in value or "=" in value) else value
    if isinstance(value, Mapping):
        return {str(k): _shown(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(key, v) for v in value]
    return _plain(value)


def _plain(value: Any) -> Any:
    """A JSON-safe rendering of a config or metric value (repr for anything else;
    None for NaN and infinities, which JSON cannot carry)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def plain(value: Any) -> Any:
    """``_plain`` for other modules (timed-out trees, worker stats)."""
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return _plain(dataclasses.asdict(value))
    if hasattr(value, "_asdict"):
        return _plain(value._asdict())
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return _plain(vars(value))
    return _plain(value)


def timed_out_entry(tree: Any) -> Any:
    """One of ``cluster.timed_out(name)`` as JSON: plain values, and a 64-bit ``root`` id
    as 16 hex digits (a JavaScript number would round it)."""
    entry = plain(tree)
    if isinstance(entry, dict) and isinstance(entry.get("root"), int):
        entry["root"] = f"{entry['root']:016x}"
    return entry
