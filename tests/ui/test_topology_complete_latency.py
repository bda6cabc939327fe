"""The topology's complete latency (``topologyStats[0].completeLatency``) is Storm's:
the mean over every acked tree of its spouts, not the slowest spout's mean.

What a user saw: a topology with a busy spout (1000 trees at 1 ms) and a quiet one (1
tree at 500 ms) showed a complete latency of 500 ms on ``GET /api/v1/topology/<name>``:
``topology_page`` took the largest of the spouts' means. Storm UI weights each spout's
latency by its acked trees (the mean over all of them: about 1.5 ms here).
"""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, TopologyBuilder
from tupletree.runtime.metrics import COUNTERS, LatencyHistogram, aggregate
from tupletree.testing import FeederSpout
from tupletree.ui import views
from tupletree.ui.graph import topology_graph


class Sink(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def _snapshot(latencies: list[tuple[float, int]] | None) -> dict[str, Any]:
    snap: dict[str, Any] = {name: 0 for name in COUNTERS}
    snap["execute_latency"] = None
    snap["latency"] = None
    if latencies is not None:
        h = LatencyHistogram()
        for secs, n in latencies:
            h.record_many(secs, n)
            snap["acked"] += n
        snap["latency"] = h.to_state()
    return snap


def test_topology_complete_latency_is_the_mean_over_all_acked_trees() -> None:
    builder = TopologyBuilder()
    builder.set_spout("busy", FeederSpout(["x"]))
    builder.set_spout("quiet", FeederSpout(["x"]))
    builder.set_bolt("sink", Sink()).shuffle_grouping("busy").shuffle_grouping("quiet")
    topology = builder.create_topology()
    snapshots = {
        1: _snapshot([(0.001, 1000)]),
        2: _snapshot([(0.5, 1)]),
        3: _snapshot(None),
    }
    metrics = aggregate(snapshots, {1: "busy", 2: "quiet", 3: "sink"})
    info = {"topology": topology, "active": True, "uptime_secs": 10.0, "conf": {}}
    page = views.topology_page("t", info, metrics, {}, [], [], topology_graph(topology), now=0.0)
    stats = page["topologyStats"][0]
    assert stats["acked"] == 1001
    assert stats["completeLatency"] == pytest.approx((1000 * 1.0 + 500.0) / 1001, abs=1e-3)


def test_topology_complete_latency_is_none_before_any_tree_completes() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", FeederSpout(["x"]))
    topology = builder.create_topology()
    metrics = aggregate({1: _snapshot(None)}, {1: "s"})
    info = {"topology": topology, "active": True, "uptime_secs": 1.0, "conf": {}}
    page = views.topology_page("t", info, metrics, {}, [], [], topology_graph(topology), 0.0)
    assert page["topologyStats"][0]["completeLatency"] is None
