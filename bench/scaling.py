"""What two cores can give this word count, and what two workers get of it.

    python bench/scaling.py [--sentences N] [--reps R]

Alternates, R times (same minutes, since this VM's speed drifts by tens of percent):

- **alone**: the word count in one worker process (bench/two_workers.py with 1 worker);
- **at once**: two such runs at the same time, independent: nothing crosses between
  them, so their combined rate over the rate alone is the most two processes can get
  on this machine (shared caches, memory bandwidth, the host's scheduling);
- **two workers**: the word count over two worker processes (two_workers.py).

Prints medians: sentences/s, CPU per sentence (user + system, all workers), and

- machine ceiling = combined rate at once / rate alone;
- contention = CPU per sentence at once / alone (what a busy neighbour costs a core);
- 2 workers / alone, the scaling the SparkCluster issue asks 1.5x of;
- cross-worker CPU = two workers' CPU per sentence / a run's at once (alone x
  contention): what moving tuples between workers costs beyond the machine's own
  contention (bench/instructions_two.sh counts the same in instructions).
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

from bench import two_workers


def _cpu_per_sentence_us(result: dict[str, Any], sentences: int) -> float:
    return sum(w["cpu_s"] for w in result["workers"]) / sentences * 1e6


def _run_into(queue: Any, sentences: int) -> None:
    queue.put(two_workers.run(sentences, 1))


def at_once(sentences: int) -> list[dict[str, Any]]:
    """Two independent one-worker runs started together."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_run_into, args=(queue, sentences)) for _ in range(2)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=300_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    n = args.sentences
    rows = []
    for rep in range(1, args.reps + 1):
        alone = two_workers.run(n, 1)
        both = at_once(n)
        two = two_workers.run(n, 2)
        row = {
            "alone": alone["sentences_per_s"],
            "at_once": [r["sentences_per_s"] for r in both],
            "two": two["sentences_per_s"],
            "cpu_alone": _cpu_per_sentence_us(alone, n),
            "cpu_at_once": statistics.mean(_cpu_per_sentence_us(r, n) for r in both),
            "cpu_two": _cpu_per_sentence_us(two, n),
            "busy_two": [w["cpu_s"] / w["wall_s"] for w in two["workers"]],
        }
        rows.append(row)
        print(
            f"rep {rep}: alone {row['alone']:,.0f}/s ({row['cpu_alone']:.1f} us CPU); "
            f"at once {row['at_once'][0]:,.0f} + {row['at_once'][1]:,.0f}/s "
            f"({row['cpu_at_once']:.1f} us each); two workers {row['two']:,.0f}/s "
            f"({row['cpu_two']:.1f} us, workers busy "
            f"{' / '.join(f'{b:.0%}' for b in row['busy_two'])})",
            flush=True,
        )

    def med(f: Any) -> float:
        return statistics.median(f(r) for r in rows)

    ceiling = med(lambda r: sum(r["at_once"]) / r["alone"])
    contention = med(lambda r: r["cpu_at_once"] / r["cpu_alone"])
    scaling = med(lambda r: r["two"] / r["alone"])
    cross = med(lambda r: r["cpu_two"] / r["cpu_at_once"])
    print(
        f"\nmedians of {len(rows)} reps, {n:,} sentences each:\n"
        f"  alone {med(lambda r: r['alone']):,.0f} sentences/s, "
        f"{med(lambda r: r['cpu_alone']):.1f} us CPU per sentence\n"
        f"  machine ceiling (two at once / alone): {ceiling:.2f}x; "
        f"contention (CPU at once / alone): {contention:.2f}x\n"
        f"  two workers / alone: {scaling:.2f}x; "
        f"CPU per sentence {med(lambda r: r['cpu_two']):.1f} us over both workers, "
        f"{cross:.2f}x a run's at once (alone x contention)"
    )


if __name__ == "__main__":
    main()
