"""A spout's ``emit_batch``: rows emitted as one tuple tree, on every cluster (LocalCluster
in simulated and in real time, SparkCluster with 2 workers, where rows cross workers to
BatchBolts as one Batch and to Tuple bolts as one Tuple each).

What a user relies on: the spout hears one ack per batch, only once every row's
descendants are acked; any row failed or timed out anywhere fails the whole batch (the
unit of replay), and the rest of its rows still run (at-least-once); a batch counts once
against max spout pending.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tupletree import Bolt, Config, TopologyBuilder

from ..registry import entries, new_journal, record
from .test_batch_bolts import SENTENCES, FailWord, word_count
from .test_storm_scenarios import TIMEOUT_CONF, NeverAckBolt, RecordingAckBolt, tracked_feeder


@pytest.fixture
def cluster(any_cluster):
    return any_cluster


@pytest.mark.standalone
def test_a_batch_of_sentences_is_acked_once_when_all_its_words_are_counted(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    cluster.submit_topology("spout-batches", TIMEOUT_CONF, word_count(journal, feeder))
    batches = [[[SENTENCES[(b + i) % len(SENTENCES)]] for i in range(b + 1)] for b in range(6)]
    for b, rows in enumerate(batches):
        feeder.feed_batch(rows, msg_id=b)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == set(range(len(batches))))
    assert tracker.failed == set()
    sent = [row[0] for rows in batches for row in rows]
    expected = Counter(w for s in sent for w in s.split())
    by_word: dict[str, list[int]] = {}
    for word, count in entries(journal):
        by_word.setdefault(word, []).append(count)
    assert {w: sorted(c) for w, c in by_word.items()} == {
        w: list(range(1, n + 1)) for w, n in expected.items()
    }
    metrics = cluster.metrics("spout-batches")
    assert metrics["sentences"]["emitted"] == len(sent)  # rows, as emit counts tuples
    assert metrics["sentences"]["acked"] == len(batches)  # trees
    assert metrics["split"]["executed"] == len(sent)


def test_one_failed_row_fails_its_batch_and_the_other_rows_still_run(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["sentence"])
    cluster.submit_topology("spout-batch-fail", TIMEOUT_CONF, word_count(journal, feeder))
    feeder.feed_batch([["red fox"], ["reject"], ["blue fox"]], msg_id=1)
    feeder.feed_batch([["green fox"]], msg_id=2)
    assert cluster.wait_idle()  # no time passes: the failure is explicit, not a timeout
    assert cluster.until(lambda: tracker.failed == {1} and tracker.acked == {2})
    assert cluster.until(
        lambda: (
            Counter(w for w, _ in entries(journal))
            == Counter({"fox": 3, "red": 1, "blue": 1, "green": 1})
        )
    )


def test_rows_to_a_tuple_bolt_are_each_a_tuple_of_the_batchs_tree(cluster):
    """Words straight from the spout to a plain Bolt (fields grouping over two tasks, so
    on two workers half of them cross): one failed word fails its batch only."""
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("words", feeder)
    b.set_bolt("judge", FailWord(), parallelism=2).fields_grouping("words", ["word"])
    cluster.submit_topology("spout-batch-tuples", TIMEOUT_CONF, b.create_topology())
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    feeder.feed_batch([[w] for w in words], msg_id=1)
    feeder.feed_batch([[w] for w in words] + [["bad"]], msg_id=2)
    feeder.feed_batch([[w] for w in reversed(words)], msg_id=3)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == {1, 3} and tracker.failed == {2})
    assert cluster.metrics("spout-batch-tuples")["judge"]["executed"] == 3 * len(words) + 1


def test_a_row_never_acked_times_its_batch_out(cluster):
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("words", feeder)
    b.set_bolt("ack", RecordingAckBolt(journal)).shuffle_grouping("words")
    b.set_bolt("hold", NeverAckBolt(new_journal())).all_grouping("words")
    # "ack" acks each row; "hold" gets them too and never acks: the batch can only time out.
    cluster.submit_topology("spout-batch-timeout", TIMEOUT_CONF, b.create_topology())
    cluster.advance_time(11)
    feeder.feed_batch([["a"], ["b"]], msg_id=1)
    cluster.advance_time(5)
    assert cluster.until(lambda: len(entries(journal)) == 2)
    if cluster.exact_time:
        assert tracker.failed == set()  # "ack" acked its rows; "hold" holds them
    cluster.advance_time(20)  # past the timeout's last bucket (at most twice 10 s)
    assert cluster.until(lambda: tracker.failed == {1})
    assert tracker.acked == set()


def test_max_spout_pending_counts_a_batch_once(cluster):
    """With max pending 2, two batches of three rows are in flight at once (six rows);
    the third is emitted only once they are settled (here: timed out)."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["word"])
    b = TopologyBuilder()
    b.set_spout("words", feeder)
    b.set_bolt("hold", NeverAckBolt(journal)).shuffle_grouping("words")
    conf = {**TIMEOUT_CONF, Config.TOPOLOGY_MAX_SPOUT_PENDING: 2}
    cluster.submit_topology("spout-batch-pending", conf, b.create_topology())
    cluster.advance_time(11)
    for n in range(3):
        feeder.feed_batch([[f"{n}-{i}"] for i in range(3)], msg_id=n)
    assert cluster.wait_idle()
    assert cluster.until(lambda: len(entries(journal)) == 6)
    if cluster.exact_time:
        assert cluster.wait_idle() and len(entries(journal)) == 6  # the third waits
    cluster.advance_time(25)  # the first two time out
    assert cluster.until(lambda: tracker.failed >= {0, 1})
    assert cluster.until(lambda: len(entries(journal)) == 9)
    assert sorted(w for (w,) in entries(journal)) == [
        f"{n}-{i}" for n in range(3) for i in range(3)
    ]


