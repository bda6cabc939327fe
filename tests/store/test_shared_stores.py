"""A store only one host can see (SQLite, memory) is refused at submit on a master whose
workers may run on several hosts, naming the setting and why (store/hosts.py); the
cluster tells the components where it runs through ``tupletree.cluster.master``."""

from __future__ import annotations

import pytest

from tupletree import Config, LocalCluster
from tupletree.errors import InvalidConfigError
from tupletree.state.bolts import StatefulBoltExecutor
from tupletree.trident.progress import check_progress_store, check_states_shared
from tupletree.trident.state import MemoryMapState
from tupletree.trident.state.store_map_states import SqliteMapState

from ..state.components import StatefulWordCount, word_count

MASTER = Config.TUPLETREE_CLUSTER_MASTER
PROGRESS = Config.TOPOLOGY_TRIDENT_PROGRESS_STORE
PROGRESS_CONFIG = Config.TOPOLOGY_TRIDENT_PROGRESS_STORE_CONFIG


# What each backend needs to be opened (the config is checked at submit too).
STORE_CONFIGS = {"sqlite": {"path": "/tmp/p.db"}, "postgresql": {"dsn": "dbname=test"}}


@pytest.mark.parametrize(
    ("kind", "master", "refused"),
    [
        (None, "local", False),  # LocalCluster: one process
        (None, "local[2]", True),  # Spark's workers are processes of their own
        ("sqlite", "local[2]", False),
        ("sqlite", "spark://10.0.0.1:7077", True),
        ("sqlite", "yarn", True),
        ("redis", "spark://10.0.0.1:7077", False),
        ("postgresql", "k8s://https://host:6443", False),
    ],
)
def test_the_trident_progress_store_must_reach_every_worker(kind, master, refused) -> None:
    conf = {MASTER: master, PROGRESS: kind, PROGRESS_CONFIG: STORE_CONFIGS.get(kind)}
    if not refused:
        check_progress_store(conf, "$mbc")
        return
    with pytest.raises(InvalidConfigError) as err:
        check_progress_store(conf, "$mbc")
    assert err.value.key == PROGRESS
    assert master in str(err.value) and "redis" in str(err.value)


def test_a_trident_state_on_one_host_is_refused_on_a_cluster_of_several(tmp_path) -> None:
    sqlite = SqliteMapState.opaque(str(tmp_path / "s.db"))
    check_states_shared({MASTER: "local[4]"}, "b-1", {"s": sqlite})
    check_states_shared({MASTER: "spark://h:7077"}, "b-1", {"m": _redis_like()})
    for factory in (sqlite, MemoryMapState.Factory()):
        with pytest.raises(InvalidConfigError, match=r"'b-1'.*one host.*spark://h:7077"):
            check_states_shared({MASTER: "spark://h:7077"}, "b-1", {"s": factory})


def _redis_like() -> object:
    class Shared:
        shared_across_hosts = True

    return Shared()


@pytest.mark.parametrize(("provider", "refused"), [("sqlite", True), ("redis", False)])
def test_a_stateful_bolts_provider_must_reach_every_host(provider, refused) -> None:
    executor = StatefulBoltExecutor(StatefulWordCount())
    conf = {
        MASTER: "spark://h:7077",
        Config.TOPOLOGY_STATE_PROVIDER: provider,
    }
    if not refused:
        executor.check_config(conf, "count")
        return
    with pytest.raises(InvalidConfigError, match=r"stateful bolt 'count'.*SQLite is a file"):
        executor.check_config(conf, "count")


def test_local_cluster_says_where_it_runs_and_accepts_a_file_store(tmp_path) -> None:
    """LocalCluster is one host: SQLite is accepted, and the master it passes is 'local'."""
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": str(tmp_path / "state.db")},
    }
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", conf, word_count(10))
        assert cluster.topology_info("wc")["conf"][MASTER] == "local"
