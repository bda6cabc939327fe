"""A topology killed and submitted again under its name gets a view of its own.

What a user saw: after ``kill_topology("t")`` and ``submit_topology("t", ...)`` of a
new topology within the web view's sampling interval, ``GET /api/v1/topology/t`` drew
the killed topology's graph (its components, its edges) next to the new topology's
spouts and bolts, and its rates and charts compared the new run's counters with the
old run's samples (clamped to 0 until the old samples left the window). The service
kept one history and graph per name and dropped them only when a sample found the name
gone.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from tupletree import BasicBolt, LocalCluster, TopologyBuilder
from tupletree.testing import FeederSpout
from tupletree.ui.history import TopologyHistory


class Echo(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


def _topology(spout: str, bolt: str) -> tuple[FeederSpout, Any]:
    feeder = FeederSpout(["n"])
    builder = TopologyBuilder()
    builder.set_spout(spout, feeder)
    builder.set_bolt(bolt, Echo()).shuffle_grouping(spout)
    return feeder, builder.create_topology()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_graph_is_the_running_topologys_after_kill_and_resubmit() -> None:
    # The sampler samples once at start, then not for an hour: no sample between the
    # kill and the new submit (as when both happen within one sampling interval).
    options = {"sample_secs": 3600}
    with LocalCluster(simulate_time=True, ui_port=0, ui_options=options) as cluster:
        feeder, topology = _topology("old_spout", "old_bolt")
        cluster.submit_topology("t", {}, topology)
        feeder.feed([1], msg_id=1)
        cluster.wait_idle()
        page = _get(f"{cluster.ui_url}/api/v1/topology/t")
        assert {n["id"] for n in page["graph"]["nodes"]} == {"old_spout", "old_bolt"}

        cluster.kill_topology("t")
        _, topology = _topology("new_spout", "new_bolt")
        cluster.submit_topology("t", {}, topology)
        page = _get(f"{cluster.ui_url}/api/v1/topology/t")
        assert [s["spoutId"] for s in page["spouts"]] == ["new_spout"]
        assert {n["id"] for n in page["graph"]["nodes"]} == {"new_spout", "new_bolt"}
        assert {e["source"] for e in page["graph"]["edges"]} == {"new_spout"}


def _metrics(acked: int) -> dict[str, Any]:
    entry = {"emitted": acked, "transferred": acked, "executed": 0, "acked": acked}
    entry |= {"failed": 0, "busy_secs": 0.0}
    return {"s": entry | {"tasks": {1: dict(entry)}}}


def test_rates_start_over_when_counters_go_back() -> None:
    """The same topology object submitted again: its counters start from 0, and the
    rates are the new run's, not 0 until the old run's samples leave the window."""
    history = TopologyHistory(["s"], rate_window_secs=10.0)
    history.add(0.0, _metrics(1000))
    history.add(1.0, _metrics(1100))
    history.add(2.0, _metrics(0))  # killed and submitted again
    history.add(3.0, _metrics(50))
    rates = history.rates()
    assert rates["components"]["s"]["acked"] == 50.0
    assert rates["tasks"][1]["acked"] == 50.0
    assert history.timeline()[-1]["acked"] == 50.0
