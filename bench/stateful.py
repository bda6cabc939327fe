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
``--gc tuned`` (the default) runs both as LocalCluster does, with the cyclic GC tuned
as tupletree's workers tune it (runtime/gc_tuning.py: the young generation collected
every 10,000 allocations instead of 700); ``--gc python`` leaves Python's defaults
(``LocalCluster(tune_gc=False)``).
The stateful run keeps a checkpoint interval's trees open (the ackers' records, the
spout's pending entries, deep queues): at the default threshold it spends about a
fifth of its time in the GC, the plain run almost none (notes/performance.md).
"""

from __future__ import annotations

import argparse
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


def run(total: int, stateful: bool, provider: dict[str, Any], tune_gc: bool) -> dict[str, Any]:
    if stateful:
        conf = {
            **wordcount.conf(STATEFUL_MAX_PENDING),
            Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 1000,
            **provider,
        }
        topology = stateful_topology(total)
    else:
        conf, topology = wordcount.conf(), wordcount.topology(total)
    with LocalCluster(tune_gc=tune_gc) as cluster:
        start = time.perf_counter()
        cpu = time.process_time()
        cluster.submit_topology("bench", conf, topology)
        elapsed, metrics = wordcount.run_to_completion(cluster, "bench", total, start)
        cpu = time.process_time() - cpu
        checkpoints = metrics.get("$checkpointspout", {}).get("acked", 0)
    result = wordcount.figures(total, elapsed, metrics)
    # Sentences per CPU second of this process (all its threads): on a shared machine
    # the wall-clock rate moves by a factor of three between runs, the CPU one far less.
    result["sentences_per_cpu_s"] = total / cpu
    if result["failed"]:
        raise SystemExit(f"benchmark: {result['failed']} sentences failed")
    result["checkpoint_steps"] = checkpoints
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--provider", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--gc", choices=["tuned", "python"], default="tuned")
    args = parser.parse_args()
    tune_gc = args.gc == "tuned"
    with tempfile.TemporaryDirectory() as tmp:
        provider: dict[str, Any] = {}
        if args.provider == "sqlite":
            provider = {
                Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
                Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": os.path.join(tmp, "state.db")},
            }
        ratios, cpu_ratios = [], []
        for i in range(args.rounds):
            plain = run(args.sentences, False, provider, tune_gc)
            stateful = run(args.sentences, True, provider, tune_gc)
            ratio = stateful["sentences_per_s"] / plain["sentences_per_s"]
            cpu_ratio = stateful["sentences_per_cpu_s"] / plain["sentences_per_cpu_s"]
            ratios.append(ratio)
            cpu_ratios.append(cpu_ratio)
            print(
                f"round {i + 1}: plain {plain['sentences_per_s']:,.0f} sentences/s "
                f"({plain['sentences_per_cpu_s']:,.0f} per CPU s, p99 "
                f"{plain['p99_ms']:.0f} ms), stateful ({args.provider}) "
                f"{stateful['sentences_per_s']:,.0f} sentences/s "
                f"({stateful['sentences_per_cpu_s']:,.0f} per CPU s, p99 "
                f"{stateful['p99_ms']:.0f} ms, {stateful['checkpoint_steps']} checkpoint "
                f"steps), ratio {ratio:.2f} (per CPU s {cpu_ratio:.2f})",
                flush=True,
            )
    print(
        f"median ratio stateful/plain ({args.gc} GC): {statistics.median(ratios):.2f}, "
        f"per CPU second {statistics.median(cpu_ratios):.2f}"
    )


if __name__ == "__main__":
    main()
