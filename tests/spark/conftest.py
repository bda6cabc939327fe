"""Spark test fixtures. The session itself is ``spark`` in tests/conftest.py (one per
test run). The worker functions the launcher tests ship to Spark live in ``workerfns``,
which executors cannot import (tests/ is not on their path), so it is registered for
pickling by value.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _ship_workerfns() -> None:
    try:
        from pyspark import cloudpickle

        from . import workerfns
    except ImportError:  # pyspark missing: the spark fixture skips these tests
        return
    cloudpickle.register_pickle_by_value(workerfns)
