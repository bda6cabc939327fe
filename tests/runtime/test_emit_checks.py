"""A bad emit is an EmitError that names the component and stream; the input tuple fails
(the spout can replay it) and the worker keeps going. These run against whichever build
is installed: on the compiled one they also prove that mypyc's run-time type checks never
replace these messages with a bare TypeError."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, TopologyBuilder
from tupletree.testing import AckFailTracker, FeederSpout

from ..registry import entries, new_journal, record


class Emits(BasicBolt):
    """Emits whatever ``make(tup)`` returns, as ``emit(values)`` or with ``stream``."""

    outputs = ["word"]

    def __init__(self, make: Any, stream: str | None = None, direct_to: int | None = None):
        self.make = make
        self.stream = stream
        self.direct_to = direct_to

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("pair", ["a", "b"])
        declarer.declare_stream("targeted", ["word"], direct=True)

    def execute(self, tup: Any, collector: Any) -> None:
        values = self.make(tup)
        if self.direct_to is not None:
            collector.emit_direct(self.direct_to, values, stream=self.stream or "default")
        elif self.stream is None:
            collector.emit(values)
        else:
            collector.emit(values, stream=self.stream)


# Components are pickled for each task, so the value makers are module-level functions.
def first(t: Any) -> Any:
    return t[0]


def forty_two(t: Any) -> Any:
    return 42


def two(t: Any) -> Any:
    return ["a", "b"]


def one(t: Any) -> Any:
    return ["a"]


def upper_tuple(t: Any) -> Any:
    return (t[0].upper(),)


def as_dict(t: Any) -> Any:
    return {"word": t[0]}


def as_set(t: Any) -> Any:
    return {t[0]}


def bare_if_bad(t: Any) -> Any:
    return t[0] if t[0] == "bad" else [t[0]]


class Sink(BasicBolt):
    outputs: list[str] = []

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def execute(self, tup: Any, collector: Any) -> None:
        record(self.journal, (tup.source_stream, list(tup.values)))


def run(sim_cluster, bolt: Emits) -> tuple[AckFailTracker, list[str], list[Any]]:
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    seen = new_journal()
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("emitter", bolt).shuffle_grouping("feed")
    sink = b.set_bolt("sink", Sink(seen))
    sink.shuffle_grouping("emitter").shuffle_grouping("emitter", "pair")
    sink.direct_grouping("emitter", "targeted")
    sim_cluster.submit_topology("emits", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    return tracker, sim_cluster.errors("emits"), entries(seen)


@pytest.mark.parametrize(
    ("bolt", "expected"),
    [
        (Emits(first), "values must be a list, got str 'hello'"),
        (Emits(forty_two), "values must be a list, got int 42"),
        (
            Emits(as_dict),
            "values must be a list in the order of the declared fields ['word'], "
            "got a dict ({'word': 'hello'}); for a dict d, emit [d[f] for f in ['word']]",
        ),
        (Emits(as_set), "got a set ({'hello'})"),
        (Emits(two), "emitted 2 value(s) on stream 'default'"),
        (Emits(one, stream="nope"), "emitted on undeclared stream 'nope'"),
        (Emits(one, stream="targeted"), "stream 'targeted' is direct"),
        (Emits(one, direct_to=1), "which is not declared direct"),
        (Emits(one, stream="targeted", direct_to=999), "emit_direct to task 999"),
    ],
    ids=[
        "str",
        "int",
        "dict",
        "set",
        "arity",
        "undeclared",
        "direct-by-emit",
        "not-direct",
        "bad-task",
    ],
)
def test_bad_emit_names_component_and_fails_the_input(sim_cluster, bolt, expected):
    tracker, errors, seen = run(sim_cluster, bolt)
    assert tracker.failed == {"m1"} and tracker.acked == set()
    assert seen == []
    assert len(errors) == 1
    assert "EmitError" in errors[0] and "'emitter'" in errors[0]
    assert expected in errors[0]


def test_a_tuple_or_any_sized_sequence_is_accepted_as_values(sim_cluster):
    tracker, errors, seen = run(sim_cluster, Emits(upper_tuple))
    assert errors == []
    assert seen == [("default", ["HELLO"])]
    assert tracker.acked == {"m1"}


def test_the_worker_goes_on_after_a_bad_emit(sim_cluster):
    """One input's bad emit fails that input only; the next inputs are processed."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    seen = new_journal()
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    bolt = Emits(bare_if_bad)
    b.set_bolt("emitter", bolt).shuffle_grouping("feed")
    b.set_bolt("sink", Sink(seen)).shuffle_grouping("emitter")
    sim_cluster.submit_topology("goes-on", {}, b.create_topology())
    for i, line in enumerate(["a", "bad", "b"]):
        feeder.feed([line], msg_id=i)
    assert sim_cluster.wait_idle()
    assert tracker.failed == {1} and tracker.acked == {0, 2}
    assert sorted(v for _, v in entries(seen)) == [["a"], ["b"]]
