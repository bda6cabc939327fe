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


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A Spark standalone master and two 1-core workers on 127.0.0.2 and 127.0.0.3,
    whose executors' Python lacks tupletree, and the archive ``tupletree pack`` made
    for them (tests/standalone.py); once per run, stopped at its end. Skips, with the
    reason, where Spark or the loopback addresses cannot be had."""
    reason = _spark_unavailable()
    if reason:
        pytest.skip(reason)
    from tupletree.spark.errors import SparkUnavailableError

    from .standalone import start

    try:
        running = start(tmp_path_factory.mktemp("standalone"))
    except SparkUnavailableError as exc:
        pytest.skip(str(exc))
    yield running
    running.cluster.stop()


@pytest.fixture(scope="session")
def standalone_driver(standalone, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A SparkCluster on ``standalone``, in a driver process that spark-submit started
    with the archive's options (tests/standalone.py's RemoteCluster)."""
    from .standalone import RemoteCluster

    driver = RemoteCluster(standalone, tmp_path_factory.mktemp("driver"))
    yield driver
    driver.close()


CLUSTER_KINDS = ["sim", "real", pytest.param("spark", marks=pytest.mark.spark)]
# The standalone cluster takes the scenarios marked ``standalone`` only: each of its
# topologies starts two executor-side Python workers and crosses two addresses, a few
# seconds more than on local Spark, and the whole suite on it would take longer than CI
# can give. The marked ones cover what a real cluster changes: groupings and acking
# across hosts, timeouts, control relayed to workers, the transcripts.
STANDALONE_KIND = pytest.param("standalone", marks=[pytest.mark.spark, pytest.mark.slow])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "any_cluster" in metafunc.fixturenames:
        kinds = list(CLUSTER_KINDS)
        if metafunc.definition.get_closest_marker("standalone") is not None:
            kinds.append(STANDALONE_KIND)
        metafunc.parametrize("any_cluster", kinds, indirect=True)


@pytest.fixture
def any_cluster(request: pytest.FixtureRequest) -> Iterator[object]:
    """The same test on LocalCluster in simulated time, LocalCluster in real time,
    SparkCluster (2 workers per topology), and, for tests marked ``standalone``, on a
    Spark standalone cluster of two hosts, through tests/clusters.py's harness."""
    from .clusters import ClusterHarness

    kind = request.param
    if kind == "standalone":
        from pyspark import cloudpickle

        from . import registry

        cloudpickle.register_pickle_by_value(registry)  # to the driver, then executors
        driver = request.getfixturevalue("standalone_driver")
        try:
            yield ClusterHarness(kind, driver, workers=2)
        finally:
            driver.kill_all()
        return
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
