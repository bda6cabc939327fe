"""A stateful component's task count, kept beside its state (state/layout.py): a topology
submitted again with another task count for a stateful bolt is refused, naming both
counts, instead of losing the state of the keys that move (stop 41's review: a word count
resubmitted from 2 count tasks to 1 lost every count task 1 had committed, silently)."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import LocalCluster
from tupletree.state.kv import StateError
from tupletree.state.layout import check_task_count, task_indices
from tupletree.store import Put

from .components import acked, committed, expected_counts, run_until, word_count
from .conftest import Provider


def test_the_first_count_is_recorded_and_another_is_refused_naming_both(provider: Provider):
    store = provider.open()
    check_task_count(store, "count", 2)
    check_task_count(store, "count", 2)  # every task of the same layout: fine
    check_task_count(store, "count-b", 5)  # a component whose name extends another's
    with pytest.raises(
        StateError, match=r"'count' has 3 task\(s\), but its state was written with 2"
    ):
        check_task_count(store, "count", 3)
    with pytest.raises(StateError, match="tasks=N"):
        check_task_count(store, "count", 1)


def test_state_from_before_the_record_is_refused_only_when_narrower(provider: Provider):
    """No record (state written before this check): a task index at or past the new
    count is state nobody would read; below it, the count is recorded."""
    store = provider.open()
    for namespace in ("old-0", "old-3$txid", "old-2-window", "old-x-0", "old-10b"):
        store.apply([Put(namespace, "k", b"v")])
    assert task_indices(store, "old") == {0, 2, 3}
    with pytest.raises(StateError, match="holds state of task index 3"):
        check_task_count(store, "old", 3)
    check_task_count(store, "old", 4)
    with pytest.raises(StateError, match="written with 4"):
        check_task_count(store, "old", 5)


def _counts(provider: Provider) -> dict[Any, Any]:
    state = committed(provider.open())
    return {k: v for k, v in state.items() if not isinstance(k, tuple)}


def test_a_word_count_submitted_again_with_fewer_count_tasks_is_refused_and_keeps_its_state(
    durable_provider: Provider,
):
    """2 count tasks, then the same topology with 1: the second submit reports a
    StateError naming both counts and commits nothing, so the state the first run
    committed is all still there (before: task 1's counts were silently lost)."""
    provider = durable_provider
    n = 30
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", provider.conf, word_count(n, counters=2))
        run_until(cluster, lambda: acked(provider.open()) == n, "all acked")
    before = _counts(provider)
    assert before == expected_counts(n)
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", provider.conf, word_count(n, counters=1))
        run_until(cluster, lambda: cluster.errors("wc"), "the refusal", limit=20)
        cluster.advance_time(5)
        errors = cluster.errors("wc")
        assert any("'count' has 1 task(s), but its state was written with 2" in e for e in errors)
    assert _counts(provider) == before
    assert acked(provider.open()) == n