class TaskRecorder(Bolt):
    """Records (its task id, the row's value) for each row, and acks it."""

    def __init__(self, journal) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.task = context.task_id
        self.collector = collector

    def execute(self, tup):
        record(self.journal, [self.task, tup[0]])
        self.collector.ack(tup)


def test_a_small_shuffled_batch_goes_whole_to_one_task_the_next_in_turn(cluster):
    """A shuffle sends a batch in runs of at least 50 rows (StreamRoute.route_batch): a
    batch of 4 reaches one of the bolt's three tasks, and six of them give each task
    two. On two workers such a batch crosses whole or not at all."""
    journal = new_journal()
    feeder, tracker, _ = tracked_feeder(["row"])
    b = TopologyBuilder()
    b.set_spout("rows", feeder)
    b.set_bolt("record", TaskRecorder(journal), parallelism=3).shuffle_grouping("rows")
    cluster.submit_topology("spout-batch-shuffle", TIMEOUT_CONF, b.create_topology())
    for n in range(6):
        feeder.feed_batch([[f"{n}-{i}"] for i in range(4)], msg_id=n)
    assert cluster.wait_idle()
    assert cluster.until(lambda: tracker.acked == set(range(6)))
    tasks_of_batch: dict[str, set[int]] = {}
    rows_of_task: dict[int, list[str]] = {}
    for task, row in entries(journal):
        tasks_of_batch.setdefault(row.split("-")[0], set()).add(task)
        rows_of_task.setdefault(task, []).append(row)
    assert all(len(tasks) == 1 for tasks in tasks_of_batch.values()), tasks_of_batch
    assert sorted(len(rows) for rows in rows_of_task.values()) == [8, 8, 8]
    for rows in rows_of_task.values():  # a batch's rows arrive in their order
        for n in {r.split("-")[0] for r in rows}:
            assert [r for r in rows if r.startswith(f"{n}-")] == [f"{n}-{i}" for i in range(4)]
