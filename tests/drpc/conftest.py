"""Fixtures for the DRPC tests: a real-time LocalCluster (LocalDRPC.execute blocks the
test's thread while the topology runs on the cluster's), a LocalDRPC, a DRPCServer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tupletree import LocalCluster
from tupletree.drpc import DRPCServer, LocalDRPC


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as c:
        yield c


@pytest.fixture
def drpc() -> Iterator[LocalDRPC]:
    with LocalDRPC() as d:
        yield d


@pytest.fixture
def server() -> Iterator[DRPCServer]:
    """An HTTP DRPC server on a free port; unknown functions fail after 0.3 s."""
    with DRPCServer(port=0, unknown_function_wait_secs=0.3) as s:
        yield s
