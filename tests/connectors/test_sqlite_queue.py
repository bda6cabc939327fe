"""The SQLite-backed queue and its spout, on LocalCluster (the Spark tests kill a worker
under it)."""

from __future__ import annotations

import time
import types
from typing import Any

import pytest

from tests.connectors.support import SlowAcker, until
from tupletree import BasicBolt, FailedException, LocalCluster, TopologyBuilder
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout, immediate
from tupletree.errors import InvalidConfigError


class FailFirstDelivery(BasicBolt):
    """Fails each message the first time it sees it: every one is replayed once."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.seen: set[int] = set()

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] not in self.seen:
            self.seen.add(tup[0])
            raise FailedException("first delivery")


def test_every_message_is_done_after_a_replay(tmp_path: Any) -> None:
    """The spout opens on the submitting thread and runs on the worker's: its connection
    must work on both; failed trees go back to ready and are delivered again."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"message {i}" for i in range(300))
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20))
    b.set_bolt("sink", FailFirstDelivery()).shuffle_grouping("queue")
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {}, b.create_topology())
        assert cluster.wait_idle(60)
        assert cluster.errors("q") == []
    assert queue.counts() == {"ready": 0, "leased": 0, "done": 300}
    assert set(queue.deliveries().values()) == {2}
    queue.close()


class FailPoisonBody(BasicBolt):
    """Fails every message whose body is "poison", every time."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1] == "poison":
            raise FailedException("poison")


def test_messages_as_trees_a_poison_holds_back_none_of_its_neighbours(tmp_path: Any) -> None:
    """``messages_per_tree``: leases of 50 go as trees of up to 50. The tree with the
    poison fails whole; its messages are leased again and, delivered before, each goes
    in a tree of its own: the good ones are done after one failure, the poison keeps
    failing alone (the queue has no dead letter), and the rest was never held back."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    bodies = [f"message {i}" for i in range(200)]
    queue.put([*bodies[:70], "poison", *bodies[70:]])
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=50, messages_per_tree=50))
    b.set_bolt("sink", FailPoisonBody()).shuffle_grouping("queue")
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {}, b.create_topology())
        assert until(lambda: queue.counts()["done"] == 200)
        trees = cluster.metrics("q")["queue"]["acked"]
        deliveries = queue.deliveries()
        cluster.kill_topology("q")
    poison = 71  # its row id
    assert deliveries[poison] >= 2  # its tree, then alone (again and again)
    others = {i: n for i, n in deliveries.items() if i != poison}
    assert set(others.values()) <= {1, 2}  # at most the one failure of the poison's tree
    assert 0 < sum(n == 2 for n in others.values()) <= 49
    assert trees < 200
    queue.close()


@pytest.mark.parametrize("bad", [0, 10_001, 2.5, True])
def test_a_bad_messages_per_tree_is_refused_naming_it(tmp_path: Any, bad: Any) -> None:
    with pytest.raises(ValueError, match="messages_per_tree must be an integer from 1 to"):
        SQLiteQueueSpout(str(tmp_path / "q.db"), messages_per_tree=bad)


def test_a_lease_smaller_than_a_tree_is_raised_to_fill_the_tree(tmp_path: Any) -> None:
    """``batch=5`` with trees of 20: a lease of 5 would cap every tree at 5 messages
    (the spout never waits to fill a tree), so the lease is raised to 20."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"m{i}" for i in range(50))
    spout, out = _opened(path, 0, batch=5, messages_per_tree=20)
    for _ in range(3):
        spout.next_tuple()
    assert [len(tree) for tree in out.emitted] == [20, 20, 10]
    assert queue.counts() == {"ready": 0, "leased": 50, "done": 0}
    for tree in out.emitted:
        spout.ack(tree)
    assert queue.counts() == {"ready": 0, "leased": 0, "done": 50}
    spout.close()
    queue.close()


def test_a_buffered_message_another_task_leased_meanwhile_is_not_emitted_twice(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """Task 0 leases five messages and emits one; then (a stall: max spout pending kept
    its ``next_tuple`` from being called) an hour passes, the leases expire and task 1
    leases all five. Task 0 must not emit the four still in its buffer: they are task
    1's now, which emits each once."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"m{i}" for i in range(5))
    first, first_out = _opened(path, 0, batch=5)
    second, second_out = _opened(path, 1, batch=5)
    first.next_tuple()
    assert first_out.emitted == [1]
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)
    for _ in range(6):
        second.next_tuple()
        first.next_tuple()
    assert first_out.emitted == [1], "emitted what task 1 now holds"
    assert sorted(second_out.emitted) == [1, 2, 3, 4, 5]
    for msg_id in second_out.emitted:
        second.ack(msg_id)
    assert queue.counts() == {"ready": 0, "leased": 0, "done": 5}
    for spout in (first, second):
        spout.close()
    queue.close()


def test_a_buffered_message_still_held_is_renewed_and_emitted(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The same stall with no other task: task 0's buffered messages are still its own,
    so their leases are renewed (no other task could take them now) and emitted."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"m{i}" for i in range(3))
    spout, out = _opened(path, 0, batch=3)
    spout.next_tuple()
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)
    spout.next_tuple()
    spout.next_tuple()
    assert out.emitted == [1, 2, 3]
    fresh = queue._conn.execute("SELECT id FROM messages WHERE leased_at = ?", (later,))
    assert sorted(row[0] for row in fresh) == [2, 3]
    spout.close()
    queue.close()


