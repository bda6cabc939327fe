"""Which store a cluster may use: one a single host sees (memory, SQLite) is refused on a
master that may run workers on several hosts, with the reason (store/hosts.py)."""

from __future__ import annotations

import pytest

from tupletree.store import is_one_host, require_shared
from tupletree.store.hosts import SHARED_ACROSS_HOSTS

ONE_HOST = [
    "local",
    "local[1]",
    "local[4]",
    "local[*]",
    "local[2,4]",
    "local[*,3]",
    "local[2, 4]",
    "local-cluster[2,1,1024]",
    "local-cluster[ 3, 2, 512 ]",
]
SEVERAL_HOSTS = [
    "spark://10.0.0.5:7077",
    "spark://127.0.0.1:7077",  # a standalone master may have workers anywhere
    "spark://a:7077,b:7077",
    "yarn",
    "k8s://https://10.0.0.1:6443",
    "mesos://zk://z:2181/mesos",
    "local[0]",  # not a master Spark starts: nothing vouches for one host
    "local[x]",
    "local-cluster[2,1]",
    "locals",
    "",
]


@pytest.mark.parametrize("master", ONE_HOST)
def test_local_masters_are_one_host_and_take_every_store(master: str) -> None:
    assert is_one_host(master)
    for kind in SHARED_ACROSS_HOSTS:
        require_shared(kind, master)


@pytest.mark.parametrize("master", SEVERAL_HOSTS)
def test_other_masters_refuse_one_host_stores_saying_why(master: str) -> None:
    assert not is_one_host(master)
    with pytest.raises(ValueError) as err:
        require_shared("sqlite", master, what="topology.state.provider")
    assert str(err.value) == (
        f"topology.state.provider: SQLite is a file on one host; the master {master!r} "
        "runs workers on several: use redis or postgresql"
    )
    with pytest.raises(ValueError, match=r"memory store lives in one process.*use redis"):
        require_shared("memory", master)
    require_shared("redis", master)
    require_shared("postgresql", master)


def test_an_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match=r"topology.trident.progress.store: unknown store 'zk'"):
        require_shared("zk", "local", what="topology.trident.progress.store")


def test_the_table_agrees_with_each_backends_class() -> None:
    """SHARED_ACROSS_HOSTS answers without opening a store: it must say what the class
    says."""
    from tupletree.store import BACKENDS
    from tupletree.store.memory import MemoryStore
    from tupletree.store.redis import RedisStore
    from tupletree.store.sqlite import SQLiteStore

    classes = {"memory": MemoryStore, "sqlite": SQLiteStore, "redis": RedisStore}
    try:
        from tupletree.store.postgres import PostgresStore

        classes["postgresql"] = PostgresStore
    except ImportError:
        pass
    assert set(SHARED_ACROSS_HOSTS) == set(BACKENDS)
    for kind, cls in classes.items():
        assert SHARED_ACROSS_HOSTS[kind] is cls.shared_across_hosts, kind
