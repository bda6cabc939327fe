"""Stateful bolts on SparkCluster: a stateful word count over SQLite, Redis and
PostgreSQL whose worker process is SIGKILLed twice, once between PREPARE and COMMIT
(in ``pre_commit``) and once after a COMMIT (in the next ``pre_prepare``); Spark starts
it again and its tasks come back with the last committed state."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tupletree import Config
from tupletree.spark.cluster import SparkCluster
from tupletree.store.codec import loads_json
from tupletree.testing.shared import SharedList

from .components import acked, check_counts, self_killing_word_count
from .conftest import Provider

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def checkpoint(store: Any) -> tuple[int, str]:
    """The checkpoint spout's stored (txid, state)."""
    (data,) = store.get("$checkpointspout-0", ["__state"])
    stored = loads_json(data)
    return stored["txid"], stored["state"]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


# Each provider once, the modes alternating (LocalCluster's tests run every pair):
# a run takes 20 to 50 s here.
MODES = {"sqlite": "aligned", "redis": "storm", "postgresql": "aligned"}


def test_stateful_word_count_survives_two_sigkills(
    spark: Any, durable_provider: Provider, tmp_path: Any
) -> None:
    """Killed in pre_commit(3) (prepared, not committed) and in pre_prepare(8) (after
    COMMIT 7): the final state has every input word, exactly once in the aligned mode;
    in Storm's mode the excess is exactly the words applied twice, all of inputs
    delivered again."""
    mode = MODES[durable_provider.kind]
    n = 200
    deliveries = SharedList("deliveries")
    kills = [("pre_commit", 3), ("pre_prepare", 8)]
    conf = {
        **durable_provider.conf,
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_ACKER_EXECUTORS: 2,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 5,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 8,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 500,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: mode,
    }
    flags = tmp_path / "kills"
    flags.mkdir()
    topology = self_killing_word_count(n, deliveries, str(flags), kills)
    store = durable_provider.open()
    with SparkCluster(spark) as cluster:
        cluster.submit_topology("swc", conf, topology)
        wait_for(lambda: acked(store, 2) == n, 240, "every input acked")
        # An input is acked once its own trees' bolts committed; the other count task
        # may still be committing that checkpoint: wait for one begun after this.
        after = checkpoint(store)[0]
        wait_for(lambda: checkpoint(store) >= (after + 1, "COMMITTED"), 60, "a later commit")
        assert sorted(p.name for p in flags.iterdir()) == ["pre_commit-3", "pre_prepare-8"]
        assert sum(cluster.worker_restarts("swc").values()) >= 2
        cluster.kill_topology("swc")
    check_counts(store, n, Counter(deliveries.items()), exact=mode == "aligned")
