"""Components of the benchmark word count: 10-word sentences, BasicBolt split and count
(or, with ``batch``, BatchBolt split and count: topology/batch.py)."""

from __future__ import annotations

import time
from typing import Any

from tupletree import BasicBolt, BatchBolt, Bolt, Config, Spout, TopologyBuilder
from tupletree.cluster import Cluster, ComponentMetrics

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "snow",
    "white",
    "dwarfs",
    "sing",
    "an",
    "old",
    "song",
    "about",
    "apples",
    "moons",
    "cows",
    "and",
    "four",
    "score",
    "years",
    "ago",
]


def sentences(n: int = 64) -> list[str]:
    """A fixed set of 10-word sentences (deterministic, no RNG on the hot path)."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(10)) for i in range(n)]


# The balanced corpus: many words, with Zipf's law's frequencies (rank r drawn with
# weight 1 / r), as natural text has them. With many words, fields grouping could split
# the count work evenly, but the few most frequent words weigh most: which task each of
# them hashes to decides the split. The names are chosen so that it is even over two
# count tasks: 49.7% / 50.3% of the words (names from the 12th on; from the first, the
# split is 65/35, as skewed as the benchmark's own 27 words, 63/37).
ZIPF_VOCABULARY = 10_000
ZIPF_NAME_OFFSET = 12
ZIPF_SENTENCES = 4096  # a power of two: the spout picks one with a mask
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def zipf_word(rank: int) -> str:
    """A made-up word for a rank, two to four syllables (distinct for every rank)."""
    n = len(_SYLLABLES)
    out = _SYLLABLES[rank % n] + _SYLLABLES[(rank // n) % n]
    rank //= n * n
    while rank:
        out += _SYLLABLES[rank % n]
        rank //= n
    return out


def zipf_sentences(n: int = ZIPF_SENTENCES, seed: int = 1) -> list[str]:
    """``n`` 10-word sentences of Zipf-distributed words (deterministic)."""
    import random

    rng = random.Random(seed)
    ranks = range(1, ZIPF_VOCABULARY + 1)
    weights = [1.0 / r for r in ranks]
    words = rng.choices(ranks, weights, k=10 * n)
    return [
        " ".join(zipf_word(r + ZIPF_NAME_OFFSET) for r in words[i * 10 : i * 10 + 10])
        for i in range(n)
    ]


CORPORA = {"benchmark": sentences, "zipf": zipf_sentences}


class SentenceSpout(Spout):
    """Emits ``total`` tracked sentences; with ``rate`` set, at most that many per second.
    ``corpus``: "benchmark" (64 sentences of 27 words) or "zipf" (CORPORA).
    ``rows_per_tree`` > 1: that many sentences per ``emit_batch``, one tree each batch
    (``total`` must then be a multiple of it)."""

    outputs = ["sentence"]

    def __init__(
        self,
        total: int,
        rate: float | None = None,
        corpus: str = "benchmark",
        rows_per_tree: int = 1,
    ) -> None:
        if total % rows_per_tree:
            raise ValueError(f"{total} sentences are not batches of {rows_per_tree}")
        if rate is not None and rows_per_tree > 1:
            raise ValueError("a rate is for one sentence a tree")
        self.total = total
        self.rate = rate
        self.corpus = corpus
        self.rows_per_tree = rows_per_tree

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        if self.rows_per_tree > 1:
            self.emit_batch = collector.emit_batch
            self.next_tuple = self._next_tree  # type: ignore[method-assign]
        self.sentences = CORPORA[self.corpus]()
        self.mask = len(self.sentences) - 1  # the corpora hold a power of two
        self.n = 0
        self.start: float | None = None

    def next_tuple(self) -> None:
        n = self.n
        if n >= self.total:
            return
        if self.rate is not None:
            now = time.monotonic()
            if self.start is None:
                self.start = now
            if n >= (now - self.start) * self.rate:
                return
        self.n = n + 1
        self.emit([self.sentences[n & self.mask]], n)

    def _next_tree(self) -> None:
        """``next_tuple`` with N sentences a tree (``open`` puts it in its place). Apart,
        so that the one-a-tree runs' ``next_tuple`` stays as it was: this comprehension's
        closure made it create two cells on every call (Python 3.11 makes them on
        entry), and the branch read one more attribute: ~950 instructions a sentence
        (callgrind, PYTHONHASHSEED=0)."""
        n = self.n
        if n >= self.total:
            return
        rows = self.rows_per_tree
        self.n = n + rows
        sentences, mask = self.sentences, self.mask
        self.emit_batch([[sentences[i & mask]] for i in range(n, n + rows)], n)

    def fail(self, msg_id: Any) -> None:
        raise RuntimeError(f"benchmark sentence {msg_id} failed")


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        emit = collector.emit
        for word in tup.values[0].split():
            emit([word])


class Count(BasicBolt):
    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup.values[0]
        counts = self.counts
        counts[word] = counts.get(word, 0) + 1


class BatchSplit(BatchBolt):
    """Split as a BatchBolt: each word anchored to its sentence's row."""

    outputs = ["word"]

    def execute_batch(self, batch: Any, collector: Any) -> None:
        emit = collector.emit
        for i, sentence in enumerate(batch.column(0)):
            for word in sentence.split():
                emit([word], i)


