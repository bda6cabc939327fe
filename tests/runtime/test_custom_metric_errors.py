"""A custom metric (``context.register_metric``) whose read raises is read at every
metrics collection: ``cluster.metrics``, each worker report, each scrape of the web
view. Reported each time, one broken metric filled the topology's error records (and
pushed the task errors that matter out of them). Now it is reported once, when it
starts failing, and again only after it has read fine in between and at most once per
METRIC_ERROR_WINDOW_SECS of the worker's clock; its value is None while it fails, and
the component's other metrics are read as usual."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, TopologyBuilder
from tupletree.runtime.executors import METRIC_ERROR_WINDOW_SECS
from tupletree.testing import FeederSpout

from ..registry import Box


class Measured(BasicBolt):
    """Registers ``reads`` (how often it was read) and ``load``, which raises while the
    box says ``broken``."""

    outputs: list[str] = []

    def __init__(self, box: Box) -> None:
        self.box = box

    def prepare(self, conf: Any, context: Any) -> None:
        self.reads = 0
        context.register_metric("load", self.load)
        context.register_metric("reads", self.count_reads)

    def load(self) -> int:
        if self.box.get()["broken"]:
            raise ZeroDivisionError("the load gauge divides by zero")
        return 7

    def count_reads(self) -> int:
        self.reads += 1
        return self.reads

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def test_a_metric_that_raises_is_reported_once_per_failure_not_per_read(sim_cluster):
    box = Box()
    box.get()["broken"] = True
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["n"]))
    b.set_bolt("measured", Measured(box)).shuffle_grouping("feed")
    sim_cluster.submit_topology("measured", {}, b.create_topology())
    assert sim_cluster.wait_idle()

    def read() -> dict[str, Any]:
        custom = sim_cluster.metrics("measured")["measured"]["custom"]
        return {name: values[next(iter(values))] for name, values in custom.items()}

    seen = [read() for _ in range(50)]
    assert [m["load"] for m in seen] == [None] * 50
    assert [m["reads"] for m in seen] == list(range(1, 51))  # the others still read
    errors = sim_cluster.errors("measured")
    assert len(errors) == 1, errors
    assert "metric load" in errors[0] and "the load gauge divides by zero" in errors[0]
    assert sim_cluster.metrics("measured")["measured"]["errors"] == 1

    sim_cluster.advance_time(METRIC_ERROR_WINDOW_SECS)  # past the rate limit (below)
    box.get()["broken"] = False  # it reads again...
    assert read()["load"] == 7
    box.get()["broken"] = True  # ...and fails again: a new failure, told once more
    for _ in range(10):
        assert read()["load"] is None
    assert len(sim_cluster.errors("measured")) == 2


def test_a_metric_that_flaps_is_reported_at_most_once_per_window(sim_cluster):
    """A metric that raises at every other read starts a new run of failures at every
    other read: it used to add an error record each time. Now a metric's errors are
    also rate-limited by the worker's clock: at most one record per metric per
    METRIC_ERROR_WINDOW_SECS (Storm's error throttle window, log_limit.py)."""
    box = Box()
    box.get()["broken"] = True
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["n"]))
    b.set_bolt("measured", Measured(box), 2).shuffle_grouping("feed")
    sim_cluster.submit_topology("flaps", {}, b.create_topology())
    assert sim_cluster.wait_idle()

    def flap(reads: int) -> None:
        for i in range(reads):
            box.get()["broken"] = i % 2 == 0
            values = sim_cluster.metrics("flaps")["measured"]["custom"]["load"]
            assert set(values.values()) == ({None} if i % 2 == 0 else {7})

    flap(40)
    errors = sim_cluster.errors("flaps")
    assert len(errors) == 2, errors  # one per task (each its own metric)
    assert all("metric load" in e for e in errors)
    assert sim_cluster.metrics("flaps")["measured"]["errors"] == 2

    sim_cluster.advance_time(METRIC_ERROR_WINDOW_SECS - 1)  # still within the window
    flap(40)
    assert len(sim_cluster.errors("flaps")) == 2

    sim_cluster.advance_time(1)  # a window after the first record: told once more each
    flap(40)
    assert len(sim_cluster.errors("flaps")) == 4
    assert sim_cluster.metrics("flaps")["measured"]["errors"] == 4


def test_a_metric_that_keeps_failing_is_not_reported_again_each_window(sim_cluster):
    """The window only limits how often a *new* run of failures is told: a metric that
    never reads fine again stays at one record however long it goes on failing."""
    box = Box()
    box.get()["broken"] = True
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["n"]))
    b.set_bolt("measured", Measured(box)).shuffle_grouping("feed")
    sim_cluster.submit_topology("stuck", {}, b.create_topology())
    assert sim_cluster.wait_idle()
    for _ in range(5):
        values = sim_cluster.metrics("stuck")["measured"]["custom"]["load"]
        assert set(values.values()) == {None}
        sim_cluster.advance_time(2 * METRIC_ERROR_WINDOW_SECS)
    assert len(sim_cluster.errors("stuck")) == 1, sim_cluster.errors("stuck")
