"""What a rebalance keeps (an adversarial review): bad options are refused, naming the
offender, before the topology is touched; a Trident word count rebalanced mid-stream
(transactional and opaque spouts, memory and SQLite map states, the spout's and the
state's executors changed) counts every record exactly once; a stateful bolt and a
persistent window rebalanced to another executor count keep their state, and asking
for more executors than tasks is refused with the topology still running."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Config, Fields
from tupletree.errors import InvalidConfigError, InvalidTopologyError
from tupletree.testing.shared import SharedList
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState, SqliteMapState

from .registry import Box
from .state.components import expected_counts, word_count
from .test_cluster_rebalance import Lifecycle, topology
from .trident.support import SeqOpaque, SeqTransactional, memory_counts
from .windowing.persistent_components import persistent_window, reference_windows

# -- bad options -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parallelism", "error", "names"),
    [
        ("count=2", InvalidTopologyError, ["must map component ids", "str", "'count=2'"]),
        (["count"], InvalidTopologyError, ["must map component ids", "list"]),
        ({"count": "2"}, InvalidTopologyError, ["'count'", "not '2'", "a str"]),
        ({"count": True}, InvalidTopologyError, ["'count'", "not True", "a bool"]),
        ({"count": 2.0}, InvalidTopologyError, ["'count'", "not 2.0", "a float"]),
        ({"count": 0}, InvalidTopologyError, ["'count'", "not 0"]),
        ({"count": -1}, InvalidTopologyError, ["'count'", "not -1"]),
        ({"count": 5}, InvalidTopologyError, ["'count'", "not 5", "tasks=5"]),
        ({"cuont": 1}, InvalidTopologyError, ["no component 'cuont'"]),
        ({"src": 1, "cuont": 1}, InvalidTopologyError, ["no component 'cuont'"]),
    ],
)
def test_a_bad_parallelism_is_refused_naming_it_and_the_topology_is_untouched(
    sim_cluster: Any, parallelism: Any, error: type, names: list[str]
) -> None:
    """Before: a str or a list for ``parallelism`` raised AttributeError ("'str' object
    has no attribute 'items'"), naming neither the option nor what was wrong with it."""
    calls, seen = SharedList(), SharedList()
    sim_cluster.submit_topology("wc", {}, topology(Lifecycle(20, calls), seen))
    sim_cluster.advance_time(1)
    before = sim_cluster.topology_info("wc")
    with pytest.raises(error) as info:
        sim_cluster.rebalance("wc", parallelism=parallelism)
    for name in names:
        assert name in str(info.value), (name, str(info.value))
    after = sim_cluster.topology_info("wc")
    assert after["active"] and not after["rebalancing"]
    assert after["executors"] == before["executors"]
    assert after["conf"][Config.TOPOLOGY_WORKERS] == before["conf"][Config.TOPOLOGY_WORKERS]
    assert calls.items() == ["activate"]  # never deactivated
    sim_cluster.advance_time(1)
    assert sim_cluster.metrics("wc")["src"]["acked"] == 20  # and it still runs


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"workers": True}, "got True"),
        ({"workers": "2"}, "got '2'"),
        ({"workers": 0}, "got 0"),
        ({"workers": -3}, "got -3"),
        ({"wait_secs": "1"}, "got '1'"),
        ({"wait_secs": -1}, "got -1"),
        ({"wait_secs": float("nan")}, "got nan"),
    ],
)
def test_bad_workers_or_wait_are_refused_with_the_topology_untouched(
    sim_cluster: Any, options: dict[str, Any], match: str
) -> None:
    calls, seen = SharedList(), SharedList()
    sim_cluster.submit_topology("wc", {}, topology(Lifecycle(5, calls), seen))
    with pytest.raises(InvalidConfigError, match=match):
        sim_cluster.rebalance("wc", **options)
    info = sim_cluster.topology_info("wc")
    assert info["active"] and not info["rebalancing"]
    assert calls.items() == ["activate"]


# -- Trident: exact counts through rebalances --------------------------------------------


def _trident_word_count(spout: Any, factory: Any) -> Any:
    t = TridentTopology()
    (
        t.new_stream("words", spout)
        .parallelism_hint(3)
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
        .parallelism_hint(4)
    )
    return t.build()


def _sqlite_counts(factory: Any, keys: list[str]) -> dict[str, Any]:
    state = factory.make_state({}, None, 0, 1)
    values = state.multi_get([[k] for k in keys])
    return {k: v for k, v in zip(keys, values, strict=True) if v is not None}


