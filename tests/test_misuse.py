"""Misuse that used to be silent gets a clear error (issue 13, items 8 and 9).

- ``emit({"word": "hello"})`` sent the dict's keys (tests/test_emit_checks.py has it
  with the other bad emits);
- an ``execute`` written as a generator ran nothing and acked;
- acking another topology's tuple made that topology's tree time out, with no error;
- ``emit`` returned the router's own list, so a caller changing it changed routing;
- a custom grouping that cannot be pickled failed submit with a bare AttributeError and
  left the topology's name registered.
"""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, InvalidTopologyError, Spout, TopologyBuilder
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.topology.groupings import CustomStreamGrouping

from .registry import Box

# -- generator and async methods ---------------------------------------------------------


class GeneratorBolt(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> Any:
        yield [tup[0]]


class AsyncBolt(Bolt):
    outputs = ["word"]

    async def execute(self, tup: Any) -> None:
        pass


class GeneratorSpout(Spout):
    outputs = ["word"]

    def next_tuple(self) -> Any:
        yield ["x"]


def test_a_generator_execute_is_refused_naming_the_component():
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["line"]))
    b.set_bolt("split", GeneratorBolt()).shuffle_grouping("feed")
    with pytest.raises(InvalidTopologyError, match=r"'split'.*execute is a generator") as info:
        b.create_topology()
    assert info.value.component == "split"


def test_an_async_execute_and_a_generator_next_tuple_are_refused():
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["line"]))
    b.set_bolt("wait", AsyncBolt()).shuffle_grouping("feed")
    with pytest.raises(InvalidTopologyError, match=r"'wait'.*coroutine function"):
        b.create_topology()
    b = TopologyBuilder()
    b.set_spout("gen", GeneratorSpout())
    with pytest.raises(InvalidTopologyError, match=r"'gen'.*next_tuple is a generator"):
        b.create_topology()


def _method(kind: str, name: str) -> Any:
    """A method named ``name`` of the given kind (its body would record a call)."""
    if kind == "generator":

        def method(self: Any, *args: Any) -> Any:
            yield args

    elif kind == "async generator":

        async def method(self: Any, *args: Any) -> Any:
            yield args

    else:

        async def method(self: Any, *args: Any) -> Any:
            return args

    method.__name__ = name
    return method


SPOUT_METHODS = ("open", "next_tuple", "ack", "fail", "activate", "deactivate", "close")
BOLT_METHODS = ("prepare", "execute", "cleanup")


@pytest.mark.parametrize("kind", ["generator", "async generator", "coroutine"])
@pytest.mark.parametrize(
    ("role", "name"), [("spout", n) for n in SPOUT_METHODS] + [("bolt", n) for n in BOLT_METHODS]
)
def test_every_called_method_written_as_a_generator_or_async_is_refused(
    role: str, name: str, kind: str
) -> None:
    """Each method the runtime calls, on a spout or a bolt, written as a generator, an
    async generator or a coroutine function: refused when the topology is built, naming
    the component and the method (none of its body would ever run)."""
    base = Spout if role == "spout" else Bolt
    cls = type("Odd", (base,), {"outputs": ["x"], name: _method(kind, name)})
    b = TopologyBuilder()
    if role == "spout":
        b.set_spout("odd", cls())
    else:
        b.set_spout("feed", FeederSpout(["line"]))
        b.set_bolt("odd", cls()).shuffle_grouping("feed")
    what = "coroutine function" if kind == "coroutine" else "generator function"
    with pytest.raises(InvalidTopologyError, match=rf"'odd'.*Odd\.{name} is a {what}") as info:
        b.create_topology()
    assert info.value.component == "odd"


# -- another topology's tuples --------------------------------------------------------------


class Stash(Bolt):
    """Keeps its inputs in a Box shared by every copy in this process (as a class
    attribute would be), and never settles them itself."""

    outputs = ["word"]

    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.box.get().setdefault("kept", []).append(tup)


class Grab(Bolt):
    """Acks (or fails, or anchors to) the first tuple stashed by the other topology."""

    outputs = ["word"]

    def __init__(self, box: Box, how: str) -> None:
        self.box = box
        self.how = how

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        stolen = self.box.get()["kept"][0]
        if self.how == "ack":
            self.collector.ack(stolen)
        elif self.how == "fail":
            self.collector.fail(stolen)
        else:
            self.collector.emit(["x"], anchors=stolen)
        self.collector.ack(tup)