class BatchCount(BatchBolt):
    """Count as a BatchBolt: a column of words per batch."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute_batch(self, batch: Any, collector: Any) -> None:
        counts = self.counts
        for word in batch.column(0):
            counts[word] = counts.get(word, 0) + 1


class PlainCount(Bolt):
    """Count as a plain Bolt that acks each input itself (the other execute path)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.counts: dict[str, int] = {}
        self.ack = collector.ack

    def execute(self, tup: Any) -> None:
        word = tup.values[0]
        counts = self.counts
        counts[word] = counts.get(word, 0) + 1
        self.ack(tup)


def topology(total: int, rate: float | None = None, plain_count: bool = False) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(total, rate))
    b.set_bolt("split", Split()).shuffle_grouping("sentences")
    count = PlainCount() if plain_count else Count()
    b.set_bolt("count", count).fields_grouping("split", ["word"])
    return b.create_topology()


def conf(max_pending: int = 1000) -> dict[str, Any]:
    return {
        Config.TOPOLOGY_ACKER_EXECUTORS: 1,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: max_pending,
    }


TUPLES_PER_SENTENCE = 11  # the sentence and its 10 words


# A run that hears of no more sentences for this long is stuck, not slow: say so.
STALL_SECS = 120


def run_to_completion(
    cluster: Cluster, name: str, total: int, start: float
) -> tuple[float, dict[str, ComponentMetrics]]:
    """Wait until ``total`` sentences are acked or failed; return (seconds since
    ``start``, a perf_counter reading, and the final metrics).

    Polls every 50 ms: on LocalCluster metrics() takes the GIL from the worker thread,
    and polling every 2 ms measurably slowed the run it measured (22,669 vs 30,004/s).
    """
    heard, last_change = -1, time.monotonic()
    while True:
        m = cluster.metrics(name)["sentences"]
        now_heard = m["acked"] + m["failed"]
        if now_heard >= total:
            break
        if now_heard != heard:
            heard, last_change = now_heard, time.monotonic()
        elif time.monotonic() - last_change > STALL_SECS:
            raise RuntimeError(
                f"{name}: {heard:,} of {total:,} sentences acked or failed, "
                f"none more for {STALL_SECS} s"
            )
        time.sleep(0.05)
    return time.perf_counter() - start, cluster.metrics(name)


def figures(total: int, elapsed: float, metrics: dict[str, ComponentMetrics]) -> dict[str, Any]:
    """The benchmark's figures for one word-count run."""
    s = metrics["sentences"]
    return {
        "sentences_per_s": total / elapsed,
        "tuples_per_s": total * TUPLES_PER_SENTENCE / elapsed,
        "p50_ms": s["complete_latency_p50_ms"],
        "p99_ms": s["complete_latency_p99_ms"],
        "failed": s["failed"],
        "elapsed_s": elapsed,
    }
