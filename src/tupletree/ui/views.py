"""The REST answers, shaped as Storm UI's (``/api/v1/...``, camelCase field names), from
plain values: a cluster's metrics, its errors, the history's rates.

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

import re
from collections.abc import Mapping
from typing import Any

from tupletree.reliability.protocol import ACKER_COMPONENT

ERROR_LINE = re.compile(
    r"^(?:worker (?P<worker>\d+)(?: \(attempt \d+\))?: )?"
    r"(?P<component>\S+)\[task (?P<task>\d+)\] (?P<where>[^:]+): (?P<error>.*)$"
)
RECENT_ERRORS = 50


def parse_error(text: str) -> dict[str, Any]:
    """``{"component", "task", "where", "error", "traceback", "worker"}`` from one of
    ``cluster.errors(name)``; an error that names no task has ``component`` None."""
    first, _, rest = text.partition("\n")
    m = ERROR_LINE.match(first)
    if m is None:
        return {
            "component": None,
            "task": None,
            "where": None,
            "error": first,
            "traceback": rest,
            "worker": None,
        }
    return {
        "component": m["component"],
        "task": int(m["task"]),
        "where": m["where"],
        "error": m["error"],
        "traceback": rest,
        "worker": int(m["worker"]) if m["worker"] else None,
    }


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


def summary_entry(name: str, info: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict:
    """One topology of ``GET /api/v1/topology/summary``."""
    topology = info["topology"]
    user = {cid: m for cid, m in metrics.items() if cid in topology.components}
    return {
        "id": name,
        "encodedId": name,
        "name": name,
        "status": status(info),
        "uptime": uptime_text(info["uptime_secs"]),
        "uptimeSeconds": int(info["uptime_secs"]),
        "tasksTotal": sum(len(m.get("tasks", {})) for m in metrics.values()),
        "executorsTotal": sum(executors(info, spec) for spec in topology.components.values())
        + len(metrics.get(ACKER_COMPONENT, {}).get("tasks", {})),
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


def _last_error(errors: list[dict[str, Any]], cid: str) -> str:
    for err in reversed(errors):
        if err["component"] == cid:
            return err["error"]
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
    metrics: Mapping[str, Any],
    rates: Mapping[str, Any],
    errors: list[str],
    graph: Mapping[str, Any],
) -> dict[str, Any]:
    """``GET /api/v1/topology/<name>``."""
    topology = info["topology"]
    comp_rates = rates.get("components", {})
    parsed = [parse_error(e) for e in errors]
    spouts, bolts = [], []
    for spec in topology.components.values():
        m = metrics.get(spec.id)
        if m is None:
            continue
        base = {
            "executors": executors(info, spec),
            "tasks": spec.tasks,
            "lastError": _last_error(parsed, spec.id),
        }
        if spec.is_spout:
            spouts.append(
                {"spoutId": spec.id, "encodedSpoutId": spec.id}
                | base
                | _spout(m, comp_rates.get(spec.id))
            )
        else:
            bolts.append(
                {"boltId": spec.id, "encodedBoltId": spec.id}
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
    return entry | {
        "msgTimeout": conf.get("topology.message.timeout.secs"),
        "topologyStats": [
            {
                "window": ":all-time",
                "windowPretty": "All time",
                "emitted": entry["emitted"],
                "transferred": sum(s["transferred"] for s in spouts + bolts),
                "completeLatency": _r(
                    max((s["completeLatency"] or 0.0 for s in spouts), default=None)
                ),
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
        "errors": parsed[-RECENT_ERRORS:],
        "configuration": {k: _plain(v) for k, v in conf.items()},
    }


def component_page(
    name: str,
    info: Mapping[str, Any],
    cid: str,
    metrics: Mapping[str, Any],
    rates: Mapping[str, Any],
    errors: list[str],
) -> dict[str, Any]:
    """``GET /api/v1/topology/<name>/component/<id>``; ``cid`` must be in ``metrics``."""
    topology = info["topology"]
    spec = topology.components.get(cid)
    m = metrics[cid]
    is_spout = spec is not None and spec.is_spout
    basic = spec is not None and spec.is_basic
    task_rates = rates.get("tasks", {})
    executor_stats = []
    for task, t in sorted(m.get("tasks", {}).items()):
        tr = task_rates.get(task)
        stats = {"id": f"[{task}-{task}]", "encodedId": f"[{task}-{task}]", "taskId": task}
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
    parsed = [e for e in (parse_error(x) for x in errors) if e["component"] == cid]
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
        "componentErrors": [
            {
                "error": e["error"],
                "where": e["where"],
                "task": e["task"],
                "traceback": e["traceback"],
            }
            for e in parsed[-RECENT_ERRORS:]
        ],
        "custom": {
            k: {str(t): _plain(v) for t, v in per.items()} for k, per in m.get("custom", {}).items()
        },
    }


def _plain(value: Any) -> Any:
    """A JSON-safe rendering of a config or metric value (repr for anything else)."""
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