@pytest.mark.parametrize(
    ("how", "said"), [("ack", "acked"), ("fail", "failed"), ("anchor", "anchored an emit to")]
)
def test_a_tuple_of_another_topology_is_refused_and_stays_its_owners(sim_cluster, how, said):
    box = Box()
    tracker_a = AckFailTracker()
    feeder_a = FeederSpout(["w"], tracker=tracker_a)
    a = TopologyBuilder()
    a.set_spout("feed", feeder_a)
    a.set_bolt("stash", Stash(box)).shuffle_grouping("feed")
    tracker_b = AckFailTracker()
    feeder_b = FeederSpout(["w"], tracker=tracker_b)
    b = TopologyBuilder()
    b.set_spout("feed", feeder_b)
    b.set_bolt("grab", Grab(box, how)).shuffle_grouping("feed")
    sim_cluster.submit_topology("a", {}, a.create_topology())
    sim_cluster.submit_topology("b", {}, b.create_topology())
    feeder_a.feed(["mine"], msg_id="a1")
    assert sim_cluster.wait_idle()
    feeder_b.feed(["thief"], msg_id="b1")
    assert sim_cluster.wait_idle()
    (error,) = sim_cluster.errors("b")
    assert f"component 'grab' {said} a tuple of another topology (topology 'a'" in error
    assert tracker_b.failed == {"b1"}  # its own input failed at once, as for any error
    stolen = box.get()["kept"][0]
    assert not stolen.is_settled()  # still topology a's to settle


# -- emit's return value ------------------------------------------------------------------


class Meddles(BasicBolt):
    """Changes the lists emit returns, in every way a caller might."""

    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        first = collector.emit([tup[0]])
        assert len(set(first)) == 3
        first.clear()
        second = collector.emit([tup[0]])
        second += second
        second.append(999)


class Counts(BasicBolt):
    outputs: list[str] = []

    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def execute(self, tup: Any, collector: Any) -> None:
        counts = self.box.get()
        counts[self.task] = counts.get(self.task, 0) + 1


def test_changing_the_list_emit_returned_changes_no_routing(sim_cluster):
    box = Box()
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("meddle", Meddles()).shuffle_grouping("feed")
    b.set_bolt("count", Counts(box), parallelism=3).all_grouping("meddle")
    sim_cluster.submit_topology("t", {}, b.create_topology())
    for i in range(5):
        feeder.feed([i], msg_id=i)
    assert sim_cluster.wait_idle()
    assert sim_cluster.errors("t") == []
    assert tracker.acked == set(range(5))
    counts = box.get()
    assert len(counts) == 3 and set(counts.values()) == {10}  # every emit, all three tasks


# -- custom groupings that cannot be copied ----------------------------------------------------


class WithLambda(CustomStreamGrouping):
    def __init__(self) -> None:
        self.pick = lambda tasks: tasks[:1]

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.tasks = target_tasks

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return self.pick(self.tasks)


class PrepareRaises(CustomStreamGrouping):
    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        raise KeyError("no such table")

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return []


class First(CustomStreamGrouping):
    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.tasks = target_tasks

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return self.tasks[:1]


class Sink(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def grouped_by(grouping: CustomStreamGrouping) -> Any:
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["n"]))
    b.set_bolt("sink", Sink(), parallelism=2).custom_grouping("feed", grouping)
    return b.create_topology()


@pytest.mark.parametrize(
    ("grouping", "said"),
    [(WithLambda(), "cannot be copied to the emitting tasks"), (PrepareRaises(), "prepared")],
    ids=["unpicklable", "prepare-raises"],
)
def test_a_bad_custom_grouping_fails_submit_naming_it_and_registers_nothing(
    sim_cluster, grouping, said
):
    with pytest.raises(InvalidTopologyError, match=said) as info:
        sim_cluster.submit_topology("t", {}, grouped_by(grouping))
    assert info.value.component == "sink" and info.value.stream == "default"
    assert "'sink'" in str(info.value) and "'feed'" in str(info.value)
    assert sim_cluster.topologies() == []
    # The name is free: a corrected topology goes in under it.
    sim_cluster.submit_topology("t", {}, grouped_by(First()))
    assert sim_cluster.topologies() == ["t"]