def test_a_failed_write_is_rolled_back(tmp_path: Any) -> None:
    queue = SQLiteQueue(str(tmp_path / "queue.db"))
    queue.put(["a"])
    conn = queue._conn
    with pytest.raises(RuntimeError), immediate(conn):
        conn.execute("UPDATE messages SET state='done'")
        raise RuntimeError("the body failed")
    assert queue.counts() == {"ready": 1, "leased": 0, "done": 0}
    queue.close()


def _lease_as(queue: SQLiteQueue, ids: list[int], lease: str, leased_at: float) -> None:
    """Mark messages leased by another spout task, as a dead one would have left them."""
    with immediate(queue._conn):
        queue._conn.executemany(
            "UPDATE messages SET state='leased', lease=?, leased_at=?, deliveries=1 WHERE id=?",
            [(lease, leased_at, i) for i in ids],
        )


def test_leases_of_a_task_that_never_comes_back_expire(tmp_path: Any) -> None:
    """Messages leased long ago by a spout task that will not start again (another
    topology name) are leased again once their visibility timeout passed; those leased
    just now by a live task are left alone."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(f"message {i}" for i in range(30))
    now = time.time()
    _lease_as(queue, list(range(1, 11)), "gone/queue/0", now - 3600)
    _lease_as(queue, list(range(11, 16)), "alive/queue/0", now)
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20, visibility_timeout_secs=60))
    b.set_bolt("sink", FailFirstDelivery()).shuffle_grouping("queue")
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {"topology.message.timeout.secs": 10}, b.create_topology())
        assert cluster.wait_idle(60)
    assert queue.counts() == {"ready": 0, "leased": 5, "done": 25}
    deliveries = queue.deliveries()
    assert all(deliveries[i] == 3 for i in range(1, 11))  # the dead lease, then 2 here
    assert all(deliveries[i] == 1 for i in range(11, 16))
    queue.close()


def test_a_visibility_timeout_a_tree_could_outlive_is_refused(tmp_path: Any) -> None:
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(str(tmp_path / "q.db"), visibility_timeout_secs=50))
    b.set_bolt("sink", FailFirstDelivery()).shuffle_grouping("queue")
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("q", {"topology.message.timeout.secs": 30}, b.create_topology())
    assert err.value.key == "topology.message.timeout.secs"
    assert "visibility_timeout_secs" in str(err.value) and "'queue'" in str(err.value)


def test_reset_timeout_renews_the_lease(tmp_path: Any) -> None:
    """A bolt holds the message ~3 s, three times the visibility timeout, resetting its
    timeout each tick: no other task's lease takes it over (one delivery)."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(["slow"])
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, visibility_timeout_secs=1.0), parallelism=2)
    b.set_bolt("slow", SlowAcker(hold_ticks=15)).shuffle_grouping("queue").add_configuration(
        "topology.tick.tuple.freq.secs", 0.2
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("q", {"topology.message.timeout.secs": 0.4}, b.create_topology())
        assert until(lambda: queue.counts()["done"] == 1)
    assert queue.deliveries() == {1: 1}
    queue.close()


class _Emits:
    def __init__(self) -> None:
        self.emitted: list[Any] = []

    def emit(self, values: list[Any], msg_id: Any = None) -> None:
        self.emitted.append(msg_id)

    def emit_batch(self, rows: list[list[Any]], msg_id: Any = None) -> None:
        assert [row[0] for row in rows] == list(msg_id)
        self.emitted.append(msg_id)


def _opened(
    path: str, task_index: int, batch: int = 1, messages_per_tree: int = 1
) -> tuple[SQLiteQueueSpout, _Emits]:
    spout = SQLiteQueueSpout(
        path, batch=batch, visibility_timeout_secs=60, messages_per_tree=messages_per_tree
    )
    context = types.SimpleNamespace(
        topology_name="q",
        component_id="queue",
        this_task_index=task_index,
        this_component_tasks=lambda: [1, 2],  # two spout tasks, as the test has
    )
    collector = _Emits()
    spout.open({}, context, collector)
    return spout, collector


def test_a_late_fail_does_not_free_a_lease_another_task_now_holds(tmp_path: Any) -> None:
    """Task 0's lease on the message expires and task 1 leases it; task 0's tree then
    fails: the message stays leased by task 1 (freeing it would hand it to a third
    delivery while task 1's tree is in flight); task 1's ack makes it done."""
    path = str(tmp_path / "queue.db")
    queue = SQLiteQueue(path)
    queue.put(["only"])
    first, first_out = _opened(path, 0)
    second, second_out = _opened(path, 1)
    first.next_tuple()
    (msg_id,) = first_out.emitted
    with immediate(queue._conn):  # task 0's lease is an hour old: expired
        queue._conn.execute("UPDATE messages SET leased_at = leased_at - 3600")
    second.next_tuple()
    assert second_out.emitted == [msg_id]
    first.fail(msg_id)
    assert queue.counts() == {"ready": 0, "leased": 1, "done": 0}
    second.next_tuple()
    assert second_out.emitted == [msg_id], "delivered a third time while task 1 holds it"
    second.ack(msg_id)
    assert queue.counts() == {"ready": 0, "leased": 0, "done": 1}
    assert queue.deliveries() == {msg_id: 2}
    for spout in (first, second):
        spout.close()
    queue.close()
