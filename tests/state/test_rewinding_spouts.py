"""The aligned mode with a real rewindable source: the SQLite queue's spout (its position
is the last id it emitted). A stateful word count over the queue is killed between
PREPARE and COMMIT and after COMMIT, then submitted again: the counts are exact, and the
queue ends with every message done."""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

import pytest

from tupletree import BasicBolt, Config, LocalCluster, TopologyBuilder
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout
from tupletree.testing.shared import SharedList
from tupletree.topology.components import Spout
from tupletree.topology.groupings import CustomStreamGrouping

from . import crash
from .components import StatefulWordCount, committed, expected_counts, run_until, sentence
from .conftest import Provider


class SplitBody(BasicBolt):
    """(id, body) -> (word, id, position)."""

    outputs = ["word", "msg", "pos"]

    def execute(self, tup: Any, collector: Any) -> None:
        for pos, word in enumerate(tup[1].split()):
            collector.emit([word, tup[0], pos])


def topology(path: str) -> Any:
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=5), 2)
    b.set_bolt("split", SplitBody(), 2).shuffle_grouping("queue")
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", ["word"])
    return b.create_topology()


def test_queue_spout_rewinds_in_id_order_and_commits_its_position(tmp_path):
    """position() is the last id emitted; rewind goes back; committed() marks done."""
    path = str(tmp_path / "q.db")
    queue = SQLiteQueue(path)
    queue.put(f"m{i}" for i in range(1, 7))

    class Out:
        emitted: list[int] = []

        def emit(self, values, msg_id=None, stream="default"):
            self.emitted.append(msg_id)

    class Ctx:
        topology_name, component_id, this_task_index = "t", "queue", 0

        def this_component_tasks(self):
            return [1]

    spout, out = SQLiteQueueSpout(path, batch=2), Out()
    spout.open({}, Ctx(), out)
    spout.rewind(None)
    for _ in range(4):
        spout.next_tuple()
    assert out.emitted == [1, 2, 3, 4] and spout.position() == 4
    spout.rewind(2)
    spout.next_tuple()
    assert out.emitted[-1] == 3
    spout.committed(3)
    assert queue.counts()["done"] == 3
    spout.rewind(None)  # afresh: from before the first message not done
    spout.next_tuple()
    assert out.emitted[-1] == 4
    queue.close()


@pytest.mark.parametrize("point", ["after-prepare", "after-commit"])
def test_aligned_word_count_over_the_sqlite_queue_is_exact_after_a_kill(
    durable_provider: Provider, monkeypatch: pytest.MonkeyPatch, tmp_path: Any, point: str
) -> None:
    crash.install(monkeypatch)
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    n = 120
    queue.put(" ".join(sentence(i - 1)) for i in range(1, n + 1))
    which = "prepare" if point == "after-prepare" else "commit"
    snapshot = str(tmp_path / "queue-at-the-crash.db")

    def copy(source: str, target: str) -> None:
        with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
            src.backup(dst)

    # The queue file is left as it was when the worker died, like the store.
    crashed = crash.Crash(
        crash.txid_written("count", which, 2, tasks=2), on_crash=lambda: copy(path, snapshot)
    )
    base = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
    }
    with LocalCluster(simulate_time=True) as cluster:
        conf = {**base, **durable_provider.conf}
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = crashed.config(durable_provider.config)
        cluster.submit_topology("wc", conf, topology(path))
        run_until(cluster, lambda: crashed.crashed, f"crashed {point}", 40)
        cluster.kill_topology("wc")
    copy(snapshot, path)
    assert queue.counts()["done"] < n
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", {**base, **durable_provider.conf}, topology(path))
        run_until(cluster, lambda: queue.counts()["done"] == n, "every message done")
        assert cluster.errors("wc") == []
    state = committed(durable_provider.open())
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    applied = Counter(v for k, v in state.items() if isinstance(k, tuple))
    assert counts == expected_counts(n)
    assert applied == Counter({1: sum(len(sentence(i)) for i in range(n))})
    if point == "after-prepare":  # rolled back: what checkpoint 2 held comes again
        assert max(queue.deliveries().values()) >= 2, "nothing emitted again: the kill missed"
    queue.close()


