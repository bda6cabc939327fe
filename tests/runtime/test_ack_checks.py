"""``ack``, ``fail`` and ``reset_timeout`` take one Tuple. Given anything else (a list of
tuples, the usual slip, or None), they raise a TypeError naming the component, what
was passed and what to do, not an AttributeError from inside the collector (or, on the
compiled build, mypyc's bare "Tuple object expected"). The check costs nothing on the
normal path: the error is built only once the call has failed. Run against whichever
build is installed, as test_emit_checks.py."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from tupletree import Bolt, TopologyBuilder
from tupletree.runtime.collectors import OutputCollector, TaskWiring
from tupletree.testing import AckFailTracker, FeederSpout


class Settles(Bolt):
    """Calls ``collector.<how>(make(tup))`` and then acks the input properly."""

    outputs: list[str] = []

    def __init__(self, how: str, make: Any) -> None:
        self.how = how
        self.make = make

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        getattr(self.collector, self.how)(self.make(tup))
        self.collector.ack(tup)


def as_list(t: Any) -> Any:
    return [t]


def nothing(t: Any) -> Any:
    return None


def its_values(t: Any) -> Any:
    return t.values


@pytest.mark.parametrize(
    ("how", "make", "expected"),
    [
        ("ack", as_list, "ack takes one Tuple, got a list (["),
        ("fail", as_list, "fail takes one Tuple, got a list (["),
        ("reset_timeout", as_list, "reset_timeout takes one Tuple, got a list (["),
        ("ack", nothing, "ack takes one Tuple, got None"),
        ("ack", its_values, "ack takes one Tuple, got a list (['hello'])"),
    ],
    ids=["ack-list", "fail-list", "reset-list", "ack-none", "ack-values"],
)
def test_settling_something_else_than_a_tuple_names_it_and_fails_the_input(
    sim_cluster, how, make, expected
):
    tracker = AckFailTracker()
    feeder = FeederSpout(["line"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("settler", Settles(how, make)).shuffle_grouping("feed")
    sim_cluster.submit_topology("settles", {}, b.create_topology())
    feeder.feed(["hello"], msg_id="m1")
    assert sim_cluster.wait_idle()
    assert tracker.failed == {"m1"} and tracker.acked == set()
    errors = sim_cluster.errors("settles")
    assert len(errors) == 1
    assert "TypeError" in errors[0] and "component 'settler'" in errors[0]
    assert expected in errors[0]
    assert "AttributeError" not in errors[0] and "_ack_val" not in errors[0]


def test_a_list_passed_to_ack_is_refused_before_any_of_it_is_acked():
    out = OutputCollector(TaskWiring("counter", 1, {}, {}, acker_tasks=[9]))
    with pytest.raises(TypeError, match="call ack once per tuple") as caught:
        out.ack([1, 2])
    assert "component 'counter': ack takes one Tuple, got a list ([1, 2])" in str(caught.value)
    assert out.acks == {} and out._metrics.acked == 0
    with pytest.raises(TypeError, match="component 'counter': fail takes one Tuple, got int"):
        out.fail(7)
    assert out._metrics.failed == 0
    # A stateful bolt's ack is the collector's defer_ack.
    with pytest.raises(TypeError, match="component 'counter': ack takes one Tuple, got a tuple"):
        out.defer_ack((1, 2))
    assert out.deferred == {} and out.deferred_count == 0


@pytest.mark.parametrize("how", ["ack", "fail", "reset_timeout", "defer_ack"])
def test_the_error_carries_no_internal_exception_as_its_context(how):
    """Raised outside the except that caught the failed cast: on the compiled build,
    ``from None`` in the except still left mypyc's "Tuple object expected" as the
    context, printed above the useful error ("During handling of the above exception,
    another exception occurred")."""
    out = OutputCollector(TaskWiring("counter", 1, {}, {}, acker_tasks=[9]))
    with pytest.raises(TypeError, match="takes one Tuple, got a list") as caught:
        getattr(out, how)([1, 2])
    err = caught.value
    assert err.__context__ is None and err.__cause__ is None
    shown = "".join(traceback.format_exception(err))
    assert "During handling" not in shown and "Tuple object expected" not in shown
    assert "_ack_val" not in shown
