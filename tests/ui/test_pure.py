"""The web view's pure parts, with plain values: the graph and its text forms, the
bounded history (rates, capacity, timeline), the REST shaping, Prometheus buckets, and
the runtime figures they read (execute latency, queues, acker pending)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree import BasicBolt, Bolt, LocalCluster, Spout, TopologyBuilder
from tupletree.records.errors import RESTART, TaskError, WorkerEvent
from tupletree.runtime.metrics import LatencyHistogram, aggregate, merge_snapshots
from tupletree.ui.graph import to_dot, to_mermaid, topology_graph
from tupletree.ui.history import TopologyHistory
from tupletree.ui.prometheus import BOUNDS_SECS, histogram_buckets
from tupletree.ui.views import edge_rates, error_entry, event_entry, uptime_text

from .support import CONF, word_count


class S(Spout):
    outputs = ["x"]


class B(BasicBolt):
    outputs = ["x"]

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])
        declarer.declare_stream('side "quoted"', ["y"])


class Sink(Bolt):
    outputs: list[str] = []


def _diamond() -> Any:
    b = TopologyBuilder()
    b.set_spout("src", S())
    b.set_bolt("left", B(), parallelism=3).shuffle_grouping("src")
    b.set_bolt("right", B()).fields_grouping("src", ["x"])
    b.set_bolt("join", Sink()).global_grouping("left").all_grouping(
        "right", stream='side "quoted"'
    ).shuffle_grouping("src")
    return b.create_topology()


def test_graph_layers_place_each_component_right_of_its_furthest_input():
    """src at 0, left/right at 1, join (fed by src and by layer 1) at 2; edges carry
    stream and grouping, fields named."""
    g = topology_graph(_diamond())
    layers = {n["id"]: n["layer"] for n in g["nodes"]}
    assert layers == {"src": 0, "left": 1, "right": 1, "join": 2}
    edges = {(e["source"], e["target"], e["stream"]): e["grouping"] for e in g["edges"]}
    assert edges[("src", "right", "default")] == "fields(x)"
    assert edges[("right", "join", 'side "quoted"')] == "all"
    assert {n["id"]: n["parallelism"] for n in g["nodes"]}["left"] == 3


def test_graph_survives_a_cycle():
    """A bolt feeding an earlier bolt (a loop) does not recurse forever."""
    b = TopologyBuilder()
    b.set_spout("src", S())
    b.set_bolt("a", B()).shuffle_grouping("src").shuffle_grouping("b")
    b.set_bolt("b", B()).shuffle_grouping("a")
    layers = {n["id"]: n["layer"] for n in topology_graph(b.create_topology())["nodes"]}
    assert layers["src"] == 0 and layers["b"] > layers["a"] >= 1


def test_mermaid_and_dot_name_every_component_and_edge_and_quote_names():
    """Both text forms list the components and labelled edges; quotes in a stream name
    are escaped so the output still parses."""
    topology = _diamond()
    mermaid = to_mermaid(topology)
    assert mermaid.startswith("flowchart LR\n")
    assert 'c_src(["src x1"])' in mermaid and 'c_left["left x3"]' in mermaid
    assert 'c_src -->|"fields(x)"| c_right' in mermaid
    assert "side #quot;quoted#quot;: all" in mermaid
    dot = to_dot(topology, "demo")
    assert dot.startswith('digraph "demo" {') and dot.rstrip().endswith("}")
    assert '"src" -> "right" [label="fields(x)"];' in dot
    assert '[label="side \\"quoted\\": all"]' in dot


def _metrics(split_exec: int, busy: float, acked: int, lat_count: int, lat_sum: float) -> dict:
    return {
        "src": {
            "emitted": acked,
            "acked": acked,
            "failed": 0,
            "tasks": {1: {"emitted": acked}},
            "complete_latency_hist": {"count": lat_count, "sum_ms": lat_sum, "buckets": []},
        },
        "split": {
            "executed": split_exec,
            "busy_secs": busy,
            "tasks": {
                2: {"executed": split_exec // 2, "busy_secs": busy * 0.25},
                3: {"executed": split_exec // 2, "busy_secs": busy * 0.75},
            },
        },
    }


def test_history_rates_capacity_and_timeline():
    """Rates are counter growth over time passed; a task's capacity is its busy time over
    time passed; a component's is its busiest task's; the timeline gives acked trees per
    second and the mean complete latency of each interval."""
    h = TopologyHistory(["src"])
    assert h.rates() == {"components": {}, "tasks": {}}
    h.add(10.0, _metrics(0, 0.0, 0, 0, 0.0))
    h.add(12.0, _metrics(400, 1.0, 100, 100, 250.0))
    r = h.rates()
    assert r["components"]["split"]["executed"] == 200.0
    assert r["tasks"][2]["capacity"] == pytest.approx(0.125)
    assert r["tasks"][3]["capacity"] == pytest.approx(0.375)
    assert r["components"]["split"]["capacity"] == pytest.approx(0.375)
    assert r["components"]["src"]["acked"] == 50.0
    (point,) = h.timeline()
    assert point == {"t": 12.0, "acked": 50.0, "failed": 0.0, "completeLatencyMs": 2.5}
    h.add(13.0, _metrics(400, 1.0, 100, 100, 250.0))  # nothing acked: latency unknown
    assert h.timeline()[-1]["completeLatencyMs"] is None
    h.add(11.0, _metrics(0, 0.0, 0, 0, 0.0))  # out of order: ignored
    assert len(h.timeline()) == 2


def test_history_is_bounded_and_rates_cover_the_window():
    """However many samples come, the timeline keeps max_points; rates compare the newest
    sample with one about rate_window_secs older, not with the first ever."""
    h = TopologyHistory(["src"], max_points=5, rate_window_secs=3.0)
    for t in range(100):
        # executed grows 10/s for the first 90 s, then 100/s
        executed = 10 * min(t, 90) + 100 * max(0, t - 90)
        h.add(float(t), _metrics(executed, 0.0, t, 0, 0.0))
    assert len(h.timeline()) == 5
    assert len(h._samples) <= 5
    assert h.rates()["components"]["split"]["executed"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="max_points"):
        TopologyHistory([], max_points=1)


def test_an_error_reaches_rest_as_its_record_with_its_time():
    """REST takes an error's fields from its record (no text is parsed): a message that
    looks like another error's header stays a message, the worker and attempt are the
    record's, and the time is Storm UI's errorTime (epoch s) and errorLapsedSecs."""
    decoy = "worker 3: fake[task 1] execute: Boom"
    record = TaskError("split:x", 7, "next_tuple", "KeyError", decoy, "Traceback\n", 1000.5)
    e = error_entry("wc", record, now=1012.0)
    assert (e["component"], e["task"], e["where"]) == ("split:x", 7, "next_tuple")
    assert (e["worker"], e["attempt"], e["exception"]) == (None, None, "KeyError")
    assert e["message"] == decoy and e["error"] == f"KeyError: {decoy}"
    assert (e["errorTime"], e["errorLapsedSecs"]) == (1000, 11)
    assert e["errorWorkerLogLink"] == "/api/v1/topology/wc/logs"
    e = error_entry("a b/c", record.on_worker(2, 5), now=999.0)  # a clock behind: 0 s
    assert (e["worker"], e["attempt"], e["errorLapsedSecs"]) == (2, 5, 0)
    assert e["errorWorkerLogLink"] == "/api/v1/topology/a%20b%2Fc/logs"
    restart = WorkerEvent(RESTART, "restarted (restart 1): attempt 0 ended", 50.0, 1, 0)
    ev = event_entry("wc", restart, now=80.0)
    assert (ev["kind"], ev["worker"], ev["attempt"], ev["errorLapsedSecs"]) == (
        RESTART,
        1,
        0,
        30,
    )
    assert ev["text"] == "worker 1 restarted (restart 1): attempt 0 ended"


def test_edge_rates_take_the_nearest_exact_figure():
    """Only input of its target: the target's executed rate; only output of its source:
    the source's transferred rate; else the source's emitted rate, marked inexact."""
    graph = {
        "edges": [
            {"source": "a", "target": "b", "stream": "default", "grouping": "shuffle"},
            {"source": "c", "target": "d", "stream": "default", "grouping": "shuffle"},
            {"source": "a", "target": "d", "stream": "default", "grouping": "shuffle"},
        ]
    }
    rates = {
        "a": {"emitted": 5.0, "transferred": 9.0},
        "b": {"executed": 7.0},
        "c": {"emitted": 3.0, "transferred": 4.0},
        "d": {"executed": 99.0},
    }
    out = {(e["source"], e["target"]): (e["rate"], e["exact"]) for e in edge_rates(graph, rates)}
    assert out == {("a", "b"): (7.0, True), ("c", "d"): (4.0, True), ("a", "d"): (5.0, False)}


def test_uptime_text():
    assert uptime_text(5) == "5s"
    assert uptime_text(3 * 86400 + 65) == "3d 0h 1m 5s"


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1))
def test_prometheus_buckets_are_cumulative_and_never_below_a_true_count(samples):
    """Buckets grow with le, +Inf is the count, and each le counts no value above it
    (values at most le may be counted one bound late, never early)."""
    h = LatencyHistogram()
    for secs in samples:
        h.record(secs)
    buckets = histogram_buckets(h.describe())
    counts = [c for _, c in buckets]
    assert counts == sorted(counts) and buckets[-1] == ("+Inf", float(len(samples)))
    for (le, count), bound in zip(buckets, BOUNDS_SECS, strict=False):
        assert float(le) == bound
        assert count <= sum(1 for s in samples if s <= bound * 1.0000001)


def test_record_many_counts_each_tuple():
    """A turn of n tuples adds n samples of its mean."""
    h = LatencyHistogram()
    h.record_many(0.002, 5)
    h.record(0.002)
    assert h.count == 6 and h.total_us == 12_000
    assert h.describe()["count"] == 6


def test_aggregate_sums_gauges_and_gives_execute_latency_from_busy_time():
    """Queued and pending sum over a component's tasks; execute latency's mean is the
    exact busy time over tuples (the buckets' microseconds would round sub-microsecond
    turns to 0); merge_snapshots keeps the newest gauges and sums the counters."""
    ex = LatencyHistogram()
    ex.record_many(0.0000004, 10)  # 0.4 us per tuple: bucket 0
    base = {
        "emitted": 0,
        "transferred": 0,
        "executed": 10,
        "acked": 10,
        "failed": 0,
        "timed_out": 0,
        "errors": 0,
        "busy_secs": 0.000004,
        "latency": None,
        "execute_latency": ex.to_state(),
    }
    snaps = {
        1: base | {"queued": 3, "queue_limit": 100},
        2: base | {"queued": 4, "queue_limit": 100},
    }
    out = aggregate(snaps, {1: "b", 2: "b"})["b"]
    assert out["queued"] == 7 and out["queue_limit"] == 200
    assert out["execute_latency_ms"] == pytest.approx(0.0004)
    assert out["tasks"][1]["execute_latency_ms"] == pytest.approx(0.0004)
    assert out["execute_latency_hist"]["count"] == 20
    merged = merge_snapshots([{1: snaps[1]}, {1: base | {"queued": 9, "queue_limit": 100}}])
    assert merged[1]["queued"] == 9 and merged[1]["executed"] == 20
    assert LatencyHistogram.from_state(merged[1]["execute_latency"]).count == 20


def test_cluster_metrics_carry_queues_busy_time_and_acker_pending(sim_cluster):
    """What the web view reads exists on a running topology: per task queued and
    queue_limit (bolts, ackers), busy time and execute latency for bolts, the acker's
    pending trees (which a bolt that never acks keeps up)."""
    sim_cluster.submit_topology("wc", CONF, word_count(limit=50))
    sim_cluster.wait_idle()
    m = sim_cluster.metrics("wc")
    split = m["split"]
    assert split["executed"] == 50 and split["busy_secs"] > 0
    assert split["execute_latency_hist"]["count"] == 50
    assert split["execute_latency_ms"] > 0
    assert all(
        t["queue_limit"] == CONF.get("topology.executor.receive.buffer.size", 16384)
        for t in split["tasks"].values()
    )
    assert all(t["queued"] == 0 for t in split["tasks"].values())
    assert m["__acker"]["pending"] == 0

    b = TopologyBuilder()
    b.set_spout("src", _Five())
    b.set_bolt("hold", Sink()).shuffle_grouping("src")
    sim_cluster.submit_topology("stuck", {}, b.create_topology())
    sim_cluster.wait_idle()
    assert sim_cluster.metrics("stuck")["__acker"]["pending"] == 5


class _Five(Spout):
    outputs = ["x"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.n = collector, 0

    def next_tuple(self) -> None:
        if self.n < 5:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)


def test_ui_port_on_a_taken_port_names_the_address():
    """A port in use fails the cluster's construction, naming the address."""
    with LocalCluster(ui_port=0) as first:
        port = int(first.ui_url.rsplit(":", 1)[1])
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            LocalCluster(ui_port=port)
