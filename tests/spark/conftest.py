"""A shared local SparkSession for the Spark tests (starting one costs ~10 s here).

The tests are skipped, with the reason, when pyspark or Java 17+ is missing. The
worker functions the tests ship to Spark live in ``workerfns``, which executors cannot
import (tests/ is not on their path), so it is registered for pickling by value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tupletree.spark.errors import SparkUnavailableError
from tupletree.spark.session import build_local_session, check_java, check_pyspark


def _spark_unavailable() -> str | None:
    try:
        check_pyspark()
        check_java()
    except SparkUnavailableError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    reason = _spark_unavailable()
    if reason:
        pytest.skip(reason)
    import workerfns
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(workerfns)
    session = build_local_session(
        2,
        max_failures=4,
        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    session.sparkContext.setLogLevel(os.environ.get("TUPLETREE_SPARK_LOG_LEVEL", "FATAL"))
    yield session
    session.stop()
