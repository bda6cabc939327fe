"""Shared fixtures for the whole suite."""

from __future__ import annotations

import pytest

from tupletree import LocalCluster


@pytest.fixture
def sim_cluster():
    """A simulated-time LocalCluster: nothing moves until advance_time / wait_idle."""
    with LocalCluster(simulate_time=True) as cluster:
        yield cluster


@pytest.fixture
def real_cluster():
    """A real-time LocalCluster: each topology runs on a background thread."""
    with LocalCluster() as cluster:
        yield cluster
