"""Flood bench, one command: ``python bench/flood.py [--phase-secs S] [--limit N]``.

A driver as ``tupletree run`` makes one (a real-time LocalCluster with its web view and
DRPC server, a word count running, a DRPC topology serving ``exclaim``) under a hostile
neighbour on this machine: a second process that, for one phase, at once

- opens ``--silent`` connections (1,100) to the web view and 600 to the DRPC server and
  sends nothing, reconnecting whatever is closed (the issue's exhaustion);
- keeps ``--slow`` connections (600) to the DRPC server sending half a head, then a byte
  every second, reconnecting whatever is closed (slowloris);
- scrapes ``/metrics`` from 8 connections without pause (the scrape storm).

Loopback only, bounded in count (the numbers above) and time (three phases of
``--phase-secs``); the attacker stops by itself. The driver's open-file limit is set to
``--limit`` (1024, a common default) first, as in the issue; with ``--fixed`` the hard
limit too, so that the services must fit under it instead of raising it.

Printed per phase (before, during, after): the driver's descriptors and resident memory
(the highest seen), the word count's throughput (trees acked per second), DRPC calls
(answered / made, median latency) and web view reads (answered / made), made by this
process every half second with a 5 s timeout each. Every figure comes from this one run:
compare phases, not machines. notes/performance.md has the figures and the command.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wordcount import conf, topology

from tupletree import BasicBolt, LocalCluster
from tupletree.drpc import DRPCClient, LinearDRPCTopologyBuilder

ATTACKER = textwrap.dedent(
    r"""
    import asyncio, resource, sys, time
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    silent, slow, secs = (int(a) for a in sys.argv[1:4])
    ui, drpc = (int(p) for p in sys.stdin.readline().split())  # the go: where to
    end = time.monotonic() + secs
    counts = {"connected": 0, "scrapes": 0}

    async def hold(port, head, trickle):
        while time.monotonic() < end:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(0.2)
                continue
            counts["connected"] += 1
            try:
                if head:
                    w.write(head)
                while time.monotonic() < end:
                    try:
                        data = await asyncio.wait_for(r.read(4096), 1.0)
                        if not data:
                            break  # closed by the server: come back
                    except asyncio.TimeoutError:
                        if trickle:
                            w.write(b"X")
            except OSError:
                pass
            finally:
                w.close()
            await asyncio.sleep(0.05)

    async def scrape(port):
        while time.monotonic() < end:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
                w.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                await asyncio.wait_for(r.read(), 5)
                w.close()
                counts["scrapes"] += 1
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(0.05)

    async def main():
        half = b"POST /drpc/exclaim HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Len"
        tasks = [hold(ui, b"", False) for _ in range(silent)]
        tasks += [hold(drpc, b"", False) for _ in range(silent * 6 // 11)]
        tasks += [hold(drpc, half, True) for _ in range(slow)]
        tasks += [scrape(ui) for _ in range(8)]
        await asyncio.gather(*tasks)
        print(f"attacker: {counts['connected']} connections made, "
              f"{counts['scrapes']} scrapes", flush=True)

    asyncio.run(main())
    """
)


class Exclaim(BasicBolt):
    outputs = ["id", "result"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], tup[1] + "!"])


def descriptors() -> int:
    """Open descriptors; the limit itself when not even /proc can be opened (EMFILE)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def sample(cluster: Any, secs: float, out: dict[str, Any]) -> None:
    """Probe the driver every half second for ``secs``: descriptors, memory, a DRPC
    call and a web view read (5 s timeout each), the word count's acks."""
    server = cluster.drpc_server
    acked0 = cluster.metrics("wc")["sentences"]["acked"]
    start = time.monotonic()
    end = start + secs
    while time.monotonic() < end:
        out["fds"] = max(out.get("fds", 0), descriptors())
        out["rss"] = max(out.get("rss", 0.0), rss_mb())
        t = time.monotonic()
        try:
            ok = DRPCClient("127.0.0.1", server.port, timeout=5).execute("exclaim", "a") == "a!"
        except Exception as exc:
            ok = False
            out.setdefault("drpc_error", f"{type(exc).__name__}: {str(exc)[:120]}")
        out.setdefault("drpc", []).append((ok, time.monotonic() - t))
        try:
            with urllib.request.urlopen(cluster.ui_url + "/api/v1/topology/summary", timeout=5):
                ok = True
        except Exception as exc:
            ok = False
            out.setdefault("ui_error", f"{type(exc).__name__}: {str(exc)[:120]}")
        out.setdefault("ui", []).append(ok)
        time.sleep(max(0.0, 0.5 - (time.monotonic() - t)))
    elapsed = time.monotonic() - start
    out["rate"] = (cluster.metrics("wc")["sentences"]["acked"] - acked0) / elapsed


def report(name: str, out: dict[str, Any]) -> str:
    calls = out.get("drpc", [])
    answered = [secs for ok, secs in calls if ok]
    p50 = f"{statistics.median(answered) * 1000:7.1f}" if answered else "      -"
    ui = out.get("ui", [])
    return (
        f"{name:<7} fds {out.get('fds', 0):>5}  rss {out.get('rss', 0):6.0f} MB  "
        f"throughput {out.get('rate', 0):>8,.0f} trees/s  "
        f"drpc {len(answered):>3}/{len(calls):<3} p50 {p50} ms  "
        f"ui {sum(ui):>3}/{len(ui):<3}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase-secs", type=float, default=10.0)
    parser.add_argument("--limit", type=int, default=1024, help="the driver's open-file limit")
    parser.add_argument(
        "--fixed", action="store_true", help="the hard limit too: the driver cannot raise it"
    )
    parser.add_argument("--silent", type=int, default=1100)
    parser.add_argument("--slow", type=int, default=600)
    args = parser.parse_args()
    # The attacker first, so that it keeps this machine's limits whatever the driver's.
    attacker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            ATTACKER,
            str(args.silent),
            str(args.slow),
            str(int(args.phase_secs + 2)),
        ],
        stdin=subprocess.PIPE,
        text=True,
    )
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = min(args.limit, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit if args.fixed else hard))
    with LocalCluster(drpc_port=0, ui_port=0) as cluster:
        cluster.submit_topology("wc", conf(), topology(10**9))
        builder = LinearDRPCTopologyBuilder("exclaim")
        builder.add_bolt(Exclaim())
        cluster.submit_topology("exclaim", {}, builder.create_remote_topology())
        DRPCClient("127.0.0.1", cluster.drpc_server.port, timeout=60).execute("exclaim", "warm")
        time.sleep(2.0)  # the word count at speed
        ui_port = int(cluster.ui_url.rsplit(":", 1)[1])
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        print(
            f"driver: open-file limit {limit}; web view at {cluster.ui_url}, DRPC on port "
            f"{cluster.drpc_server.port}; attacker: {args.silent} silent connections to the "
            f"web view, {args.silent * 6 // 11} to DRPC, {args.slow} slow heads to DRPC, 8 "
            f"scrapers; {args.phase_secs:g} s per phase",
            flush=True,
        )
        phases: dict[str, dict[str, Any]] = {"before": {}, "during": {}, "after": {}}
        sample(cluster, args.phase_secs, phases["before"])
        print(report("before", phases["before"]), flush=True)
        assert attacker.stdin is not None
        attacker.stdin.write(f"{ui_port} {cluster.drpc_server.port}\n")
        attacker.stdin.flush()
        time.sleep(2.0)  # the flood at full height
        sample(cluster, args.phase_secs, phases["during"])
        print(report("during", phases["during"]), flush=True)
        attacker.wait(args.phase_secs + 60)
        sample(cluster, args.phase_secs, phases["after"])
        print(report("after", phases["after"]), flush=True)
        for name, out in phases.items():
            for key in ("drpc_error", "ui_error"):
                if key in out:
                    print(f"  {name}: first {key.replace('_', ' ')}: {out[key]}")
        threading.Event().wait(0.1)


if __name__ == "__main__":
    main()
