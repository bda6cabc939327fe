"""How the word count scales over workers: measured on this machine's two cores, and
modelled for more from per-item costs measured in the same run.

    python bench/scaling.py [--sentences N] [--reps R] [--frames F] [--batch] [--trees N]

With ``--batch`` the word count's split and count are BatchBolts and the crossing is
measured as BatchBolts' items cross (docs/batch-bolts.md). With ``--trees N`` each spout
emits N sentences at a time as one tree (``emit_batch``): the acks of a tree are then
paid once per N sentences, so the model counts no acker message per sentence, and c is
the crossing of a word (bench/crossing.py's ``words``), which a sentence in a batch
crosses as too.

Alternates, R times (same minutes, since this VM's speed drifts by tens of percent),
each run bench/two_workers.py's loop (forked worker processes, no Spark):

- one worker and two workers on the benchmark's data (27 words; the count work splits
  63/37 over two count tasks);
- one worker and two workers on balanced data (10,000 words with Zipf's frequencies,
  split 50/50: bench/wordcount.py);
- two independent one-worker runs at once (balanced data): what two busy cores cost
  each other here (contention), which no design removes.

Then bench/crossing.py's loop (F frames), twice: the CPU cost of one item that crosses
workers, send and receive sides, over the Unix socket that workers of one host use and
over TCP loopback (what workers on different hosts pay, the network's own time aside).

The model (notes/performance.md, "Scaling model"): with W workers on W cores and
balanced data, a sentence costs the one-worker CPU time L, plus a for each count task
beyond the first that its words reach (each acks the tree on its own and takes its
words as a batch of its own: the cost of parallelism, paid even with every task on one
worker), plus X(W) crossing items at c each, spread over W cores that each run 1/k as
fast as one alone (k: contention):

    T(W) = W (1 - (1 - 1/W)^10)     count tasks a sentence's 10 words reach
    X(W) = f + 10 f + f + (W - 1) (1 - (1 - 1/W)^10),   f = (W - 1) / W
           (the sentence, its 10 words, the split's ack, one ack per count task on
            another worker than the tree's acker: shuffle and fields grouping place
            each uniformly)
    speedup(W) = W L / (L + (T(W) - 1) a + X(W) c) / k

a is calibrated on the 2-worker run: what its CPU per sentence holds beyond L and
X(2) c, over T(2) - 1. So it lumps in whatever else two workers cost (a crossing dearer
in the run than in bench/crossing.py's loop, rounds that find nothing), and the model
assumes all of it grows with the count tasks a tree reaches. Also printed: a as one
worker running the 2-worker topology all local measures it (the same work with nothing
crossing; dearer here, since one process then holds both tasks' state), and the model
without a (every task's ack free), which is what this bench printed before stop 33.
Prints medians, and the model with each c.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue as queue_module
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import crossing, two_workers
from tupletree.compiled import describe

WORDS_PER_SENTENCE = 10


def crossing_items(workers: int, rows_per_tree: int = 1) -> float:
    """Items that cross workers per sentence, placement uniform (the model's X(W)); with
    ``rows_per_tree`` sentences a tree, its acker messages are shared by them."""
    f = (workers - 1) / workers
    count_acks = (workers - 1) * (1 - (1 - 1 / workers) ** WORDS_PER_SENTENCE)
    return f + WORDS_PER_SENTENCE * f + (f + count_acks) / rows_per_tree


def count_tasks(workers: int) -> float:
    """Count tasks a sentence's words reach, fields grouping uniform (the model's T(W))."""
    return workers * (1 - (1 - 1 / workers) ** WORDS_PER_SENTENCE)


def speedup(
    workers: int,
    one_us: float,
    item_us: float,
    contention: float,
    task_us: float = 0.0,
    rows_per_tree: int = 1,
) -> float:
    """The model: W workers' rate over one worker's, on W cores, balanced data.
    ``task_us`` is a: the cost of each count task beyond the first that a sentence's
    words reach."""
    spread = (count_tasks(workers) - 1) * task_us
    crossing = crossing_items(workers, rows_per_tree) * item_us
    return workers * one_us / (one_us + spread + crossing) / contention


def _cpu_us(result: dict[str, Any], sentences: int) -> float:
    return sum(w["cpu_s"] for w in result["workers"]) / sentences * 1e6


def _busiest_us(result: dict[str, Any], sentences: int) -> float:
    return max(w["cpu_s"] for w in result["workers"]) / sentences * 1e6


def _items_per_sentence(result: dict[str, Any], sentences: int) -> float:
    return sum(w.get("items_sent", 0) for w in result["workers"]) / sentences


def _run_into(queue: Any, sentences: int, corpus: str, batch: bool, rows_per_tree: int) -> None:
    queue.put(two_workers.run(sentences, 1, corpus, batch, rows_per_tree=rows_per_tree))


def at_once(
    sentences: int, corpus: str, batch: bool = False, rows_per_tree: int = 1
) -> list[dict[str, Any]]:
    """Two independent one-worker runs started together."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_run_into, args=(queue, sentences, corpus, batch, rows_per_tree))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    results: list[dict[str, Any]] = []
    while len(results) < len(procs):
        try:
            results.append(queue.get(timeout=1.0))
        except queue_module.Empty:
            # A run that raised never puts its result: say so instead of waiting.
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise RuntimeError("a one-worker run of the pair failed") from None
    for p in procs:
        p.join()
    return results