class FailsOnce(CustomStreamGrouping):
    """A user's grouping that raises on message ``bad``'s first emit, as a grouping that
    cannot parse one odd message would: the raise leaves the spout's ``next_tuple``
    after the spout took the message from its source."""

    def __init__(self, bad: int, raised: SharedList) -> None:
        self.bad, self.raised = bad, raised

    def prepare(self, context: Any, stream: Any, target_tasks: list[int]) -> None:
        self.targets = target_tasks

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        if values[0] == self.bad and not self.raised:
            self.raised.append(values[0])
            raise ValueError(f"cannot route message {values[0]}")
        return [self.targets[values[0] % len(self.targets)]]


def test_a_raise_in_next_tuple_rewinds_rather_than_skips_the_message(
    durable_provider: Provider, tmp_path: Any
) -> None:
    """The aligned mode's exactly-once: a rewindable spout whose ``next_tuple`` raises
    may have moved its position past a message it never emitted (the SQLite queue had:
    its cursor moves before the emit). Committed, that position would skip the message
    for good. The wrapper treats the raise as a failed input: the next PREPARE is
    refused and the recovery rewinds, so the message comes again and counts once."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    n, bad = 40, 7
    queue.put(" ".join(sentence(i - 1)) for i in range(1, n + 1))
    raised = SharedList()
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=5))
    b.set_bolt("split", SplitBody(), 2).custom_grouping("queue", FailsOnce(bad, raised))
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", ["word"])
    conf = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
        **durable_provider.conf,
    }
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", conf, b.create_topology())
        run_until(cluster, lambda: queue.counts()["done"] == n, "every message done")
        assert raised.items() == [bad]
        (error,) = cluster.errors("wc")
        assert f"cannot route message {bad}" in error
    state = committed(durable_provider.open())
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    applied = Counter(v for k, v in state.items() if isinstance(k, tuple))
    assert counts == expected_counts(n)
    assert applied == Counter({1: sum(len(sentence(i)) for i in range(n))})
    queue.close()


class Numbers(Spout):
    """A rewindable spout that emits 0, 1, 2, ... (its position: how many so far)."""

    outputs = ["n"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.next = collector, 0

    def next_tuple(self) -> None:
        self.collector.emit([self.next], msg_id=self.next)
        self.next += 1

    def position(self) -> int:
        return self.next

    def rewind(self, position: int | None) -> None:
        self.next = position or 0

    def ack(self, msg_id: Any) -> None:
        pass

    def fail(self, msg_id: Any) -> None:
        pass


def test_a_rewound_spout_emits_again_only_once_its_initstate_went_through() -> None:
    """Each recovery rewinds the spouts with INITSTATE, which travels behind what the
    queues still hold from before. A spout that emitted again at once queued a fresh
    flood behind it; with max spout pending unset and queues slower to drain than the
    message timeout, the step timed out, the next recovery rewound and flooded again,
    and no checkpoint committed (a real-time word count stuck at one txid, its spout
    re-emitting ~350 messages a second, for minutes). The spout now waits until its
    INITSTATE barrier completed; a failed one keeps it paused for the next recovery."""
    import uuid

    from tupletree.state.aligned import CheckpointedSpout
    from tupletree.state.protocol import CHECKPOINT_STREAM, INITSTATE
    from tupletree.state.spout import STEP_KEY, coordinator_namespace
    from tupletree.store import Put
    from tupletree.store.codec import dumps_json
    from tupletree.store.memory import forget

    from .fakes import FakeCollector, FakeContext

    name = f"state-test-{uuid.uuid4().hex}"
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "memory",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": name},
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 1000,
    }
    spout, out, ctx = CheckpointedSpout(Numbers()), FakeCollector(), FakeContext("numbers")
    spout.open(conf, ctx, out)
    store = Provider("memory", {"name": name}).open()

    def publish(seq: int) -> Any:
        step = dumps_json({"seq": seq, "txid": -1, "action": INITSTATE})
        store.apply([Put(coordinator_namespace(), STEP_KEY, step)])
        ctx.clock += 1
        assert spout._poll_steps()
        ((_, values, barrier),) = [e for e in out.emitted if e[0] == CHECKPOINT_STREAM]
        assert values == [-1, INITSTATE]
        out.emitted.clear()
        return barrier

    def data() -> list[Any]:
        for _ in range(3):
            spout.next_tuple()
        emitted = [values for _, values, _ in out.emitted]
        out.emitted.clear()
        return emitted

    try:
        first = publish(1)
        assert data() == []  # not while the INITSTATE is on its way
        spout.fail(first)  # timed out behind the queues: the next recovery comes
        assert data() == []
        second = publish(2)
        assert data() == []
        spout.ack(second)
        assert data() == [[0], [1], [2]]
    finally:
        spout.close()
        forget(name)
