"""``emit(values, anchors=...)`` takes a Tuple or a list of Tuples. A list holding
something else was refused naming it ("anchors must be Tuples"); an anchors argument
that is not iterable at all (``anchors=5``) gave a bare "'int' object is not iterable"
from inside the collector. Now both say the same, naming the component and what was
passed. The check is on the failure path only: the list conversion the collector does
anyway raises, and the error is built then. Run against whichever build is installed,
as test_emit_checks.py."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Bolt, TopologyBuilder
from tupletree.testing import AckFailTracker, FeederSpout


class Sink(Bolt):
    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


class AnchorsTo(Bolt):
    """Emits ``[word]`` anchored to ``make(tup)`` (by emit, or emit_direct to the sink's
    task), then acks the input."""

    outputs = ["word"]

    def __init__(self, make: Any, direct: bool = False) -> None:
        self.make = make
        self.direct = direct

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"], direct=self.direct)

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.task = context.component_tasks("sink")[0]

    def execute(self, tup: Any) -> None:
        if self.direct:
            self.collector.emit_direct(self.task, [tup[0]], anchors=self.make(tup))
        else:
            self.collector.emit([tup[0]], anchors=self.make(tup))
        self.collector.ack(tup)


# Components are pickled for each task: the makers are module-level functions.
def five(t: Any) -> Any:
    return 5


def a_float(t: Any) -> Any:
    return 1.5


def list_of_five(t: Any) -> Any:
    return [t, 5]


def its_list(t: Any) -> Any:
    return [t]


@pytest.mark.parametrize(
    ("make", "direct", "expected"),
    [
        (five, False, "anchors must be Tuples (a Tuple or a list of them), got int 5"),
        (five, True, "anchors must be Tuples (a Tuple or a list of them), got int 5"),
        (a_float, False, "got float 1.5"),
        (list_of_five, False, "anchors must be Tuples, got int"),
    ],
    ids=["int", "int-direct", "float", "list-with-int"],
)
def test_anchors_that_are_not_tuples_name_the_component_and_fail_the_input(
    sim_cluster, make, direct, expected
):
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("anchorer", AnchorsTo(make, direct)).shuffle_grouping("feed")
    sink = b.set_bolt("sink", Sink())
    if direct:
        sink.direct_grouping("anchorer")
    else:
        sink.shuffle_grouping("anchorer")
    sim_cluster.submit_topology("anchors", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    assert tracker.failed == {"m1"} and tracker.acked == set()
    errors = sim_cluster.errors("anchors")
    assert len(errors) == 1, errors
    assert "TypeError" in errors[0] and "component 'anchorer'" in errors[0]
    assert expected in errors[0]
    assert "is not iterable" not in errors[0]


def test_a_list_of_tuples_as_anchors_still_goes_through(sim_cluster):
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("anchorer", AnchorsTo(its_list)).shuffle_grouping("feed")
    b.set_bolt("sink", Sink()).shuffle_grouping("anchorer")
    sim_cluster.submit_topology("anchors-ok", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    assert tracker.acked == {"m1"} and sim_cluster.errors("anchors-ok") == []


def settled_self(t: Any) -> Any:
    return t  # AcksFirst acks it before emitting: a settled anchor


class AcksFirst(AnchorsTo):
    """Acks the input, then emits anchored to ``make(tup)`` (refused: settled)."""

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)
        self.collector.emit([tup[0]], anchors=self.make(tup))


@pytest.mark.parametrize(
    ("bolt", "error"),
    [
        (AnchorsTo(five), "TypeError"),
        (AnchorsTo(five, direct=True), "TypeError"),
        (AnchorsTo(list_of_five), "TypeError"),
        (AcksFirst(settled_self), "EmitError"),
        (AcksFirst(its_list), "EmitError"),
    ],
    ids=["int", "int-direct", "list-with-int", "settled-tuple", "settled-in-list"],
)
def test_a_refused_emit_counts_neither_emitted_nor_transferred(sim_cluster, bolt, error):
    """An emit refused for its anchors sends nothing, so it counts nothing: it used
    to add one to ``emitted`` and its targets to ``transferred`` before the check."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("anchorer", bolt).shuffle_grouping("feed")
    sink = b.set_bolt("sink", Sink())
    if bolt.direct:
        sink.direct_grouping("anchorer")
    else:
        sink.shuffle_grouping("anchorer")
    sim_cluster.submit_topology("refused", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    errors = sim_cluster.errors("refused")
    assert len(errors) == 1 and error in errors[0], errors
    metrics = sim_cluster.metrics("refused")
    assert metrics["anchorer"]["executed"] == 1
    assert metrics["anchorer"]["emitted"] == 0
    assert metrics["anchorer"]["transferred"] == 0
    assert metrics["sink"]["executed"] == 0


def two_of_it(t: Any) -> Any:
    return [t, t]


def test_a_multi_anchored_emit_counts_once_emitted_and_per_target_transferred(sim_cluster):
    """The list-of-anchors path counts after its checks: a valid emit still counts
    (one emitted, one transferred per target), as the single-anchor path does."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("anchorer", AnchorsTo(two_of_it)).shuffle_grouping("feed")
    b.set_bolt("sink", Sink(), 2).all_grouping("anchorer")
    sim_cluster.submit_topology("multi", {}, b.create_topology())
    for i in range(3):
        feeder.feed(["hello"], msg_id=f"m{i}")
    assert sim_cluster.wait_idle()
    assert tracker.acked == {"m0", "m1", "m2"}, tracker.failed
    metrics = sim_cluster.metrics("multi")
    assert metrics["anchorer"]["emitted"] == 3
    assert metrics["anchorer"]["transferred"] == 6  # two sink tasks each
    assert metrics["sink"]["executed"] == 6


def _raises_inside(t: Any) -> Any:
    yield t
    raise TypeError("the anchors' own generator broke")


def a_broken_generator(t: Any) -> Any:
    return _raises_inside(t)


def test_an_iterable_whose_iteration_raises_keeps_its_own_error(sim_cluster):
    """Anchors that are iterable but raise a TypeError while iterated: that error is
    the user's to see, not "anchors must be Tuples" (which would point at the wrong
    mistake)."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("anchorer", AnchorsTo(a_broken_generator)).shuffle_grouping("feed")
    b.set_bolt("sink", Sink()).shuffle_grouping("anchorer")
    sim_cluster.submit_topology("gen", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    assert tracker.failed == {"m1"}
    errors = sim_cluster.errors("gen")
    assert len(errors) == 1 and "the anchors' own generator broke" in errors[0], errors
    assert "anchors must be Tuples" not in errors[0]
