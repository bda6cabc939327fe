"""Persistent windows (StatefulWindowedBolt.with_persistence): the stored tuples with a
memory bound, and a window of 10,000 tuples sliding 1,000 with at most 1,000 in memory,
killed after 25,000 inputs and submitted again: the windows after the last checkpoint
are those of the run without the kill, and no input timed out although the window
spans more than the message timeout."""

from __future__ import annotations

import pickle
import uuid

import pytest

from tupletree import Config, LocalCluster
from tupletree.state import StatefulBoltExecutor
from tupletree.store import MemoryStore
from tupletree.store.memory import forget
from tupletree.testing.shared import SharedList
from tupletree.topology.fields import Fields
from tupletree.windowing import Count, StatefulWindowedBolt, UnsupportedOperationError
from tupletree.windowing.persistent import StatefulWindowRunner
from tupletree.windowing.stored import PersistentTupleWindow, WindowTuples
from tupletree.windowing.window import DetachedTuple

from .persistent_components import persistent_window, reference_windows


def tup(n: int) -> DetachedTuple:
    return DetachedTuple([n], Fields(["n"]), "numbers", "default", 1)


# -- stored tuples -------------------------------------------------------------------------


def test_stored_tuples_keep_at_most_the_allowance_in_memory_and_read_the_rest_back():
    store = MemoryStore()
    stored = WindowTuples(store, "w-tuples", in_memory=100)
    assert (stored.partition_size, stored.max_partitions) == (25, 4)
    refs = [stored.add(tup(n)) for n in range(1_000)]
    assert stored.in_memory() <= 100 and stored.high_water <= 4
    assert [t[0] for t in stored.iter(refs)] == list(range(1_000))
    assert stored.in_memory() <= 100
    assert len(list(store.items("w-tuples"))) >= 36  # the evicted partitions, written


def test_a_partition_is_written_whole_so_a_rollback_reuses_references_safely():
    """After a rollback references past the committed state are used again: their new
    tuples replace the stale ones, the committed ones of the same partition stay."""
    store = MemoryStore()
    stored = WindowTuples(store, "w", in_memory=8)  # partitions of 2, 4 in memory
    for n in range(5):
        stored.add(tup(n))
    stored.flush()  # "committed": 0..4, next_ref 5
    for n in range(5, 20):
        stored.add(tup(100 + n))  # uncommitted, partly written while evicting
    stored.reset(next_ref=5, low=0)
    for n in range(5, 8):
        stored.add(tup(200 + n))
    assert [t[0] for t in stored.iter(list(range(8)))] == [0, 1, 2, 3, 4, 205, 206, 207]
    stored.forget_below(4)
    assert {k for k, _ in store.items("w")} >= {"2", "3"}
    assert {"0", "1"}.isdisjoint(k for k, _ in store.items("w"))


def test_a_persistent_window_offers_iter_not_new_or_expired():
    stored = WindowTuples(MemoryStore(), "w", in_memory=10)
    refs = [stored.add(tup(n)) for n in range(3)]
    window = PersistentTupleWindow(refs, stored, None, 2)
    assert [t[0] for t in window.iter()] == [0, 1, 2] == [t[0] for t in window.get()]
    assert len(window) == 3 and window.get_end_timestamp() == 2
    with pytest.raises(UnsupportedOperationError, match="use iter"):
        window.get_new()
    with pytest.raises(UnsupportedOperationError, match="use iter"):
        window.get_expired()


def test_stateful_windowed_bolts_become_stateful_bolts_and_check_their_settings():
    bolt = StatefulWindowedBolt().with_window(Count(3)).with_persistence()
    assert bolt.persistent and bolt.with_max_events_in_memory(7).max_events_in_memory == 7
    with pytest.raises(ValueError, match="positive integer, got 0"):
        bolt.with_max_events_in_memory(0)
    topo = persistent_window(10, SharedList("w"))
    spec = topo.components["window"]
    assert isinstance(spec.obj, StatefulBoltExecutor)
    assert isinstance(spec.obj.delegate, StatefulWindowRunner)
    assert "$checkpointspout" in topo.components
    pickle.dumps(spec.obj)  # copied to its tasks


# -- killed and submitted again -------------------------------------------------------------


def run(cluster: LocalCluster, name: str, until, limit: int = 400) -> None:
    for _ in range(limit):
        if until():
            return
        cluster.advance_time(1)
    raise AssertionError(f"{name}: not done after {limit} simulated seconds")


def in_memory_max(cluster: LocalCluster, name: str) -> int:
    per_task = cluster.metrics(name)["window"]["custom"]["window"]
    return max(m["in_memory"] for m in per_task.values())