def _crossing_into(
    queue: Any, frames: int, same_host_ipc: bool, batch: bool, kind: str | None
) -> None:
    queue.put(crossing.measure(frames, same_host_ipc, batch, kind))


def crossing_cost(
    frames: int, same_host_ipc: bool = True, batch: bool = False, kind: str | None = None
) -> dict[str, float]:
    """bench/crossing.py's figures, measured in a fresh process (its own ZeroMQ context):
    over the Unix socket workers of one host use, or over TCP loopback; ``kind``: only
    that part of the mix (crossing.KINDS)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_crossing_into, args=(queue, frames, same_host_ipc, batch, kind))
    p.start()
    result = queue.get(timeout=600)
    p.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--batch", action="store_true", help="split and count as BatchBolts")
    parser.add_argument(
        "--trees", type=int, default=1, help="sentences a spout emits as one tree (emit_batch)"
    )
    args = parser.parse_args()
    t = args.trees
    if t < 1:
        parser.error(f"--trees must be at least 1, got {t}")
    n = args.sentences - args.sentences % (2 * t)
    b = args.batch
    kind = "words" if t > 1 else None
    print(
        f"{describe()}; {n:,} sentences a run, {args.reps} reps alternated"
        f"{'; BatchBolts' if b else ''}{f'; {t} sentences a tree' if t > 1 else ''}",
        flush=True,
    )
    rows = []
    for rep in range(1, args.reps + 1):
        one_b = two_workers.run(n, 1, "benchmark", b, rows_per_tree=t)
        two_b = two_workers.run(n, 2, "benchmark", b, rows_per_tree=t)
        one_z = two_workers.run(n, 1, "zipf", b, rows_per_tree=t)
        two_z = two_workers.run(n, 2, "zipf", b, rows_per_tree=t)
        p2_z = two_workers.run(n, 1, "zipf", b, parallelism=2, rows_per_tree=t)
        both = at_once(n, "zipf", b, t)
        cross = crossing_cost(args.frames, batch=b, kind=kind)
        cross_tcp = crossing_cost(args.frames, same_host_ipc=False, batch=b, kind=kind)
        row = {
            "one_b": one_b["sentences_per_s"],
            "two_b": two_b["sentences_per_s"],
            "one_z": one_z["sentences_per_s"],
            "two_z": two_z["sentences_per_s"],
            "cpu_one_z": _cpu_us(one_z, n),
            "cpu_two_z": _cpu_us(two_z, n),
            "cpu_p2_z": _cpu_us(p2_z, n),
            "busiest_b": _busiest_us(two_b, n) / _cpu_us(one_b, n),
            "busiest_z": _busiest_us(two_z, n) / _cpu_us(one_z, n),
            "contention": statistics.mean(_cpu_us(r, n) for r in both) / _cpu_us(one_z, n),
            "items_z": _items_per_sentence(two_z, n),
            "item_us": cross["cpu_us"],
            "item_tcp_us": cross_tcp["cpu_us"],
            "send_us": cross["send_us"],
            "receive_us": cross["receive_us"],
        }
        rows.append(row)
        print(
            f"rep {rep}: benchmark data 1 worker {row['one_b']:,.0f}/s, 2 workers "
            f"{row['two_b']:,.0f}/s ({row['two_b'] / row['one_b']:.2f}x); balanced 1 worker "
            f"{row['one_z']:,.0f}/s, 2 workers {row['two_z']:,.0f}/s "
            f"({row['two_z'] / row['one_z']:.2f}x); contention {row['contention']:.2f}; "
            f"crossing {row['item_us']:.2f} us CPU per item "
            f"({row['item_tcp_us']:.2f} over TCP)",
            flush=True,
        )

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def med_ratio(a: str, b: str) -> float:
        return statistics.median(r[a] / r[b] for r in rows)

    one_us, item_us, k = med("cpu_one_z"), med("item_us"), med("contention")
    print(f"\nmedians of {len(rows)} reps, {n:,} sentences a run:")
    print(
        f"  benchmark data: 1 worker {med('one_b'):,.0f} sentences/s, 2 workers "
        f"{med('two_b'):,.0f} ({med_ratio('two_b', 'one_b'):.2f}x); busiest worker's CPU "
        f"per sentence {med('busiest_b'):.0%} of one worker's"
    )
    print(
        f"  balanced data:  1 worker {med('one_z'):,.0f} sentences/s, 2 workers "
        f"{med('two_z'):,.0f} ({med_ratio('two_z', 'one_z'):.2f}x); busiest worker's CPU "
        f"per sentence {med('busiest_z'):.0%} of one worker's"
    )
    print(
        f"  measured costs: one worker L = {one_us:.2f} us CPU per sentence (balanced); a "
        f"crossing item c = {item_us:.2f} us CPU (bench/crossing.py: both sides and "
        f"ZeroMQ's I/O thread, over the Unix socket of one host; over TCP loopback "
        f"{med('item_tcp_us'):.2f}; wall clock {med('send_us'):.2f} us to send, "
        f"{med('receive_us'):.2f} to receive); contention k = {k:.2f} (two busy cores); "
        f"items crossing per sentence at 2 workers {med('items_z'):.2f} counted, "
        f"{crossing_items(2, t):.2f} modelled"
    )
    measured_cpu = med("cpu_two_z") / k
    x2 = crossing_items(2, t)
    implied = (measured_cpu - one_us) / x2
    # a, calibrated: what the 2-worker run spends beyond L and its crossings.
    task_us = max(0.0, measured_cpu - one_us - x2 * item_us) / (count_tasks(2) - 1)
    local_task_us = (med("cpu_p2_z") - one_us) / (count_tasks(2) - 1)
    print(
        f"  check: without a, the model says 2 workers "
        f"{speedup(2, one_us, item_us, k, 0.0, t):.2f}x, "
        f"measured {med_ratio('two_z', 'one_z'):.2f}x (the 2-worker run spends "
        f"{implied:.2f} us per crossing item, contention aside)"
    )
    print(
        f"  a, each count task a sentence reaches beyond the first: {task_us:.2f} us CPU "
        f"(calibrated on the 2-worker run: {task_us / one_us:.0%} of L); one worker "
        f"running the 2-worker topology all local measures {local_task_us:.2f} us"
    )
    tcp_us = med("item_tcp_us")
    print(
        "  model, balanced data, W workers on W cores (speedup over one worker), every "
        "crossing at c (one host) and at TCP's c (hosts apart, the network's own time aside);"
        " last, without a:"
    )
    for w in (2, 4, 8, 16):
        s = speedup(w, one_us, item_us, k, task_us, t)
        s_tcp = speedup(w, one_us, tcp_us, k, task_us, t)
        print(
            f"    W={w:>2}: T(W) = {count_tasks(w):4.2f}, X(W) = {crossing_items(w, t):5.2f} "
            f"items per sentence, {s:5.2f}x, {s * med('one_z'):>10,.0f} sentences/s; over TCP "
            f"{s_tcp:5.2f}x; without a {speedup(w, one_us, item_us, k, 0.0, t):5.2f}x"
        )
    free = speedup(16, one_us, 0.0, 1.0, task_us, t)
    print(
        f"  at 16 workers with every crossing free and no contention: {free:.2f}x "
        "(the count tasks' spread alone)"
    )


if __name__ == "__main__":
    main()
