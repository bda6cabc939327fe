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


class _Context:
    """What ``reserve`` reads of a SparkContext on a standalone master with 2 slots and
    nothing running; ``stop_after`` looks at ``isStopped``, Spark stops it (as it does
    when the master never takes the application)."""

    master = "spark://127.0.0.1:7077"
    defaultParallelism = 2

    def __init__(self, stop_after: int) -> None:
        self.looks = 0
        self.stop_after = stop_after
        self._jsc = self

    def sc(self) -> _Context:
        return self

    def isStopped(self) -> bool:  # (the JVM's names)
        self.looks += 1
        return self.looks > self.stop_after

    def getConf(self) -> dict[str, str]:
        return {}

    def statusTracker(self) -> _Context:
        return self

    def getActiveStageIds(self) -> list[int]:
        return []


def test_a_wait_for_slots_is_said_and_ends_when_spark_stops_the_context(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too few slots on a cluster: one warning that it waits, for how long and how many
    it has; once Spark stopped the context, a SparkUnavailableError naming the master
    at once, not the slot wait's end."""
    from tupletree.spark import reservations

    clock = iter(range(10**6))  # a second a look: a wait that never ends fails the test
    monkeypatch.setattr(reservations.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(reservations.time, "sleep", lambda secs: None)
    sc = _Context(stop_after=3)
    with (
        caplog.at_level("WARNING", logger="tupletree"),
        pytest.raises(SparkUnavailableError) as stopped,
    ):
        reservations.reserve(sc, "group", "wc", 3, slot_wait=3600)
    assert sc.looks == 4
    assert "stopped its context while wc waited for 3 task slots" in str(stopped.value)
    assert "(master spark://127.0.0.1:7077)" in str(stopped.value)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("wc: waiting up to 3600 s for 3 task slots, 2 free now")


@pytest.mark.parametrize("master", ["spark://127.0.0.1", "spark://127.0.0.1:99999", "spark://h:1,"])
def test_a_standalone_master_that_cannot_be_read_is_named(master):
    """A spark:// master without a port, with one out of range, or with an empty standby
    address: one error naming it, before any connection is tried."""
    from tupletree.spark.session import check_standalone_master

    with pytest.raises(SparkUnavailableError, match="cannot read host:port in the Spark master"):
        check_standalone_master(master, timeout=1)
