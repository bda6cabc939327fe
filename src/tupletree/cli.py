"""The ``tupletree`` command.

    tupletree run FILE [--local | --master URL] [--workers N] [--duration SECS]
    tupletree drpc FUNCTION ARGS [--host H] [--port P]

``run`` loads a Python file that defines ``topology()`` (returning a Topology) and,
optionally, ``CONF`` (a config dict) and ``report(metrics) -> str`` (printed at the
end), submits it, shows a live progress line and ends with a summary once the topology
is quiet (no pending trees and nothing emitted for a moment) or ``--duration`` passed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

QUIET_SECS = 1.0


def load_module(path: str) -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"tupletree run: no such file: {path}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered under its own name so pickled components can be found again in
    # worker processes (the file's directory is put on sys.path for them too).
    sys.modules[file.stem] = module
    sys.path.insert(0, str(file.parent.resolve()))
    spec.loader.exec_module(module)
    if not callable(getattr(module, "topology", None)):
        raise SystemExit(f"tupletree run: {path} must define topology() returning a Topology")
    return module


def _totals(metrics: dict[str, dict[str, Any]], spouts: list[str]) -> dict[str, float]:
    out = {"emitted": 0, "acked": 0, "failed": 0, "pending": 0}
    for cid in spouts:
        m = metrics.get(cid, {})
        for key in out:
            out[key] += m.get(key, 0)
    return out


def watch(
    cluster: Any, name: str, spouts: list[str], duration: float | None
) -> tuple[dict, float | None]:
    """Print a progress line until the topology is quiet or ``duration`` passed.

    Returns the last metrics and the ack rate over the observed window (None if the
    run finished before two observations): work starts before submit returns, so the
    time since submit would overstate the rate.
    """
    interactive = sys.stdout.isatty()
    start = last_print = last_change = time.monotonic()
    last_emitted = -1
    last_acked = 0
    first: tuple[float, float] | None = None  # (time, acked) when first seen working
    end: tuple[float, float] | None = None
    while True:
        time.sleep(0.2)
        now = time.monotonic()
        metrics = cluster.metrics(name)
        t = _totals(metrics, spouts)
        if t["emitted"] != last_emitted:
            last_emitted, last_change = t["emitted"], now
            end = (now, t["acked"])
            if first is None and t["emitted"]:
                first = (now, t["acked"])
        if interactive or now - last_print >= 2.0:
            rate = (t["acked"] - last_acked) / max(now - last_print, 1e-9)
            line = (
                f"acked {t['acked']:>9,}  failed {t['failed']:>6,}  "
                f"pending {t['pending']:>6,}  {rate:>9,.0f} trees/s"
            )
            print(
                ("\r" + line) if interactive else line,
                end="" if interactive else "\n",
                flush=True,
            )
            last_print, last_acked = now, t["acked"]
        if duration is not None and now - start >= duration:
            end = (now, t["acked"])
            break
        if duration is None and t["pending"] == 0 and now - last_change >= QUIET_SECS:
            break
    if interactive:
        print()
    rate = None
    if first is not None and end is not None and end[0] > first[0]:
        rate = (end[1] - first[1]) / (end[0] - first[0])
    return metrics, rate


def summary(metrics: dict[str, dict[str, Any]], spouts: list[str], rate: float | None) -> str:
    t = _totals(metrics, spouts)
    speed = f", {rate:,.0f} trees/s" if rate is not None else ""
    lines = [f"done: {t['acked']:,} trees acked, {t['failed']:,} failed{speed}"]
    lat = [metrics[s].get("complete_latency_p50_ms") for s in spouts]
    p99 = [metrics[s].get("complete_latency_p99_ms") for s in spouts]
    if any(v is not None for v in lat):
        lines.append(
            f"complete latency p50 {max(v or 0 for v in lat):.2f} ms, "
            f"p99 {max(v or 0 for v in p99):.2f} ms"
        )
    for cid, m in sorted(metrics.items()):
        lines.append(
            f"  {cid:<14} emitted {m['emitted']:>9,}  executed {m['executed']:>9,}  "
            f"acked {m['acked']:>9,}  failed {m['failed']:>6,}  errors {m['errors']:>4,}"
        )
    return "\n".join(lines)


def restarts_line(restarts: dict[int, int]) -> str:
    """The summary's line on worker restarts, e.g. ``worker restarts: 3 (worker 1: 3)``."""
    total = sum(restarts.values())
    if not total:
        return "worker restarts: 0"
    each = ", ".join(f"worker {w}: {n}" for w, n in sorted(restarts.items()) if n)
    return f"worker restarts: {total} ({each}); why: errors reported below"


def cmd_run(args: argparse.Namespace) -> int:
    from tupletree.config import Config
    from tupletree.spark.errors import SparkJobFailed

    module = load_module(args.file)
    topology = module.topology()
    conf = dict(getattr(module, "CONF", {}) or {})
    if args.workers is not None:
        conf[Config.TOPOLOGY_WORKERS] = args.workers
    name = Path(args.file).stem.replace("_", "-")
    spouts = [s.id for s in topology.spouts]
    if args.local:
        from tupletree.local import LocalCluster

        cluster: Any = LocalCluster()
        where = "LocalCluster (in-process)"
    else:
        from tupletree.spark.cluster import SparkCluster

        cluster = SparkCluster(master=args.master)
        where = f"Spark ({cluster.master}), {conf.get(Config.TOPOLOGY_WORKERS, 1)} worker(s)"
    with cluster:
        print(f"tupletree: running {name} on {where}", flush=True)
        started = time.monotonic()
        cluster.submit_topology(name, conf, topology)
        print(f"tupletree: {name} started in {time.monotonic() - started:.1f} s", flush=True)
        try:
            metrics, rate = watch(cluster, name, spouts, args.duration)
        except SparkJobFailed as exc:  # the workers' Spark job is gone
            if sys.stdout.isatty():
                print()
            print(f"tupletree: {name} stopped: {exc}", file=sys.stderr)
            for text in cluster.errors(name)[:1]:
                print(f"the first error reported:\n{text}", file=sys.stderr)
            cluster.kill_topology(name)
            return 1
        print(summary(metrics, spouts, rate))
        restarts = getattr(cluster, "worker_restarts", None)
        if restarts is not None:
            print(restarts_line(restarts(name)))
        report = getattr(module, "report", None)
        if callable(report):
            print(report(metrics))
        errors = cluster.errors(name)
        if errors:
            print(f"{len(errors)} error(s) reported; the first:\n{errors[0]}", file=sys.stderr)
        cluster.kill_topology(name)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tupletree", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a topology file and report on it")
    run.add_argument("file", help="a .py file defining topology() and optionally CONF, report()")
    run.add_argument("--local", action="store_true", help="use the in-process LocalCluster")
    run.add_argument("--master", default=None, help="Spark master (default: local[*])")
    run.add_argument("--workers", type=int, default=None, help="topology.workers")
    run.add_argument("--duration", type=float, default=None, help="stop after SECS")
    run.set_defaults(func=cmd_run)
    # Listed for --help only: "drpc" is handed to the DRPC CLI below, before parsing.
    sub.add_parser("drpc", help="call a DRPC function: tupletree drpc FUNCTION ARGS")
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "drpc":
        # Options may come before the function name: hand everything to the DRPC CLI.
        from tupletree.drpc import cli_main

        return cli_main(argv[1:])
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
