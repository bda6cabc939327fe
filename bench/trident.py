"""Trident word count beside the core word count, one command:
``python bench/trident.py [--quick] [--batch 2000] [--pending 4] [--profile]``.

Both count the same 10-word sentences (bench/wordcount.py) on a real-time LocalCluster.
The core word count tracks every sentence (a tuple tree per sentence, max spout pending
1000, 1 acker). The Trident one is the tutorial's: a batch spout, ``each(Split)``,
``group_by(word).persistent_aggregate(MemoryMapState.Factory(), Count())``, exactly
once; it tracks one batch (``--batch`` sentences), not each sentence, with ``--pending``
batches active and no pause between batches. A run ends when the last batch that holds
sentences has committed; the counts are then checked against the true ones.

Prints sentences/s of each (best of ``--runs``), their ratio, and with ``--profile`` a
pyinstrument profile of one Trident run's worker thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import wordcount
from bench.run import run_wordcount
from tupletree import Config, Fields, LocalCluster, compiled
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.operation import BaseFunction
from tupletree.trident.spout import BatchCoordinator, Emitter, ITridentSpout, SpoutType
from tupletree.trident.state import MemoryMapState


class SentenceBatches(ITridentSpout):
    """``total`` sentences in batches of ``size``: txid t holds the sentences of batch t
    (a replay brings the same ones); the coordinator is ready for the txids that hold
    some, so a run goes idle once they are done."""

    spout_type = SpoutType.TRANSACTIONAL

    def __init__(self, total: int, size: int) -> None:
        self.total, self.size = total, size

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _Ready(-(-self.total // self.size))

    def get_emitter(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _Emitter(self.total, self.size)

    def get_output_fields(self) -> Fields:
        return Fields("sentence")

    def get_component_configuration(self) -> dict[str, Any]:
        return {"topology.max.task.parallelism": 1}


class _Ready(BatchCoordinator):
    def __init__(self, batches: int) -> None:
        self.batches = batches

    def is_ready(self, txid: int) -> bool:
        return txid <= self.batches


class _Emitter(Emitter):
    def __init__(self, total: int, size: int) -> None:
        self.total, self.size = total, size
        self.sentences = wordcount.sentences()

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        start = (tx.transaction_id - 1) * self.size
        end = min(start + self.size, self.total)
        emit = collector.emit
        sentences = self.sentences
        for n in range(start, end):
            emit([sentences[n & 63]])


class Split(BaseFunction):
    def execute(self, tup: Any, collector: Any) -> None:
        emit = collector.emit
        for word in tup[0].split():
            emit([word])


def expected_counts(total: int) -> dict[str, int]:
    """The true counts: sentence n is sentences()[n % 64] (O(64), not O(total), so the
    check costs nothing per sentence in an instruction count)."""
    s = wordcount.sentences()
    full, rest = divmod(total, 64)
    counts: Counter[str] = Counter()
    for i, sentence in enumerate(s):
        for w in sentence.split():
            counts[w] += full + (1 if i < rest else 0)
    return dict(counts)


def trident_topology(total: int, size: int) -> tuple[Any, MemoryMapState.Factory]:
    factory = MemoryMapState.Factory()
    t = TridentTopology()
    (
        t.new_stream("sentences", SentenceBatches(total, size))
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
    )
    return t.build(), factory


def committed(cluster: Any, name: str) -> int:
    custom = cluster.metrics(name)["__mastercoord-bg0"].get("custom", {})
    views = list(custom.get("trident", {}).values())
    return (views[0].get("lastCommittedTxid") or 0) if views else 0


def run_trident(total: int, size: int, pending: int) -> dict[str, Any]:
    batches = -(-total // size)
    topology, factory = trident_topology(total, size)
    conf = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: pending,
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0,
        Config.TOPOLOGY_ACKER_EXECUTORS: 1,
    }
    with LocalCluster() as cluster:
        start = time.perf_counter()
        cluster.submit_topology("trident", conf, topology)
        while committed(cluster, "trident") < batches:
            if time.perf_counter() - start > wordcount.STALL_SECS:
                raise RuntimeError(f"trident: {committed(cluster, 'trident')} of {batches} batches")
            time.sleep(0.02)
        elapsed = time.perf_counter() - start
        errors = cluster.errors("trident")
    state = factory.make_state({}, None, 0, 1)
    want = expected_counts(total)
    words = sorted(want)
    got = dict(zip(words, state.multi_get([(w,) for w in words]), strict=True))
    if got != want or errors:
        raise SystemExit(f"trident: wrong counts or errors: {errors[:1]}")
    return {"sentences_per_s": total / elapsed, "elapsed_s": elapsed}


def run_direct(total: int, size: int, pending: int) -> dict[str, Any]:
    """The Trident run driven on this thread (no LocalCluster thread, no polling), as
    bench/worker_direct.py does for the core word count: what --profile measures."""
    from tupletree.config import validate
    from tupletree.runtime.clock import RealClock
    from tupletree.runtime.worker import Worker

    topology, factory = trident_topology(total, size)
    conf = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: pending,
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0,
        Config.TOPOLOGY_ACKER_EXECUTORS: 1,
    }
    worker = Worker("bench", topology, validate(conf), RealClock().now)
    worker.start()
    start = time.perf_counter()
    while worker.step(worker.now()):
        pass
    elapsed = time.perf_counter() - start
    state = factory.make_state({}, None, 0, 1)
    want = expected_counts(total)
    words = sorted(want)
    if dict(zip(words, state.multi_get([(w,) for w in words]), strict=True)) != want:
        raise SystemExit("trident (direct): wrong counts")
    return {"sentences_per_s": total / elapsed, "elapsed_s": elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    parser.add_argument("--total", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="profile a direct run")
    parser.add_argument("--direct", action="store_true", help="only a direct run")
    args = parser.parse_args(argv)
    total = args.total // (20 if args.quick else 1)
    runs = 1 if args.quick else args.runs
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {compiled.describe()}")
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled", interval=0.0005)
        profiler.start()
        r = run_direct(total, args.batch, args.pending)
        profiler.stop()
        print(f"direct: {r['sentences_per_s']:,.0f} sentences/s (under the profiler)")
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        return 0
    if args.direct:
        r = max(
            (run_direct(total, args.batch, args.pending) for _ in range(runs)),
            key=lambda r: r["sentences_per_s"],
        )
        print(f"trident direct: {r['sentences_per_s']:,.0f} sentences/s")
        return 0
    trident = max(
        (run_trident(total, args.batch, args.pending) for _ in range(runs)),
        key=lambda r: r["sentences_per_s"],
    )
    core = max((run_wordcount(total) for _ in range(runs)), key=lambda r: r["sentences_per_s"])
    print(f"word count, best of {runs} x {total:,} sentences of 10 words (LocalCluster):")
    print(
        f"  core (a tree per sentence, pending 1000)  {core['sentences_per_s']:>10,.0f} sentences/s"
    )
    print(
        f"  trident (batches of {args.batch}, {args.pending} active, exactly once)"
        f"  {trident['sentences_per_s']:>10,.0f} sentences/s"
    )
    print(f"  ratio trident / core = {trident['sentences_per_s'] / core['sentences_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
