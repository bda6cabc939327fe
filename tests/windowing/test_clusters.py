"""The same windowed bolts on every cluster (tests/clusters.py: LocalCluster in
simulated and in real time, SparkCluster on two workers): a windowed bolt is an
ordinary Bolt to the runtime, its timers run from the worker's rounds on its clock."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, TopologyBuilder
from tupletree.windowing import Count, Duration

from . import support
from .support import Collect, feeder, new_journal, settled, windows


@pytest.fixture
def cluster(any_cluster: Any) -> Any:
    if any_cluster.kind == "spark":
        from pyspark import cloudpickle

        # The components below live in tests/, which Spark's executors cannot import.
        cloudpickle.register_pickle_by_value(support)
    return any_cluster


def _submit(cluster: Any, bolt: Any, j: Any, fields: list[str]) -> Any:
    spout = feeder(j, fields)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", bolt).shuffle_grouping("src")
    cluster.submit_topology("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}, b.create_topology())
    return spout


def test_count_window_on_every_cluster(cluster):
    """Count 5 sliding 2 over 1..8: Storm's four windows, 1..3 acked, nothing failed."""
    j = new_journal()
    spout = _submit(cluster, Collect(j).with_window(Count(5), Count(2)), j, ["id"])
    for i in range(1, 9):
        spout.feed([i], msg_id=i)
    cluster.wait_idle()
    expected = [[1, 2], [1, 2, 3, 4], [2, 3, 4, 5, 6], [4, 5, 6, 7, 8]]
    assert cluster.until(lambda: [w["ids"] for w in windows(j)] == expected)
    assert cluster.until(lambda: sorted(settled(j, "ack")) == [1, 2, 3])
    assert settled(j, "fail") == []


def test_event_time_window_on_every_cluster(cluster):
    """Length 20 ms sliding 10 ms, lag 5, over 603..636: the watermark (every 100 ms of
    the worker's clock) fires [1,2,3], [1,2,3,4], [4,5]."""
    j = new_journal()
    bolt = (
        Collect(j)
        .with_window(Duration.of(20), Duration.of(10))
        .with_timestamp_field("ts")
        .with_lag(Duration.of(5))
        .with_watermark_interval(Duration.of(100))
    )
    spout = _submit(cluster, bolt, j, ["id", "ts"])
    for i, ts in [(1, 603), (2, 605), (3, 607), (4, 618), (5, 626), (6, 636)]:
        spout.feed([i, ts], msg_id=i)
    cluster.wait_idle()
    cluster.advance_time(1)
    expected = [[1, 2, 3], [1, 2, 3, 4], [4, 5]]
    assert cluster.until(lambda: [w["ids"] for w in windows(j)] == expected)
    assert cluster.until(lambda: sorted(settled(j, "ack")) == [1, 2, 3])
