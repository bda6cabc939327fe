"""Shared fixtures for the whole suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tupletree import LocalCluster


@pytest.fixture
def sim_cluster():
    """A simulated-time LocalCluster: nothing moves until advance_time / wait_idle."""
    with LocalCluster(simulate_time=True) as cluster:
        yield cluster


def _spark_unavailable() -> str | None:
    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import check_java, check_pyspark

    try:
        check_pyspark()
        check_java()
    except SparkUnavailableError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local Spark session (local[2,4]: 2 slots, task retries) for the whole run;
    skips, with the reason, where pyspark or Java 17+ is missing."""
    reason = _spark_unavailable()
    if reason:
        pytest.skip(reason)
    from tupletree.spark.session import build_local_session

    session = build_local_session(
        2,
        max_failures=4,
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    session.sparkContext.setLogLevel(os.environ.get("TUPLETREE_SPARK_LOG_LEVEL", "FATAL"))
    yield session
    session.stop()


@pytest.fixture(params=["sim", "real", pytest.param("spark", marks=pytest.mark.spark)])
def any_cluster(request: pytest.FixtureRequest) -> Iterator[object]:
    """The same test on LocalCluster in simulated time, LocalCluster in real time and
    SparkCluster (2 workers per topology), through tests/clusters.py's harness."""
    from .clusters import ClusterHarness

    kind = request.param
    if kind != "spark":
        with LocalCluster(simulate_time=kind == "sim") as cluster:
            yield ClusterHarness(kind, cluster)
        return
    session = request.getfixturevalue("spark")
    from pyspark import cloudpickle

    from tupletree.spark.cluster import SparkCluster

    from . import registry

    # Components call the journal functions; executors cannot import tests/.
    cloudpickle.register_pickle_by_value(registry)
    with SparkCluster(spark=session) as cluster:
        yield ClusterHarness(kind, cluster, workers=2)
