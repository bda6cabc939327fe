"""Progress, Trident's durable txids on tupletree.store: a txid is committed once (the
compare-and-set refuses a second coordinator's commit), a coordinator resumes at the
first uncommitted txid with its attempts, the metadata layouts, and where a memory
store is refused."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tupletree import Config, Fields
from tupletree.store import MemoryStore, open_store
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.progress import Progress, open_progress
from tupletree.trident.state import MemoryMapState

from .support import SeqTransactional, coordinator_view, memory_counts


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_txid_is_committed_once_and_resumed_after(kind: str, tmp_path: Any) -> None:
    path = str(tmp_path / "p.db")
    store = MemoryStore() if kind == "memory" else open_store("sqlite", {"path": path})
    first = Progress(store, ["s"])
    assert first.load_coordinator() == (1, {})
    first.save_attempts({1: 0, 2: 3})
    zombie = Progress(store, ["s"])
    zombie.load_coordinator()
    assert first.commit(1, 0, {2: 3})
    assert not zombie.commit(1, 0, {})  # already committed by the other
    assert first.commit(2, 3, {})
    again = Progress(store, ["s"])
    assert again.load_coordinator() == (3, {})
    assert again.commits("s") == {1: 0, 2: 3}
    assert not again.commit(2, 4, {})  # never twice, whoever asks


def test_a_coordinator_of_several_spouts_resumes_at_the_furthest(tmp_path: Any) -> None:
    store = MemoryStore()
    Progress(store, ["a"]).load_coordinator()
    a = Progress(store, ["a"])
    a.load_coordinator()
    a.commit(1, 0, {})
    both = Progress(store, ["a", "b"])
    assert both.load_coordinator()[0] == 2
    assert both.commit(2, 0, {})  # b's currtx was set to 2 on load: one CAS for both
    assert both.commits("b") == {2: 0}


def test_the_commit_log_is_bounded(monkeypatch: Any) -> None:
    from tupletree.trident import progress

    monkeypatch.setattr(progress, "COMMIT_LOG_KEPT", 3)
    p = Progress(MemoryStore(), ["s"])
    p.load_coordinator()
    for txid in range(1, 8):
        assert p.commit(txid, 0, {})
    assert sorted(p.commits("s")) == [5, 6, 7]


def test_partition_metadata_by_txid(tmp_path: Any) -> None:
    p = Progress(MemoryStore(), ["s"])
    p.put_partition_metas("s", 4, {"p0": {"next": 5}, "p1": {"next": 7}})
    p.put_partition_metas("s", 5, {"p0": {"next": 9}})
    assert p.partition_metas("s", ["p0", "p1"]) == {
        "p0": {4: {"next": 5}, 5: {"next": 9}},
        "p1": {4: {"next": 7}},
    }
    p.drop_partition_metas("s", [("p0", 4)])
    assert p.partition_metas("s", ["p0"]) == {"p0": {5: {"next": 9}}}
    with pytest.raises(TypeError, match="partition p2"):
        p.put_partition_metas("s", 6, {"p2": object()})


def test_coordinator_metadata_by_txid() -> None:
    p = Progress(MemoryStore(), ["s"])
    p.put_coordinator_meta("s", 1, ["p0", "p1"])
    p.put_coordinator_meta("s", 2, ["p0"])
    assert p.coordinator_meta("s", 2) == (True, ["p0"], ["p0", "p1"])
    assert p.coordinator_meta("s", 3) == (False, None, ["p0"])
    p.cleanup_coordinator_meta("s", 2)
    assert p.coordinator_meta("s", 3) == (False, None, ["p0"])
    assert p.coordinator_meta("s", 2)[2] is None


def test_a_memory_store_is_refused_outside_the_building_process() -> None:
    conf = {Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: None}
    open_progress(conf, "trident-progress-x", os.getpid()).close()
    with pytest.raises(ValueError, match=r"sqlite.*redis.*postgresql"):
        open_progress(conf, "trident-progress-x", os.getpid() + 1)


def test_the_configured_store_is_opened(tmp_path: Any) -> None:
    conf = {
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: "sqlite",
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: {"path": str(tmp_path / "x.db")},
    }
    store = open_progress(conf, "unused", os.getpid() + 1)  # durable: any process
    assert "sqlite" in store.name.lower() or "x.db" in store.name
    with pytest.raises(ValueError, match="takes no"):
        open_progress({**conf, Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: {"bogus": 1}}, "u", 0)


@pytest.mark.parametrize(
    ("kind", "config", "says"),
    [
        ("sqlite", None, r"the sqlite store's config needs 'path'"),
        ("postgresql", {"prefix": "t_"}, r"the postgresql store's config needs 'dsn'"),
        ("redis", {"url": "redis://:hunter2@127.0.0.1:1/0", "pth": "x"}, r"takes no \['pth'\]"),
    ],
)
def test_a_progress_store_config_its_backend_would_refuse_is_refused_at_submit(
    sim_cluster, kind: str, config: Any, says: str
) -> None:
    """Refused by submit_topology, naming the key, before anything runs; it used to be
    reported by the coordinator when it opened the store, in a running topology. A
    password in the config is not repeated."""
    t = TridentTopology()
    t.new_stream("seq", SeqTransactional(None)).group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.Factory(), Count(), Fields("count")
    )
    conf = {
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: kind,
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: config,
    }
    with pytest.raises(ValueError, match=says) as refused:
        sim_cluster.submit_topology("bad-store", conf, t.build())
    assert Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG in str(refused.value)
    assert "hunter2" not in str(refused.value) and "hunter2" not in repr(refused.value.args)
    assert "bad-store" not in sim_cluster.topologies()


def test_one_built_topology_submitted_under_two_names_keeps_two_progresses(sim_cluster) -> None:
    """The default memory store was named at build: both submissions' coordinators
    shared it, and the second found every txid committed by the first ("already
    committed by another coordinator") and skipped ahead."""
    t = TridentTopology()
    t.new_stream("seq", SeqTransactional(None)).group_by(Fields("word")).persistent_aggregate(
        MemoryMapState.Factory(), Count(), Fields("count")
    )
    built = t.build()
    conf = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100}
    sim_cluster.submit_topology("a", conf, built)
    sim_cluster.submit_topology("b", conf, built)
    sim_cluster.advance_time(6)
    for name in ("a", "b"):
        assert sim_cluster.errors(name) == []
        view = coordinator_view(sim_cluster, name)
        assert view["reloads"] == 0
        assert view["lastCommittedTxid"] == view["currentTxid"] - 1 >= 4


