"""Where trees stall (issue 15, item 6): ``cluster.timed_out(name)`` names, for each
recent timed-out tree, its spout message and the tasks that still held its tuples."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, Config, TopologyBuilder
from tupletree.errors import TopologyNotFoundError
from tupletree.runtime.stalls import (
    EXECUTING,
    QUEUED,
    HeldTuples,
    Holder,
    TimedOutLog,
    TimedOutTree,
    find_holders,
)
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

SRC = TupleSource("up", "default", 1, Fields(["n"]))


class PassOn(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


class KeepsOdd(Bolt):
    """Acks even numbers; keeps odd ones and never acks them."""

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector, self.kept = collector, []

    def execute(self, tup: Any) -> None:
        if tup[0] % 2:
            self.kept.append(tup)
        else:
            self.collector.ack(tup)


def submit(cluster: Any, name: str = "stall") -> tuple[FeederSpout, AckFailTracker]:
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("pass", PassOn()).shuffle_grouping("feed")
    b.set_bolt("keeper", KeepsOdd(), parallelism=2).fields_grouping("pass", ["n"])
    cluster.submit_topology(name, {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}, b.create_topology())
    return feeder, tracker


def test_a_bolt_that_never_acks_is_named_in_the_timed_out_tree(sim_cluster):
    """The tree of an odd number times out (between one and two timeouts after its emit);
    its record names the spout task and message id, and the keeper task that held the
    tuple in execute since the emit. Acked trees leave no record."""
    feeder, tracker = submit(sim_cluster)
    feeder.feed([1], msg_id="one")
    feeder.feed([2], msg_id="two")
    assert sim_cluster.wait_idle()
    assert sim_cluster.timed_out("stall") == []
    worker = sim_cluster._workers["stall"]
    watched = [len(ex.held) for ex in worker.bolts if getattr(ex, "held", None) is not None]
    assert sorted(watched) == [0, 1]  # the acked input is not watched, the kept one is
    sim_cluster.advance_time(61)
    assert tracker.failed == {"one"} and tracker.acked == {"two"}
    (tree,) = sim_cluster.timed_out("stall")
    layout = sim_cluster._workers["stall"].layout
    keeper_tasks = layout.component_to_tasks["keeper"]
    assert tree.spout_component == "feed"
    assert tree.spout_task == layout.component_to_tasks["feed"][0]
    assert tree.msg_id == "one"
    assert tree.age_secs == 60.0
    (holder,) = tree.holders
    assert holder.component == "keeper" and holder.task in keeper_tasks
    assert holder.state == EXECUTING and holder.tuples == 1
    assert holder.held_secs == 60.0
    assert TimedOutTree.from_dict(tree.to_dict()) == tree


def test_timed_out_keeps_the_newest_hundred_newest_last(sim_cluster):
    """150 trees time out: the newest 100 are kept, in emit order."""
    feeder, _ = submit(sim_cluster, "many")
    for i in range(150):
        feeder.feed([2 * i + 1], msg_id=i)
    assert sim_cluster.wait_idle()
    sim_cluster.advance_time(61)
    trees = sim_cluster.timed_out("many")
    assert [t.msg_id for t in trees] == list(range(50, 150))
    assert all(t.holders and t.holders[0].component == "keeper" for t in trees)
    log = sim_cluster._workers["many"].timed_out
    assert log.count == 150
    assert [d["msg_id"] for d in log.since(140)] == list(range(140, 150))


def test_timed_out_of_an_unknown_topology_names_it(sim_cluster):
    """An unknown topology name is TopologyNotFoundError, as for metrics."""
    with pytest.raises(TopologyNotFoundError):
        sim_cluster.timed_out("nope")


class FakeBolt:
    def __init__(self, component: str, task: int, inbox: list, held: Any = None) -> None:
        self.component_id, self.task_id, self.inbox, self.held = component, task, inbox, held


def test_find_holders_tells_queued_from_executing():
    """Queued tuples are found in inboxes with the queue position of the first; held
    ones with the longest time held; settled or other trees' tuples are ignored; a
    tuple in two trees counts for both."""
    now = [100.0]
    held = HeldTuples(lambda: now[0])
    t_exec = Tuple([1], SRC, 7, 70)
    held.add(t_exec)
    settled = Tuple([2], SRC, 7, 71)
    held.add(settled)
    settled._ack_val = -1
    now[0] = 130.0
    multi = Tuple([3], SRC, 0, 0, {7: 1, 8: 2})
    bolts = [
        FakeBolt("a", 1, [Tuple([0], SRC, 9, 90), Tuple([0], SRC, 9, 91), multi], None),
        FakeBolt("b", 2, [], held),
    ]
    found = find_holders(bolts, [7, 8, 5], now=140.0)
    assert found[7] == [
        Holder("a", 1, QUEUED, 1, None, 2),
        Holder("b", 2, EXECUTING, 1, 40.0, None),
    ]
    assert found[8] == [Holder("a", 1, QUEUED, 1, None, 2)]
    assert 5 not in found


def test_find_holders_counts_the_rows_of_a_queued_batch_per_tree():
    """A BatchBolt's inbox holds Batches: a tree's rows in one are counted, at the
    batch's queue position, and a row in two trees counts for both."""
    from tupletree.topology.batch import Batch

    rows = [Tuple([0], SRC, 7, 70), Tuple([1], SRC, 7, 71), Tuple([2], SRC, 9, 90)]
    rows.append(Tuple([3], SRC, 0, 0, {7: 1, 8: 2}))
    inbox = [Tuple([5], SRC, 9, 95), Batch.of_tuples(rows)]
    found = find_holders([FakeBolt("batch", 4, inbox)], [7, 8, 9, 5], now=1.0)
    assert found[7] == [Holder("batch", 4, QUEUED, 3, None, 1)]
    assert found[8] == [Holder("batch", 4, QUEUED, 1, None, 1)]
    assert found[9] == [Holder("batch", 4, QUEUED, 2, None, 0)]
    assert 5 not in found


