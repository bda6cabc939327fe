"""DRPC on SparkCluster: a remote topology whose spout and ReturnResults run in Spark
worker processes reaches the DRPCServer in this (the driver's) process over HTTP.

Uses the suite's one Spark session, and a DRPC server started with the cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tupletree import Config
from tupletree.drpc import DRPCClient, DRPCExecutionError, LinearDRPCTopologyBuilder

from .support import CountAggregator, CreateTuples, FailFinish, PartialCount

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def spark_cluster(spark: object) -> Iterator[object]:
    from tupletree.spark.cluster import SparkCluster

    # The user bolts sit inside CoordinatedBolts: SparkCluster finds their module
    # (tests/drpc/support.py, which executors cannot import) and ships it by value.
    with SparkCluster(spark, drpc_port=0) as cluster:
        yield cluster


def test_remote_drpc_topology_on_spark(spark_cluster):
    """Coordination, 100 concurrent requests and a failing request, across 2 workers,
    against the DRPC server the cluster started."""
    server = spark_cluster.drpc_server
    square = LinearDRPCTopologyBuilder("square")
    square.add_bolt(CreateTuples(), 2)
    square.add_bolt(PartialCount(), 2).shuffle_grouping()
    square.add_bolt(CountAggregator(), 2).fields_grouping(["request"])
    conf = {Config.TOPOLOGY_WORKERS: 2}
    spark_cluster.submit_topology("square", conf, square.create_remote_topology())
    client = DRPCClient(server.host, server.port, timeout=60)
    assert [client.execute("square", n) for n in ("2", "10", "0")] == ["4", "100", "0"]
    with ThreadPoolExecutor(max_workers=50) as pool:
        got = list(pool.map(lambda i: client.execute("square", str(i % 9)), range(100)))
    assert got == [str((i % 9) ** 2) for i in range(100)]
    spark_cluster.kill_topology("square")

    fail = LinearDRPCTopologyBuilder("fail")
    fail.add_bolt(FailFinish(), 2)
    spark_cluster.submit_topology("fail", conf, fail.create_remote_topology())
    with pytest.raises(DRPCExecutionError, match="tuple tree failed"):
        client.execute("fail", "x")
    spark_cluster.kill_topology("fail")
    assert server.pending_requests() == 0
