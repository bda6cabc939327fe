"""tupletree benchmarks, one command: ``python bench/run.py [--compare] [--quick]``.

Prints:
- tracked word count on LocalCluster (1 acker, 10-word sentences, max spout pending
  1000, BasicBolt split and count): sentences/s, tuples/s, p50/p99 complete latency,
  peak RSS;
- with --compare, the bare-loop baseline in the same run, and the ratio;
- acker: tree updates/s through the acker task, bytes per pending tree (tracemalloc
  over 1M pending trees);
- complete latency of a lone tuple (max spout pending 1), and at 80% of peak rate.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import baseline, wordcount
from tupletree import LocalCluster, compiled
from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import ACK, INIT
from tupletree.runtime.executors import AckerExecutor


def run_wordcount(total: int, rate: float | None = None, max_pending: int = 1000) -> dict:
    """Run the tracked word count to completion on a real-time LocalCluster."""
    with LocalCluster() as cluster:
        start = time.perf_counter()
        cluster.submit_topology(
            "bench", wordcount.conf(max_pending), wordcount.topology(total, rate)
        )
        elapsed, metrics = wordcount.run_to_completion(cluster, "bench", total, start)
    result = wordcount.figures(total, elapsed, metrics)
    if result["failed"]:
        raise SystemExit(f"benchmark: {result['failed']} sentences failed")
    return result


def acker_updates(trees: int) -> float:
    """Messages/s through AckerExecutor.run_batch: an init and 11 acks per tree (the
    uncombined word-count pattern), in a shuffled-but-valid order."""
    ids = IdGenerator(3)
    msgs = []
    for _ in range(trees):
        root = ids.next_id()
        edges = [ids.next_id() for _ in range(11)]
        init = edges[0]
        split_ack = edges[0]
        for e in edges[1:]:
            split_ack ^= e
        msgs.append((INIT, root, init, 1))
        msgs.append((ACK, root, split_ack, 0))
        msgs.extend((ACK, root, e, 0) for e in edges[1:])
    inboxes: dict = {1: _Sink()}
    acker = AckerExecutor(2, lambda *a: None, inboxes, 2**30)
    acker.inbox.extend(msgs)
    gc.collect()
    start = time.perf_counter()
    while acker.inbox:
        acker.run_batch(4096)
    elapsed = time.perf_counter() - start
    assert inboxes[1].n == trees
    return len(msgs) / elapsed


class _Sink:
    def __init__(self) -> None:
        self.n = 0

    def append(self, item: object) -> None:
        self.n += 1


def bytes_per_pending_tree(trees: int) -> float:
    ids = IdGenerator(5)
    roots = [ids.next_id() for _ in range(trees)]
    vals = [ids.next_id() for _ in range(trees)]
    gc.collect()
    tracemalloc.start()
    ledger = AckerLedger(high_water=2**31)
    before = tracemalloc.get_traced_memory()[0]
    for root, val in zip(roots, vals, strict=True):
        ledger.init(root, val, 1)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(ledger) == trees
    # Roots and values are counted: the ledger keeps its own references to them.
    return (after - before) / trees


def fmt(r: dict) -> str:
    return (
        f"{r['sentences_per_s']:>10,.0f} sentences/s  {r['tuples_per_s']:>11,.0f} tuples/s  "
        f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true", help="also run the bare loop")
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    parser.add_argument("--only", choices=["wordcount", "acker", "latency"], default=None)
    parser.add_argument(
        "--spark", action="store_true", help="also run word count on SparkCluster (1, 2 workers)"
    )
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    total = 300_000 // scale
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {compiled.describe()}")
    peak = None
    if args.only in (None, "wordcount"):
        runs = [run_wordcount(total) for _ in range(3)]
        best = max(runs, key=lambda r: r["sentences_per_s"])
        peak = best["sentences_per_s"]
        print(f"word count (LocalCluster, 1 acker, pending 1000), best of 3 x {total:,}:")
        print(f"  tupletree  {fmt(best)}")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS   {rss:,.0f} MiB")
        if args.compare:
            base = max(baseline.run(total) for _ in range(3))
            print(f"  bare loop  {base:>10,.0f} sentences/s")
            print(f"  ratio      tupletree / bare loop = {peak / base:.2f}")
    if args.only in (None, "acker"):
        ups = acker_updates(200_000 // scale)
        print(f"acker: {ups:,.0f} tree updates/s")
        n = 1_000_000 // scale
        print(f"acker: {bytes_per_pending_tree(n):.0f} bytes per pending tree ({n:,} trees)")
    if args.only in (None, "latency"):
        lone = run_wordcount(5_000 // scale, max_pending=1)
        print(
            f"latency, lone tuple (pending 1):    p50 {lone['p50_ms']:.2f} ms  "
            f"p99 {lone['p99_ms']:.2f} ms"
        )
        if peak is None:
            peak = run_wordcount(total)["sentences_per_s"]
        rate = 0.8 * peak
        loaded = run_wordcount(int(rate * 3), rate=rate)
        print(
            f"latency at 80% of peak ({rate:,.0f}/s): p50 {loaded['p50_ms']:.2f} ms  "
            f"p99 {loaded['p99_ms']:.2f} ms  (achieved {loaded['sentences_per_s']:,.0f}/s)"
        )
    if args.spark:
        from bench import spark

        spark.main(1_000_000 // scale, peak, fmt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
