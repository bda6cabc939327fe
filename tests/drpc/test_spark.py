"""DRPC on SparkCluster: a remote topology whose spout and ReturnResults run in Spark
worker processes reaches the DRPCServer in this (the driver's) process over HTTP.

Opt-in (starting Spark takes ~30 s on a 2-core machine): TUPLETREE_SPARK_TESTS=1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tupletree import Config
from tupletree.drpc import DRPCClient, DRPCExecutionError, DRPCServer, LinearDRPCTopologyBuilder

from . import support
from .support import CountAggregator, CreateTuples, FailFinish, PartialCount, remote_conf

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("TUPLETREE_SPARK_TESTS") != "1",
        reason="starts Spark (~30 s): set TUPLETREE_SPARK_TESTS=1",
    ),
]


@pytest.fixture(scope="module")
def spark_cluster() -> Iterator[object]:
    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import check_java, check_pyspark

    try:
        check_pyspark()
        check_java()
    except SparkUnavailableError as exc:
        pytest.skip(str(exc))
    from pyspark import cloudpickle

    from tupletree.spark.cluster import SparkCluster

    # The user bolts sit inside CoordinatedBolts, where SparkCluster does not look for
    # modules to ship by value; executors cannot import tests/, so ship it explicitly.
    cloudpickle.register_pickle_by_value(support)
    with SparkCluster(master="local[2]") as cluster:
        yield cluster


def test_remote_drpc_topology_on_spark(spark_cluster):
    """Coordination, 100 concurrent requests and a failing request, across 2 workers."""
    with DRPCServer(port=0) as server:
        square = LinearDRPCTopologyBuilder("square")
        square.add_bolt(CreateTuples(), 2)
        square.add_bolt(PartialCount(), 2).shuffle_grouping()
        square.add_bolt(CountAggregator(), 2).fields_grouping(["request"])
        conf = remote_conf(server, **{Config.TOPOLOGY_WORKERS: 2})
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
