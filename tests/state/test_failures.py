"""Failures at the worst moment in a stateful topology: an input that fails after its
checkpoint's barrier passed its spout, a window whose execute raises, a plain window in
the aligned mode, a task started again between PREPARE and COMMIT. Each once lost input
or wedged the topology (found by an adversarial review, 2026-11-29)."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, LocalCluster, TopologyBuilder
from tupletree.errors import InvalidConfigError
from tupletree.testing.shared import SharedList
from tupletree.windowing import Count

from . import crash
from .components import (
    ApplyWindow,
    BufferedWordCount,
    RaisesOnceCount,
    RaisesOnceSplit,
    SplitWords,
    StatefulWordCount,
    StoreQueue,
    acked,
    committed,
    expected_counts,
    run_until,
    sentence,
)
from .conftest import Provider


def _run_until_acked(cluster: Any, store: Any, n: int, limit: int = 120) -> None:
    run_until(cluster, lambda: acked(store) >= n, f"{n} acked", limit)
    cluster.advance_time(3)  # the checkpoint after the last ack commits


@pytest.mark.parametrize("when", ["before-put", "after-put", "fail-call", "in-split"])
def test_an_input_failed_in_a_stateful_bolt_is_rewound_not_skipped(
    provider: Provider, when: str
) -> None:
    """The aligned mode: a stateful bolt fails an input once (raises before or after
    changing its state, or calls fail). Its spout answered the next PREPARE before the
    fail reached it through the ackers; that checkpoint committed the spout's position
    past the input, and the input was never applied. Now the bolt itself refuses the
    PREPARE that follows the failure, in band; the recovery rewinds, and every input is
    applied exactly once. ("in-split": the plain BasicBolt before it, with one upstream
    task, raises instead; it refuses the PREPARE the same way.)"""
    n, bad = 60, set(range(5, 60, 7))
    raised = SharedList("raised")
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(n))
    if when == "in-split":
        b.set_bolt("split", RaisesOnceSplit(bad, raised)).shuffle_grouping("source")
        count: Any = StatefulWordCount()
    else:
        b.set_bolt("split", SplitWords()).shuffle_grouping("source")
        count = RaisesOnceCount(bad, raised, when)
    b.set_bolt("count", count, 2).fields_grouping("split", ["word"])
    conf = {
        **provider.conf,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 100,
    }
    store = provider.open()
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", conf, b.create_topology())
        _run_until_acked(cluster, store, n)
        assert set(raised.items()) == bad
    state = committed(store)
    applied = {k[1:]: v for k, v in state.items() if isinstance(k, tuple)}
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    missing = {(i, p) for i in range(n) for p in range(len(sentence(i)))} - set(applied)
    assert missing == set(), f"inputs never applied: {sorted(missing)}"
    assert set(applied.values()) == {1}
    assert counts == expected_counts(n)


def _windowed(n: int, bolt: Any) -> Any:
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(n))
    b.set_bolt("win", bolt).shuffle_grouping("source")
    return b.create_topology()


def _applied(store: Any) -> dict[int, int]:
    state = committed(store, "win", tasks=1)
    return {k[1]: v for k, v in state.items() if isinstance(k, tuple) and k[0] == "applied"}


def test_a_plain_stateful_window_is_refused_in_the_aligned_mode(provider: Provider) -> None:
    """A StatefulWindowedBolt without with_persistence() keeps its window in memory,
    outside the checkpoints: in the aligned mode a checkpoint committed the spouts'
    positions past tuples still waiting in it (a restart lost them, a rewind put them
    in twice). Refused at submit, naming the bolt and the remedy."""
    conf = {**provider.conf, Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned"}
    bolt = ApplyWindow().with_tumbling_window(Count(7))
    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises(InvalidConfigError, match=r"'win'.*with_persistence\(\)"):
            cluster.submit_topology("w", conf, _windowed(10, bolt))
        assert cluster.topologies() == []


@pytest.mark.parametrize("mode", ["storm", "aligned"])
def test_a_persistent_window_that_raises_fires_again_after_the_rollback(
    provider: Provider, mode: str
) -> None:
    """A persistent window's tuples count as processed once a checkpoint saved them.
    When its execute raised, they left the window and the next checkpoint committed
    them: their effect was never applied. Now that checkpoint is refused; its rollback
    brings the window back and it fires again: every message applied once (the aligned
    mode) or at least once (Storm's)."""
    n = 63
    raised = SharedList("raised")
    bolt = ApplyWindow(poison=30, raised=raised).with_tumbling_window(Count(7))
    conf = {
        **provider.conf,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 20,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: mode,
    }
    store = provider.open()
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, _windowed(n, bolt.with_persistence()))
        _run_until_acked(cluster, store, n)
        assert raised.items() == [30]
        errors = cluster.errors("w")
    assert any("transient failure in the window of 30" in e for e in errors)
    applied = _applied(store)
    never = sorted(m for m in range(n) if not applied.get(m))
    assert never == [], f"never applied: {never}"
    if mode == "aligned":
        assert {m: k for m, k in applied.items() if k != 1} == {}