def test_two_topologies_on_one_stream_name_and_store_are_told_why(sim_cluster, tmp_path) -> None:
    """Progress is kept by stream name (Storm's txStateId): two topologies naming their
    streams alike in one SQLite store drive one txid sequence. The second's coordinator
    said only "txid 1 was already committed by another coordinator" about "bg0"."""
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100,
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE: "sqlite",
        Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG: {"path": str(tmp_path / "p.db")},
    }
    for name in ("a", "b"):
        t = TridentTopology()
        t.new_stream("words", SeqTransactional(None)).group_by(Fields("word")).persistent_aggregate(
            MemoryMapState.Factory(), Count(), Fields("count")
        )
        sim_cluster.submit_topology(name, conf, t.build())
    sim_cluster.advance_time(4)
    errors = sim_cluster.errors("a") + sim_cluster.errors("b")
    assert errors
    assert all(
        "already committed" in e
        and "stream named 'words'" in e
        and Config.TOPOLOGY_TRIDENT_PROGRESS_STORE in e
        for e in errors
    ), errors


def test_a_progress_store_that_fails_for_a_while_costs_a_replay_not_the_topology(
    sim_cluster, monkeypatch
) -> None:
    """The record of txid 3's commit fails, then the store cannot be read for two more
    tries, then recording the attempts of a batch it starts fails once. The coordinator
    went on after a failed commit record (its table ahead of the store): txid 4's states
    committed, and txid 3's replay was refused by them as behind ("Current batch (3) is
    behind state's batch (4)"), forever; a failed attempts record left a batch active
    that was never emitted, and the coordinator waited for it forever."""
    from tupletree.trident.progress import Progress

    faults = {"commit": {3}, "load": 2, "save": 1}
    commit, load, save = Progress.commit, Progress.load_coordinator, Progress.save_attempts

    def flaky_commit(self: Progress, txid: int, *args: Any) -> bool:
        if txid in faults["commit"]:
            faults["commit"].discard(txid)
            raise ConnectionError("test: the progress store went away")
        return commit(self, txid, *args)

    def flaky_load(self: Progress) -> Any:
        if not faults["commit"] and faults["load"]:
            faults["load"] -= 1
            raise ConnectionError("test: the progress store is still away")
        return load(self)

    def flaky_save(self: Progress, attempts: Any) -> None:
        if not faults["load"] and 6 in attempts and faults["save"]:
            faults["save"] -= 1
            raise ConnectionError("test: the progress store went away again")
        save(self, attempts)

    monkeypatch.setattr(Progress, "commit", flaky_commit)
    monkeypatch.setattr(Progress, "load_coordinator", flaky_load)
    monkeypatch.setattr(Progress, "save_attempts", flaky_save)
    factory = MemoryMapState.Factory()
    t = TridentTopology()
    spout = SeqTransactional(None, partitions=2, records=10, per_batch=1)
    t.new_stream("seq", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    )
    conf = {
        Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
    }
    sim_cluster.submit_topology("t", conf, t.build())
    sim_cluster.advance_time(30)
    assert faults == {"commit": set(), "load": 0, "save": 0}
    assert memory_counts(factory, 1) == {f"p{p}-{i}": 1 for p in range(2) for i in range(10)}
    view = coordinator_view(sim_cluster, "t")
    assert view["lastCommittedTxid"] > 10  # past the data's 10 batches: it went on
    errors = sim_cluster.errors("t")
    assert not any("behind" in e for e in errors), errors
    assert any("could not record that txid 3 committed" in e for e in errors), errors
    assert any("could not record the attempts" in e for e in errors), errors
