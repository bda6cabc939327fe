"""The web view of windowed bolts: each one's watermark, late-tuple count and window
sizes in the REST answers, in /metrics, and on the page."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tupletree import Config, LocalCluster, TopologyBuilder
from tupletree.testing import FeederSpout
from tupletree.ui.views import window_summary
from tupletree.windowing import Count, Duration, WindowedBolt

from .support import get, text

API = "/api/v1/topology"
CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}


class Sum(WindowedBolt):
    outputs = ["sum"]

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        self.collector.emit([sum(t[0] for t in window.get())])


def test_window_summary_over_tasks():
    """Counts add up, the watermark is the slowest task's that has one, last window
    size the largest; a bolt without the metric has no summary."""
    per_task = {
        3: {"window": "w", "watermark_ms": 700, "held": 4, "cap": 10, "late": 1,
            "windows": 5, "failed_windows": 0, "refused": 2, "last_window_size": 3,
            "sessions": None},
        4: {"window": "w", "watermark_ms": 650, "held": 1, "cap": 10, "late": 0,
            "windows": 2, "failed_windows": 1, "refused": 0, "last_window_size": 5,
            "sessions": None},
        5: {"window": "w", "watermark_ms": None, "held": 0, "cap": 10, "late": 0,
            "windows": 0, "failed_windows": 0, "refused": 0, "last_window_size": 0,
            "sessions": None},
    }  # fmt: skip
    assert window_summary(per_task) == {
        "window": "w",
        "cap": 10,
        "tasks": 3,
        "held": 5,
        "lateTuples": 1,
        "windows": 7,
        "failedWindows": 1,
        "refused": 2,
        "watermark": 650,
        "lastWindowSize": 5,
        "sessions": None,
    }
    assert window_summary({}) is None


def _topology(feeder: FeederSpout) -> Any:
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt(
        "sum",
        Sum()
        .with_window(Duration.of(20), Duration.of(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.of(5)),
    ).shuffle_grouping("src")
    b.set_bolt("count", Sum().with_window(Count(5), Count(2))).shuffle_grouping("src")
    return b.create_topology()


def _run(cluster: Any) -> None:
    feeder = FeederSpout(["n", "ts"])
    cluster.submit_topology("w", CONF, _topology(feeder))
    for n, ts in ((1, 603), (2, 605), (3, 607), (4, 618), (5, 626), (6, 636)):
        feeder.feed([n, ts], msg_id=n)
    cluster.wait_idle()
    cluster.advance_time(1)  # watermark 631
    feeder.feed([7, 600], msg_id=7)  # late
    cluster.wait_idle()


def test_rest_and_metrics_show_watermark_late_tuples_and_sizes():
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        _run(cluster)
        url = cluster.ui_url
        bolts = {b["boltId"]: b for b in get(f"{url}{API}/w")["bolts"]}
        event = bolts["sum"]["window"]
        assert event["watermark"] == 631 and event["lateTuples"] == 1
        assert event["windows"] == 3 and event["lastWindowSize"] == 2
        assert event["held"] == 3 and event["cap"] == 100_000  # 4, 5, 6 wait
        assert "event time" in event["window"]
        count = bolts["count"]["window"]
        assert count["watermark"] is None and count["lateTuples"] == 0
        # 7 tuples: [1,2], [1..4], [2..6]; 2..7 held until the next window expires 2.
        assert (count["windows"], count["held"], count["lastWindowSize"]) == (3, 6, 5)
        comp = get(f"{url}{API}/w/component/sum")
        assert comp["stats"]["window"]["watermark"] == 631
        (task,) = comp["executorStats"]
        assert task["window"]["lateTuples"] == 1 and task["window"]["held"] == 3

        families = {f.name: f for f in text_string_to_metric_families(text(f"{url}/metrics"))}

        def sample(family: str, component: str) -> float:
            (value,) = [
                s.value
                for s in families[family].samples
                if s.labels["component"] == component and not s.name.endswith("_created")
            ]
            return value

        assert sample("tupletree_window_watermark_seconds", "sum") == pytest.approx(0.631)
        assert sample("tupletree_window_late_tuples", "sum") == 1
        assert sample("tupletree_window_held_events", "count") == 6


def test_the_page_shows_a_row_per_windowed_bolt(tmp_path):
    from .test_page import ARGS, CHROMIUM

    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    from pathlib import Path

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no {CHROMIUM}: apt-get install -y chromium (as .ci/run does)")
    with LocalCluster(simulate_time=True, ui_port=0) as cluster, sync_api.sync_playwright() as p:
        _run(cluster)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.goto(cluster.ui_url + "/")
            page.wait_for_selector("#windows tr[data-id=sum]", timeout=30_000)
            row = page.inner_text("#windows tr[data-id=sum]")
            assert "631" in row and "event time" in row
            cells = page.eval_on_selector_all(
                "#windows tr[data-id=sum] td", "tds => tds.map(td => td.textContent)"
            )
            assert cells[0] == "sum" and cells[2] == "631" and cells[3] == "3 / 100,000"
            assert cells[4] == "1"  # late tuples
            assert page.is_visible("#windows-card")
        finally:
            browser.close()
