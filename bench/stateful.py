"""Stateful word count against the plain one, in one run: ``python bench/stateful.py``.

Both on a real-time LocalCluster, the benchmark's sentences (10 words each), split by a
BasicBolt, counted by one task:

- plain: bench/wordcount.py's topology (the count a BasicBolt with a dict), max spout
  pending 1000, as bench/run.py runs it;
- stateful: the count a StatefulBolt putting into its KeyValueState (memory provider,
  Storm's default), a checkpoint every second (topology.state.checkpoint.interval.ms
  1000); the split is wrapped in a checkpoint forwarder, the checkpoint spout added.
  A stateful bolt holds its inputs' acks until the checkpoint commits, so a spout can
  have at most max pending sentences per checkpoint interval: the stateful run uses a
  max pending of 50,000, above what a second of sentences needs, so the cap is not what
  is measured (with 1000 it would be about 1000 sentences/s, by construction).

Runs alternate plain / stateful ``--rounds`` times and print each, then the median
ratio. ``--provider sqlite`` (a file in a temporary directory) measures a durable store.
``--gc worker`` runs both with the cyclic GC as tupletree's worker processes tune it
(distributed/worker_main.worker_gc: the young generation collected every 10,000
allocations instead of 700); ``default`` (the default) leaves it as LocalCluster does.
The stateful run keeps a checkpoint interval's trees open (the ackers' records, the
spout's pending entries, deep queues): at the default threshold it spends about a
fifth of its time in the GC, the plain run almost none (notes/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import wordcount
from tupletree import Config, LocalCluster, TopologyBuilder
from tupletree.state import StatefulBolt

STATEFUL_MAX_PENDING = 50_000


class StatefulCount(StatefulBolt):
    """bench/wordcount.py's Count, with its counts in the checkpointed state."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.ack = collector.ack

    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tup: Any) -> None:
        word = tup.values[0]
        counts = self.counts
        counts.put(word, counts.get(word, 0) + 1)
        self.ack(tup)


def stateful_topology(total: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", wordcount.SentenceSpout(total))
    b.set_bolt("split", wordcount.Split()).shuffle_grouping("sentences")
    b.set_bolt("count", StatefulCount()).fields_grouping("split", ["word"])
    return b.create_topology()


def run(total: int, stateful: bool, provider: dict[str, Any]) -> dict[str, Any]:
    if stateful:
        conf = {
            **wordcount.conf(STATEFUL_MAX_PENDING),
            Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 1000,
            **provider,
        }
        topology = stateful_topology(total)
    else:
        conf, topology = wordcount.conf(), wordcount.topology(total)
    with LocalCluster() as cluster:
        start = time.perf_counter()
        cluster.submit_topology("bench", conf, topology)
        elapsed, metrics = wordcount.run_to_completion(cluster, "bench", total, start)
        checkpoints = metrics.get("$checkpointspout", {}).get("acked", 0)
    result = wordcount.figures(total, elapsed, metrics)
    if result["failed"]:
        raise SystemExit(f"benchmark: {result['failed']} sentences failed")
    result["checkpoint_steps"] = checkpoints
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--provider", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--gc", choices=["default", "worker"], default="default")
    args = parser.parse_args()
    if args.gc == "worker":
        from tupletree.distributed.worker_main import worker_gc

        tuned: Any = worker_gc()
    else:
        tuned = contextlib.nullcontext()
    with tempfile.TemporaryDirectory() as tmp, tuned:
        provider: dict[str, Any] = {}
        if args.provider == "sqlite":
            provider = {
                Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
                Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": os.path.join(tmp, "state.db")},
            }
        ratios = []
        for i in range(args.rounds):
            plain = run(args.sentences, False, provider)
            stateful = run(args.sentences, True, provider)
            ratio = stateful["sentences_per_s"] / plain["sentences_per_s"]
            ratios.append(ratio)
            print(
                f"round {i + 1}: plain {plain['sentences_per_s']:,.0f} sentences/s "
                f"(p99 {plain['p99_ms']:.0f} ms), stateful ({args.provider}) "
                f"{stateful['sentences_per_s']:,.0f} sentences/s (p99 "
                f"{stateful['p99_ms']:.0f} ms, {stateful['checkpoint_steps']} checkpoint "
                f"steps), ratio {ratio:.2f}",
                flush=True,
            )
    print(f"median ratio stateful/plain ({args.gc} GC): {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