def test_held_tuples_are_bounded_and_pruned_of_settled_ones():
    """A full table drops the tuples settled since; still full, a new tuple goes
    unwatched (counted)."""
    held = HeldTuples(lambda: 0.0, limit=3)
    tups = [Tuple([i], SRC, 1, i + 1) for i in range(5)]
    for t in tups[:3]:
        held.add(t)
    tups[0]._ack_val = -1
    held.add(tups[3])
    assert len(held) == 3 and held.unwatched == 0
    held.add(tups[4])
    assert len(held) == 3 and held.unwatched == 1
    assert [t for _, t in held.unsettled()] == tups[1:4]


def test_a_full_table_sweeps_at_most_once_per_quarter_of_its_limit_turned_away():
    """Settled tuples at the old end leave at once; one settled behind an unsettled
    oldest is swept out only after limit // 4 tuples were turned away since the last
    sweep (a full table of unsettled tuples must not cost a pass per tuple), and after a
    sweep that freed little, only after twice as many."""
    held = HeldTuples(lambda: 0.0, limit=8)
    tups = [Tuple([i], SRC, 1, i + 1) for i in range(20)]
    for t in tups[:8]:
        held.add(t)
    held.add(tups[8])  # full, nothing settled: the first sweep finds nothing
    assert held.unwatched == 1
    tups[3]._ack_val = -1  # settled behind the unsettled oldest
    for t in tups[9:12]:  # 1, 2, 3 turned away since the sweep: not yet (4 after it)
        held.add(t)
    assert held.unwatched == 4 and any(t is tups[3] for _, t in held._items)
    held.add(tups[12])  # four: the sweep frees tups[3]'s place
    assert held.unwatched == 4 and len(held) == 8
    assert tups[3] not in [t for _, t in held.unsettled()]
    tups[0]._ack_val = -1  # the oldest settles: it leaves at once, no sweep needed
    held.add(tups[13])
    assert held.unwatched == 4
    assert [t for _, t in held.unsettled()] == [*tups[1:3], *tups[4:8], tups[12], tups[13]]


def test_a_sweep_that_frees_much_brings_the_quarter_back():
    """After sweeps that found little the wait is longer; one that frees a quarter of
    the table or more sets it back to limit // 4."""
    held = HeldTuples(lambda: 0.0, limit=8)
    tups = [Tuple([i], SRC, 1, i + 1) for i in range(40)]
    for t in tups[:9]:
        held.add(t)  # the 9th: a sweep finds nothing, the next waits for 4
    assert held._sweep_after == 4
    for t in tups[1:8]:
        t._ack_val = -1  # all but the oldest settle
    for t in tups[9:13]:
        held.add(t)  # the fourth turned away sweeps: 7 places free
    assert held._sweep_after == 2 and len(held) == 2


def test_log_searches_only_the_newest_it_keeps():
    """A timeout burst larger than the log records (and searches for) only the newest."""

    class Spout:
        component_id, task_id = "s", 4

    log = TimedOutLog(lambda: 10.0, [], limit=2)
    log.record(Spout(), [(1, "a", 0.0), (2, "b", 1.0), (3, "c", 2.0)])
    assert [(t.msg_id, t.age_secs, t.holders) for t in log.records()] == [
        ("b", 9.0, ()),
        ("c", 8.0, ()),
    ]
    assert log.count == 3


class Pairs(Bolt):
    """Emits one tuple anchored to every two inputs (multi-anchored), acks both."""

    outputs = ["n"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector, self.waiting = collector, []

    def execute(self, tup: Any) -> None:
        self.waiting.append(tup)
        if len(self.waiting) == 2:
            self.collector.emit([tup[0]], anchors=self.waiting)
            for held in self.waiting:
                self.collector.ack(held)
            self.waiting = []


class KeepsAll(Bolt):
    """Keeps every input, never acks."""

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.kept: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.kept.append(tup)


def test_a_held_multi_anchored_tuple_is_named_in_both_trees(sim_cluster):
    """A tuple anchored to two trees, held by a bolt that never acks it: both trees
    time out, and each record names that bolt's task as where it stalled."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("pairs", Pairs()).shuffle_grouping("feed")
    b.set_bolt("keeper", KeepsAll()).shuffle_grouping("pairs")
    sim_cluster.submit_topology(
        "multi", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}, b.create_topology()
    )
    feeder.feed([1], msg_id="a")
    feeder.feed([2], msg_id="b")
    assert sim_cluster.wait_idle()
    sim_cluster.advance_time(61)
    assert tracker.failed == {"a", "b"}
    trees = sim_cluster.timed_out("multi")
    assert sorted(t.msg_id for t in trees) == ["a", "b"]
    for tree in trees:
        assert [(h.component, h.state) for h in tree.holders] == [("keeper", EXECUTING)]
