"""BatchBolt (topology/batch.py, runtime/batch_collector.py) on every cluster: LocalCluster
in simulated and in real time, and SparkCluster with 2 workers, where rows cross
workers as frame runs and reach a BatchBolt as Batches, with no Tuple built for them.

Each test checks what a user relies on: every word counted once, every tree acked or
failed exactly as the rows' fates say, emits anchored to rows keep their trees open
until the children are acked, and a raise fails the batch's trees without killing
anything. Components report through journals (tests/registry.py), as in
test_storm_scenarios.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tupletree import BatchBolt, Bolt, Config, FailedException, TopologyBuilder

from ..registry import entries, new_journal
from .test_storm_scenarios import TIMEOUT_CONF, NeverAckBolt, RecordingAckBolt, tracked_feeder


@pytest.fixture
def cluster(any_cluster):
    return any_cluster


class SplitWords(BatchBolt):
    """Splits each sentence into words, each emit anchored to its sentence's row;
    fails the row of a sentence that is "reject", raises on "crash"."""

    outputs = ["word"]

    def execute_batch(self, batch, collector):
        for i, sentence in enumerate(batch.column("sentence")):
            if sentence == "crash":
                raise RuntimeError("boom on crash")
            if sentence == "reject":
                collector.fail(i)
                continue
            for word in sentence.split():
                collector.emit([word], row=i)


class CountWords(BatchBolt):
    """Counts words per task; emits [word, count so far] anchored to each row."""

    outputs = ["word", "count"]

    def prepare(self, conf, context):
        self.counts: Counter[str] = Counter()

    def execute_batch(self, batch, collector):
        for i, word in enumerate(batch.column("word")):
            self.counts[word] += 1
            collector.emit([word, self.counts[word]], row=i)


class FailWord(Bolt):
    """Fails the word "bad", acks every other tuple (a plain Bolt fed by a BatchBolt)."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup[0] == "bad":
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


def word_count(journal: Any, feeder: Any) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", feeder)
    b.set_bolt("split", SplitWords(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("count", CountWords(), parallelism=2).fields_grouping("split", ["word"])
    b.set_bolt("sink", RecordingAckBolt(journal)).shuffle_grouping("count")
    return b.create_topology()


SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
]


@pytest.mark.standalone
def test_a_batch_word_count_counts_every_word_and_acks_every_sentence(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    cluster.submit_topology("batch-wc", TIMEOUT_CONF, word_count(journal, feeder))
    sent = [SENTENCES[i % len(SENTENCES)] for i in range(40)]
    for i, sentence in enumerate(sent):
        feeder.feed([sentence], msg_id=i)
    assert cluster.wait_idle()
    assert cluster.until(lambda: len(tracker.acked) == len(sent))
    assert tracker.failed == set()
    expected = Counter(w for s in sent for w in s.split())
    seen = entries(journal)
    # Each word's counts are 1..n, each once: every word counted once, by one task.
    by_word: dict[str, list[int]] = {}
    for word, count in seen:
        by_word.setdefault(word, []).append(count)
    assert {w: sorted(c) for w, c in by_word.items()} == {
        w: list(range(1, n + 1)) for w, n in expected.items()
    }
    metrics = cluster.metrics("batch-wc")
    assert metrics["split"]["executed"] == len(sent)
    assert metrics["count"]["executed"] == sum(expected.values())
    assert metrics["count"]["acked"] == sum(expected.values())


def test_a_failed_row_fails_only_its_tree_and_a_raise_fails_the_batch(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    cluster.submit_topology("batch-fail", TIMEOUT_CONF, word_count(journal, feeder))
    feeder.feed(["red fox"], msg_id=1)
    feeder.feed(["reject"], msg_id=2)
    feeder.feed(["blue fox"], msg_id=3)
    assert cluster.wait_idle()  # no time passes: the failure is explicit, not a timeout
    assert cluster.until(lambda: tracker.acked == {1, 3} and tracker.failed == {2})
    feeder.feed(["crash"], msg_id=4)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.failed == {2, 4})
    assert cluster.until(lambda: any("boom on crash" in e for e in cluster.errors("batch-fail")))
    feeder.feed(["green fox"], msg_id=5)  # the task lives on
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == {1, 3, 5})
    assert Counter(w for w, _ in entries(journal)) == Counter(
        {"fox": 3, "red": 1, "blue": 1, "green": 1}
    )


def test_a_child_failed_downstream_fails_the_sentence_it_was_anchored_to(cluster):
    feeder, tracker, _ = tracked_feeder(["sentence"])
    b = TopologyBuilder()
    b.set_spout("sentences", feeder)
    b.set_bolt("split", SplitWords(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("judge", FailWord(), parallelism=2).fields_grouping("split", ["word"])
    cluster.submit_topology("batch-anchor", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["a good day"], msg_id=1)
    feeder.feed(["a bad day"], msg_id=2)
    feeder.feed(["good good"], msg_id=3)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == {1, 3} and tracker.failed == {2})


def test_a_child_never_acked_times_the_sentence_out(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    b = TopologyBuilder()
    b.set_spout("sentences", feeder)
    b.set_bolt("split", SplitWords(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("hold", NeverAckBolt(journal)).shuffle_grouping("split")
    cluster.submit_topology("batch-timeout", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    feeder.feed(["held words"], msg_id=1)
    cluster.advance_time(5)
    assert cluster.until(lambda: len(entries(journal)) == 2)
    if cluster.exact_time:
        assert tracker.failed == set()  # the split acked its row; the children hold it
    cluster.advance_time(20)  # past the timeout's last bucket (at most twice 10 s)
    assert cluster.until(lambda: tracker.failed == {1})
    assert tracker.acked == set()


class Reject(BatchBolt):
    """Raises FailedException for every batch: a deliberate failure, not an error."""

    def execute_batch(self, batch, collector):
        raise FailedException("not today")


def test_failed_exception_fails_the_batch_without_an_error(cluster):
    feeder, tracker, _ = tracked_feeder(["sentence"])
    b = TopologyBuilder()
    b.set_spout("sentences", feeder)
    b.set_bolt("reject", Reject()).shuffle_grouping("sentences")
    cluster.submit_topology("batch-reject", TIMEOUT_CONF, b.create_topology())
    feeder.feed(["x"], msg_id=1)
    feeder.feed(["y"], msg_id=2)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.failed == {1, 2})
    assert cluster.errors("batch-reject") == []
    assert cluster.metrics("batch-reject")["reject"]["failed"] == 2


def test_untracked_rows_are_counted_and_need_no_acker(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    b = TopologyBuilder()
    b.set_spout("sentences", feeder)
    b.set_bolt("split", SplitWords()).shuffle_grouping("sentences")
    b.set_bolt("sink", RecordingAckBolt(journal)).shuffle_grouping("split")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_ACKER_EXECUTORS: 0}
    cluster.submit_topology("batch-untracked", conf, b.create_topology())
    feeder.feed(["one two"], msg_id=1)  # acked at once: no ackers
    feeder.feed(["three"])  # untracked
    assert cluster.wait_idle()
    assert cluster.until(lambda: len(entries(journal)) == 3)
    assert tracker.acked == {1}
    assert sorted(w for (w,) in entries(journal)) == ["one", "three", "two"]