@pytest.mark.parametrize(
    ("spout_cls", "state"),
    [(SeqOpaque, "memory"), (SeqOpaque, "sqlite"), (SeqTransactional, "sqlite")],
)
def test_a_trident_word_count_rebalanced_mid_stream_counts_every_record_once(
    sim_cluster: Any, tmp_path: Any, spout_cls: type, state: str
) -> None:
    """5 partitions read by 3 spout tasks, 3 batches active at once; rebalanced three
    times while batches are in flight (the spout, the state and the coordinator to 1
    executor, then back, with other worker counts): every record is counted once."""
    box = Box()
    box.get()["max_txid"] = 60
    if state == "memory":
        factory: Any = MemoryMapState.Factory()
    elif spout_cls is SeqOpaque:
        factory = SqliteMapState.opaque(str(tmp_path / "counts.db"))
    else:
        factory = SqliteMapState.transactional(str(tmp_path / "counts.db"))
    built = _trident_word_count(spout_cls(box, partitions=5, records=24, per_batch=2), factory)
    conf = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0,
        "topology.trident.progress.store": "sqlite",
        "topology.trident.progress.store.config": {"path": str(tmp_path / "progress.db")},
    }
    sim_cluster.submit_topology("tc", conf, built)
    every = {cid: spec.tasks for cid, spec in built.components.items()}
    sim_cluster.advance_time(1)
    sim_cluster.rebalance("tc", workers=3, parallelism=dict.fromkeys(every, 1))
    assert sim_cluster.topology_info("tc")["executors"] == dict.fromkeys(every, 1)
    sim_cluster.advance_time(1)
    sim_cluster.rebalance("tc", workers=2, parallelism=every)
    sim_cluster.advance_time(1)
    sim_cluster.rebalance("tc", workers=1, parallelism={"words": 2})
    sim_cluster.advance_time(40)
    want = {f"p{p}-{i}": 1 for p in range(5) for i in range(24)}
    if state == "memory":
        got = memory_counts(factory)
    else:
        got = {k: getattr(v, "val", v) for k, v in _sqlite_counts(factory, list(want)).items()}
        got = {k: getattr(v, "curr", v) for k, v in got.items()}
    assert got == want
    assert sim_cluster.errors("tc") == []


# -- stateful bolts and persistent windows ---------------------------------------------


def test_a_stateful_word_count_rebalanced_to_fewer_executors_keeps_its_state(
    sim_cluster: Any, tmp_path: Any
) -> None:
    """4 count tasks on 4 executors, then 1, then 3: each key stays on its task (the
    task count never changes), the state's task count record is never met, and the
    committed counts are every word of every message (aligned mode: exactly once)."""
    from tupletree.state.kv import KeyValueState
    from tupletree.store import open_store

    store_conf = {"path": str(tmp_path / "state.db")}
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: store_conf,
        "topology.state.checkpoint.mode": "aligned",
    }
    sim_cluster.submit_topology("sc", conf, word_count(300, counters=4))
    sim_cluster.advance_time(1)
    with pytest.raises(InvalidTopologyError, match=r"'count' has 4 task\(s\).*not 5"):
        sim_cluster.rebalance("sc", parallelism={"count": 5})
    assert sim_cluster.topology_info("sc")["active"]
    sim_cluster.rebalance("sc", workers=2, parallelism={"count": 1})
    sim_cluster.advance_time(1)
    sim_cluster.rebalance("sc", parallelism={"count": 3, "split": 1})
    sim_cluster.advance_time(30)
    store = open_store("sqlite", store_conf)
    merged: dict[Any, Any] = {}
    for index in range(4):
        kv = KeyValueState(store, f"count-{index}")
        kv._prepared = {}  # only what is committed
        merged.update(dict(kv))
    words = {k: v for k, v in merged.items() if isinstance(k, str)}
    applied = {k: v for k, v in merged.items() if not isinstance(k, str)}
    assert words == expected_counts(300)
    assert set(applied.values()) == {1}
    assert sim_cluster.errors("sc") == []


def test_a_persistent_window_refuses_more_executors_than_tasks_and_keeps_firing(
    sim_cluster: Any, tmp_path: Any
) -> None:
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": str(tmp_path / "w.db")},
    }
    windows = SharedList()
    sim_cluster.submit_topology("w", conf, persistent_window(3_000, windows))
    sim_cluster.advance_time(1)
    with pytest.raises(InvalidTopologyError, match=r"'window' has 1 task\(s\).*tasks=2"):
        sim_cluster.rebalance("w", parallelism={"window": 2})
    info = sim_cluster.topology_info("w")
    assert info["active"] and not info["rebalancing"]
    sim_cluster.rebalance("w", workers=3)
    sim_cluster.advance_time(30)
    assert {w[0]: w for w in windows.items()} == reference_windows(3_000)
    assert sim_cluster.errors("w") == []