@pytest.mark.slow
def test_a_persistent_window_killed_after_25000_inputs_goes_on_as_if_not():
    total, kill_after = 30_000, 25_000
    conf_for = {}
    windows = {}
    for run_name in ("reference", "killed"):
        store_name = f"persistent-{uuid.uuid4().hex}"
        conf_for[run_name] = {
            Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": store_name},
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10,
            # About 500 inputs per 1 s checkpoint: 10,000 take 20 s, twice the timeout.
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 500,
        }
    acked = lambda name, n: lambda: len(list(MemoryStore(name).items("numbers"))) >= n  # noqa: E731

    reference = SharedList("reference windows")
    with LocalCluster(simulate_time=True) as cluster:
        conf = conf_for["reference"]
        cluster.submit_topology("ref", conf, persistent_window(total, reference))
        peak = 0
        for _ in range(400):
            if acked(conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG]["name"], total)():
                break
            cluster.advance_time(1)
            peak = max(peak, in_memory_max(cluster, "ref"))
        spout = cluster.metrics("ref")["numbers"]
        assert spout["timed_out"] == 0 and spout["failed"] == 0
    windows["reference"] = {w[0]: w for w in reference.items()}
    assert windows["reference"] == reference_windows(total)
    assert 0 < peak <= 1_000

    first_life, second_life = SharedList("first life"), SharedList("second life")
    conf = conf_for["killed"]
    store = conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG]["name"]
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, persistent_window(total, first_life, kill_after))
        run(cluster, "first life", lambda: cluster.metrics("w")["numbers"]["emitted"] >= kill_after)
        assert cluster.metrics("w")["numbers"]["timed_out"] == 0
        cluster.kill_topology("w")
    committed = len(list(MemoryStore(store).items("numbers")))
    assert 10_000 < committed < kill_after, "the kill should leave inputs uncommitted"
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("w", conf, persistent_window(total, second_life))
        run(cluster, "second life", acked(store, total))
        spout = cluster.metrics("w")["numbers"]
        assert spout["timed_out"] == 0 and spout["failed"] == 0
        assert cluster.errors("w") == []
    again = {w[0]: w for w in second_life.items()}
    # The second life's windows are exactly the reference's from where the last
    # checkpoint left the window; the first life's (before the kill) were too.
    assert again == {end: w for end, w in windows["reference"].items() if end >= min(again)}
    assert min(again) <= committed + 1_000
    assert {w[0]: w for w in first_life.items()}.items() <= windows["reference"].items()
    forget(store)


@pytest.mark.spark
@pytest.mark.slow
def test_a_persistent_window_on_spark_survives_a_sigkill(spark, tmp_path):
    """SparkCluster, SQLite state: the window bolt's worker SIGKILLs itself after 2,500
    of 3,000 inputs; Spark starts it again, the window comes back from the last
    checkpoint, and every window either life reported is the unkilled window's (the ones
    after the last checkpoint twice), none missing; with a 4 s timeout and a window
    spanning about 10 s, only the trees in flight at the kill timed out."""
    import time

    from tupletree.spark.cluster import SparkCluster

    from .persistent_components import dying_persistent_window, reference_small_windows

    total = 3_000
    windows = SharedList("windows")
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": str(tmp_path / "state.db")},
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 4,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 500,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 50,  # about 100 inputs a second
    }
    flag = str(tmp_path / "died")
    topology = dying_persistent_window(total, windows, flag, die_at=2_500)
    expected = reference_small_windows(total)
    with SparkCluster(spark) as cluster:
        cluster.submit_topology("pw", conf, topology)
        deadline = time.monotonic() + 180
        while {w[0] for w in windows.items()} != set(expected):
            assert time.monotonic() < deadline, "not every window came"
            time.sleep(0.5)
        assert sum(cluster.worker_restarts("pw").values()) >= 1
        spout = cluster.metrics("pw")["numbers"]
        cluster.kill_topology("pw")
    # Only the trees in flight when the worker died timed out (that is how they come
    # again): at most max spout pending of them, however long the window is.
    assert spout["timed_out"] <= 50
    seen = windows.items()
    assert all(expected[w[0]] == w for w in seen)
    assert len(seen) > len(expected), "no window came twice: the kill missed"


def test_a_plain_stateful_window_keeps_state_and_holds_acks_to_the_commit(sim_cluster):
    """Without persistence: an in-memory window (get_new works), the user's state
    checkpointed, and the expired tuples' acks held until the checkpoint commits."""
    from tupletree import TopologyBuilder
    from tupletree.state.kv import KeyValueState
    from tupletree.testing import AckFailTracker, FeederSpout

    from .persistent_components import CountingWindows

    name = f"plain-{uuid.uuid4().hex}"
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("w", CountingWindows().with_tumbling_window(Count(3))).shuffle_grouping("feed")
    conf = {Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": name}}
    sim_cluster.submit_topology("plain", conf, b.create_topology())
    assert sim_cluster.wait_idle()
    for n in range(7):
        feeder.feed([n], msg_id=n)
    assert sim_cluster.wait_idle()
    assert tracker.acked == set()  # 0..2 left the first window, but no commit yet
    sim_cluster.advance_time(1)
    assert tracker.acked == {0, 1, 2}  # 3..5 still in their window, 6 in the next
    state = KeyValueState(MemoryStore(name), "w-0")
    assert (state.get("windows"), state.get("seen")) == (2, 6)
    assert sim_cluster.errors("plain") == []
    forget(name)