@pytest.mark.parametrize("mode", ["storm", "aligned"])
def test_a_persistent_window_is_exact_across_a_restart(provider: Provider, mode: str) -> None:
    """A persistent window, the topology killed half-way and submitted again: the
    window as last committed comes back, the inputs after it again; every message is
    applied (once, in the aligned mode)."""
    n = 60

    def make() -> Any:
        return ApplyWindow().with_tumbling_window(Count(7)).with_persistence()

    conf = {
        **provider.conf,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 20,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: mode,
    }
    store = provider.open()
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, _windowed(n, make()))
        run_until(cluster, lambda: acked(store) >= n // 2, "half acked", 60)
        cluster.kill_topology("w")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, _windowed(n + 3, make()))  # 63: nine windows
        _run_until_acked(cluster, store, n + 3)
    applied = _applied(store)
    wrong = {m: applied.get(m, 0) for m in range(n) if applied.get(m, 0) != 1}
    if mode == "aligned":
        assert wrong == {}, f"not applied exactly once: {wrong}"
    else:
        assert all(k >= 1 for k in wrong.values()), f"never applied: {wrong}"


def test_a_task_started_again_mid_checkpoint_gets_no_hook_before_init_state(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between PREPARE and COMMIT, the topology is submitted again; the recovery
    sends ROLLBACK before INITSTATE. pre_rollback ran on a bolt whose init_state had
    not (docs/state.md: init_state comes first): a bolt that sets up a buffer there
    raised, failed the ROLLBACK, and every retry of it: nothing more was processed.
    Now the state rolls back without the hook, and the restarted topology finishes."""
    crash.install(monkeypatch)
    n = 40
    crashed = crash.Crash(crash.txid_written("count", "prepare", 2, tasks=2))

    def topology() -> Any:
        b = TopologyBuilder()
        b.set_spout("source", StoreQueue(n))
        b.set_bolt("split", SplitWords()).shuffle_grouping("source")
        b.set_bolt("count", BufferedWordCount(), 2).fields_grouping("split", ["word"])
        return b.create_topology()

    base = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 10}
    with LocalCluster(simulate_time=True) as cluster:
        conf = {**base, **provider.conf}
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = crashed.config(provider.config)
        cluster.submit_topology("wc", conf, topology())
        run_until(cluster, lambda: crashed.crashed, "crashed between PREPARE and COMMIT", 30)
        cluster.kill_topology("wc")
    store = provider.open()
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", {**base, **provider.conf}, topology())
        _run_until_acked(cluster, store, n, limit=60)
        errors = cluster.errors("wc")
    assert acked(store) == n, f"stuck after the restart: {acked(store)} of {n}; {errors[:1]}"
    assert errors == []
