"""The parts of the Spark layer that need neither Java nor a SparkSession."""

from __future__ import annotations

import os
import stat

import pytest

from tupletree.spark.errors import SparkUnavailableError
from tupletree.spark.session import (
    check_java,
    local_master,
    local_session_conf,
    parse_java_major,
)
from tupletree.spark.slots import SlotInfo, describe_shortage, is_local_master, slots_from_master


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_351"', 8),
        ('openjdk version "11.0.2-ea"', 11),
    ],
)
def test_parse_java_major(output, major):
    assert parse_java_major(output)[0] == major


def _fake_java(tmp_path, version: str) -> str:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\"' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return str(home)


def test_check_java_rejects_old_java_and_says_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, "1.8.0_351"))
    with pytest.raises(SparkUnavailableError, match=r"needs Java 17 or newer.*Java 1\.8\.0_351"):
        check_java()


def test_check_java_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SparkUnavailableError, match="has no bin/java"):
        check_java()
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailableError, match="no `java` on PATH"):
        check_java()


def test_check_java_accepts_17(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path, "17.0.1"))
    assert check_java().major == 17


def test_local_master_and_conf():
    assert local_master(3) == "local[3,4]"
    assert local_master(2, max_failures=10) == "local[2,10]"
    assert local_master() == f"local[{os.cpu_count()},4]"
    with pytest.raises(ValueError):
        local_master(0)
    conf = local_session_conf(2)
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.python.worker.reuse"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "2"


def test_given_session_is_returned_untouched():
    """A session the user passes to SparkCluster is the one it uses, and is not stopped
    with the cluster (get_or_create_session only runs when none was given)."""
    from tupletree.spark.cluster import SparkCluster

    class Session:
        stopped = False

        def stop(self) -> None:
            self.stopped = True

    sentinel = Session()
    with SparkCluster(spark=sentinel) as cluster:
        assert cluster.spark is sentinel
    assert not sentinel.stopped


@pytest.mark.parametrize(
    ("master", "slots"),
    [
        ("local", 1),
        ("local[2]", 2),
        ("local[2,4]", 2),
        ("local[*]", os.cpu_count()),
        ("local[*, 3]", os.cpu_count()),
        ("local-cluster[2,3,1024]", 6),
        ("spark://host:7077", None),
        ("yarn", None),
    ],
)
def test_slots_from_master(master, slots):
    assert slots_from_master(master) == slots
    assert is_local_master(master) == (slots is not None)


def test_shortage_message_has_both_numbers():
    msg = describe_shortage("topology", 3, SlotInfo(total=2, busy=0, master="local[2]", source=""))
    assert msg.startswith("topology needs 3 worker slots but Spark has only 2 (local[2]")
    busy = describe_shortage(
        "topology", 2, SlotInfo(total=2, busy=1, master="local[2,4]", source="")
    )
    assert "needs 2 worker slots but Spark has only 1 free (2 in all, 1 busy" in busy


def test_worker_gc_tunes_the_young_generation_and_restores_it():
    """Inside a worker's loop the young generation is collected less often and start-up
    objects are frozen; afterwards (Spark may reuse the process) all is as before, even
    when the loop raised."""
    import gc

    from tupletree.distributed.worker_main import GC_YOUNG_THRESHOLD, worker_gc

    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), worker_gc():
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()
        raise RuntimeError("the loop failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
