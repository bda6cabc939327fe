"""A persistent window whose worker died after it prepared a checkpoint and before that
checkpoint committed. The recovery sends ROLLBACK before INITSTATE to the restarted
task, which (docs/state.md) rolls its state back without the user's hooks; the window's
own saved index was rolled back only in a hook, so the restarted task restored the
window as *prepared*, not as committed, and the inputs since the commit then came again
into a window that already held them: in the aligned mode, whose promise is exactly
once, messages were applied twice (docs/state.md, Persistent windows: "After a crash
the window is what it was at the last commit and the inputs since come again")."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, LocalCluster, TopologyBuilder
from tupletree.windowing import Count

from ..state import crash
from ..state.components import ApplyWindow, StoreQueue, acked, committed, run_until
from ..state.conftest import Provider, provider  # noqa: F401 (the fixture)


def _topology(n: int) -> Any:
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(n))
    bolt = ApplyWindow().with_tumbling_window(Count(7)).with_persistence()
    b.set_bolt("win", bolt).shuffle_grouping("source")
    return b.create_topology()


def _applied(store: Any) -> dict[int, int]:
    state = committed(store, "win", tasks=1)
    return {k[1]: v for k, v in state.items() if isinstance(k, tuple) and k[0] == "applied"}


@pytest.mark.parametrize("after", ["window-prepared", "both-prepared", "committing"])
def test_a_persistent_window_killed_between_prepare_and_commit_comes_back_as_committed(
    provider: Provider,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    after: str,
) -> None:
    """Killed right after the window's index (and then the bolt's state) was prepared
    for checkpoint 3, or once the checkpoint spout decided to commit it, before the
    commit; submitted again. Every message must be applied
    exactly once (the aligned mode). Before the fix a window's worth of messages was
    applied twice: the restored window held them, and the rewound spout sent them
    again."""
    crash.install(monkeypatch)
    n = 63  # nine windows of 7
    if after == "committing":  # the decision to commit 3 taken, the COMMIT not sent
        crashed = crash.Crash(crash.checkpoint_saved("COMMITTING", 3))
    else:
        tasks = 1 if after == "window-prepared" else 2  # win-0-window$txid, win-0$txid
        crashed = crash.Crash(crash.txid_written("win", "prepare", 3, tasks=tasks))
    base = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 5,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned",
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 100,
    }
    with LocalCluster(simulate_time=True) as cluster:
        conf = {**base, **provider.conf}
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = crashed.config(provider.config)
        cluster.submit_topology("w", conf, _topology(n))
        run_until(cluster, lambda: crashed.crashed, "crashed at PREPARE 3", 30)
        cluster.kill_topology("w")
    store = provider.open()
    prepared_window = list(store.items("win-0-window$prepare"))
    assert prepared_window, "the crash left no prepared window: the test needs one"
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", {**base, **provider.conf}, _topology(n))
        run_until(cluster, lambda: acked(store) >= n, f"{n} acked", 120)
        cluster.advance_time(3)
    applied = _applied(store)
    wrong = {m: applied.get(m, 0) for m in range(n) if applied.get(m, 0) != 1}
    assert wrong == {}, f"not applied exactly once after the restart: {wrong}"
