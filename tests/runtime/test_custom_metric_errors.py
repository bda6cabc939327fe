"""A custom metric (``context.register_metric``) whose read raises is read at every
metrics collection: ``cluster.metrics``, each worker report, each scrape of the web
view. Reported each time, one broken metric filled the topology's error records (and
pushed the task errors that matter out of them). Now it is reported once, when it
starts failing, and again only after it has read fine in between; its value is None
while it fails, and the component's other metrics are read as usual."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, TopologyBuilder
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

    box.get()["broken"] = False  # it reads again...
    assert read()["load"] == 7
    box.get()["broken"] = True  # ...and fails again: a new failure, told once more
    for _ in range(10):
        assert read()["load"] is None
    assert len(sim_cluster.errors("measured")) == 2
