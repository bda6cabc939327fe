"""DRPC benchmark, one command: ``python bench/drpc_bench.py [--duration S] [--clients N]``.

A 3-bolt linear DRPC topology on a real-time LocalCluster, Storm's coordination shape:

    bolt0  SplitWords      [request, "w1 ... w10"] -> [request, word] x 10   (2 tasks)
    bolt1  PartialCount    shuffle; FinishedCallback emits [request, count]  (2 tasks)
    bolt2  CountAggregator fields(request); FinishedCallback emits the total (2 tasks)

Client threads call it back to back for ``--duration`` seconds; every answer is checked.
Prints requests/s and p50/p99 request latency (as the caller sees it), for:

- ``local``:  LocalDRPC, in-process (spout and ReturnResults use the request book);
- ``http``:   over HTTP as deployed: a DRPC server process (``python -m tupletree.drpc``),
              a topology process (LocalCluster, create_remote_topology) and the client
              threads in this process;
- ``http-1p``: the same HTTP path with server, topology and clients in one process,
              where every network hop also waits for the GIL (Python's convoy effect);

each with 1 client (a lone request's latency) and with ``--clients`` concurrent ones.
For ``http`` it also prints the CPU time the server process and the topology process
spent per request (from /proc, Linux only): on a shared machine these move far less
than the wall-clock figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupletree import BasicBolt, Bolt, LocalCluster
from tupletree.drpc import (
    DRPCClient,
    DRPCServer,
    FinishedCallback,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
)

WORDS_PER_REQUEST = 10
ARGS = [" ".join(f"w{(i + j) % 50}" for j in range(WORDS_PER_REQUEST)) for i in range(100)]


class SplitWords(BasicBolt):
    outputs = ["request", "word"]

    def execute(self, tup: Any, collector: Any) -> None:
        request = tup[0]
        for word in tup[1].split():
            collector.emit([request, word])


class PartialCount(Bolt, FinishedCallback):
    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


class CountAggregator(Bolt, FinishedCallback):
    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + tup[1]
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


def builder() -> LinearDRPCTopologyBuilder:
    b = LinearDRPCTopologyBuilder("count")
    b.add_bolt(SplitWords(), 2)
    b.add_bolt(PartialCount(), 2).shuffle_grouping()
    b.add_bolt(CountAggregator(), 2).fields_grouping(["request"])
    return b


def cpu_secs(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (nan without /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(
    call: Callable[[str, str], str],
    clients: int,
    duration: float,
    watch: dict[str, int] | None = None,
) -> dict[str, float]:
    """``clients`` threads calling back to back for ``duration`` s; latencies in ms;
    for each process in ``watch`` (name -> pid), its CPU microseconds per request."""
    for arg in ARGS[:20]:  # warm up
        call("count", arg)
    cpu_before = {name: cpu_secs(pid) for name, pid in (watch or {}).items()}
    want = str(WORDS_PER_REQUEST)
    stop_at = time.perf_counter() + duration

    def client(seed: int) -> list[float]:
        lat: list[float] = []
        i = seed
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            got = call("count", ARGS[i % len(ARGS)])
            lat.append(time.perf_counter() - start)
            if got != want:
                raise SystemExit(f"drpc_bench: wrong answer {got!r}, expected {want!r}")
            i += 7
        return lat

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        per_client = list(pool.map(client, range(clients)))
    elapsed = time.perf_counter() - start
    lat = sorted(x for part in per_client for x in part)
    out = {
        "requests": len(lat),
        "rps": len(lat) / elapsed,
        "p50": lat[len(lat) // 2] * 1e3,
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
    }
    for name, pid in (watch or {}).items():
        out[f"cpu {name}"] = (cpu_secs(pid) - cpu_before[name]) / len(lat) * 1e6
    return out


def run(mode: str, clients: int, duration: float) -> dict[str, float]:
    if mode == "http":
        return run_split(clients, duration)
    with LocalCluster() as cluster:
        if mode == "local":
            with LocalDRPC() as drpc:
                cluster.submit_topology("bench", {}, builder().create_local_topology(drpc))
                return drive(drpc.execute, clients, duration)
        with DRPCServer(port=0) as server:
            cluster.submit_topology(
                "bench", remote_conf(server.port), builder().create_remote_topology()
            )
            client = DRPCClient(server.host, server.port)
            try:
                return drive(client.execute, clients, duration)
            finally:  # stop the spouts before their server
                cluster.kill_topology("bench")


def remote_conf(port: int) -> dict[str, Any]:
    return {"drpc.servers": ["127.0.0.1"], "drpc.http.port": port}


def run_split(clients: int, duration: float) -> dict[str, float]:
    """Server, topology and clients in three processes, as on a real cluster."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tupletree.drpc", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    topology = None
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip().rsplit(":", 1)[1])
        topology = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve-topology", str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert topology.stdout is not None
        if topology.stdout.readline().strip() != "ready":
            raise SystemExit("drpc_bench: the topology process did not start")
        watch = {"server": server.pid, "topology": topology.pid}
        return drive(DRPCClient("127.0.0.1", port).execute, clients, duration, watch)
    finally:
        for proc in (topology, server):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def serve_topology(port: int) -> int:
    """The topology process of ``run_split``: runs until its stdin closes."""
    with LocalCluster() as cluster:
        cluster.submit_topology("bench", remote_conf(port), builder().create_remote_topology())
        print("ready", flush=True)
        sys.stdin.read()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument(
        "--mode", choices=["local", "http", "http-1p", "all"], default="all", help="default: all"
    )
    parser.add_argument("--serve-topology", type=int, metavar="PORT", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.serve_topology:
        return serve_topology(opts.serve_topology)
    modes = ["local", "http", "http-1p"] if opts.mode == "all" else [opts.mode]
    print(
        f"DRPC: 3-bolt linear topology ({WORDS_PER_REQUEST} words -> partial counts -> "
        f"total), LocalCluster, {os.cpu_count()} CPUs, {opts.duration:g} s per run"
    )
    header = ("mode", "clients", "requests/s", "p50 ms", "p99 ms", "requests")
    print("{:<8} {:>7} {:>11} {:>8} {:>8} {:>9}".format(*header))
    for mode in modes:
        for clients in (1, opts.clients):
            r = run(mode, clients, opts.duration)
            cpu = "".join(
                f"  {key}: {value:,.0f} us/request" for key, value in r.items() if key[:4] == "cpu "
            )
            print(
                f"{mode:<8} {clients:>7} {r['rps']:>11,.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} "
                f"{r['requests']:>9,}{cpu}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
