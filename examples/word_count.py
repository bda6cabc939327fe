"""Word count, Storm's hello world, with at-least-once tracking.

A spout emits sentences with message ids; ``split`` breaks them into words (anchored),
``count`` keeps a running count per word (fields grouping, so each word has one
counter). Every sentence's tuple tree is tracked by the acker, and the spout hears ack
or fail for each sentence.

    tupletree run examples/word_count.py            # on local Spark
    tupletree run --local examples/word_count.py    # in-process LocalCluster
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from tupletree import BasicBolt, Config, Spout, TopologyBuilder

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class SentenceSpout(Spout):
    """Emits ``limit`` random sentences (None: forever), each with a message id, and
    replays a sentence whose tree failed."""

    outputs = ["sentence"]

    def __init__(self, limit: int | None = 100_000, seed: int = 42) -> None:
        self.limit = limit
        self.seed = seed

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed + context.task_id)
        self.emitted = 0
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []
        self.acked = 0
        self.failed = 0

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
            self.collector.emit([self.pending[msg_id]], msg_id=msg_id)
            return
        if self.limit is not None and self.emitted >= self.limit:
            return
        sentence = self.rng.choice(SENTENCES)
        msg_id = self.emitted
        self.emitted += 1
        self.pending[msg_id] = sentence
        self.collector.emit([sentence], msg_id=msg_id)

    def ack(self, msg_id: int) -> None:
        del self.pending[msg_id]
        self.acked += 1

    def fail(self, msg_id: int) -> None:
        self.failed += 1
        self.replay.append(msg_id)


class SplitSentence(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class WordCount(BasicBolt):
    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()
        context.register_metric("top_words", _TopWordsMetric(self))

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup[0]
        self.counts[word] += 1
        collector.emit([word, self.counts[word]])


class TopWords(BasicBolt):
    """Keeps the latest count of every word (global grouping: one task sees them all)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.latest: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        self.latest[tup[0]] = tup[1]


def build(sentences: int | None = 10_000, parallelism: int = 2) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(sentences))
    builder.set_bolt("split", SplitSentence(), parallelism=parallelism).shuffle_grouping(
        "sentences"
    )
    builder.set_bolt("count", WordCount(), parallelism=parallelism).fields_grouping(
        "split", ["word"]
    )
    return builder.create_topology()


CONF = {
    Config.TOPOLOGY_WORKERS: 2,
    Config.TOPOLOGY_ACKER_EXECUTORS: 1,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000,
    Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
}


def topology() -> Any:
    """What ``tupletree run`` submits: 100,000 sentences."""
    return build(100_000)


class _TopWordsMetric:
    """A task's top counts, reported through metrics so they reach the driver from any
    cluster (a plain picklable callable)."""

    def __init__(self, bolt: WordCount) -> None:
        self.bolt = bolt

    def __call__(self) -> list[tuple[str, int]]:
        return self.bolt.counts.most_common(10)


def report(metrics: dict[str, Any]) -> str:
    """Top words across every count task, and the spout's acked/failed counts."""
    totals: Counter[str] = Counter()
    for per_task in metrics["count"].get("custom", {}).get("top_words", {}).values():
        for word, n in per_task or []:
            totals[word] += n
    spout = metrics["sentences"]
    top = ", ".join(f"{w} {n:,}" for w, n in totals.most_common(8))
    return f"top words: {top}\nsentences acked {spout['acked']:,}, failed {spout['failed']:,}"
