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


class _LocalContext:
    """What ``reserve`` and ``resize`` read of a SparkContext on local[2] (two slots):
    ``busy`` is the tasks running at each look, the last one repeated."""

    master = "local[2]"

    def __init__(self, busy: list[int]) -> None:
        self.busy = busy

    def getConf(self) -> dict[str, str]:
        return {}


@pytest.fixture
def slots_read(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each look at the slots is a second of a simulated clock; returns when each came."""
    from tupletree.spark import reservations

    now = [0.0]
    looks: list[float] = []

    def busy(sc: _LocalContext) -> int:
        looks.append(now[0])
        return sc.busy[min(len(looks) - 1, len(sc.busy) - 1)]

    monkeypatch.setattr(reservations, "busy_task_slots", busy)
    monkeypatch.setattr(reservations, "total_task_slots", lambda sc: (2, "test"))
    monkeypatch.setattr("tupletree.spark.slots.busy_task_slots", busy)
    monkeypatch.setattr("tupletree.spark.slots.total_task_slots", lambda sc: (2, "test"))
    monkeypatch.setattr(reservations.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(reservations.time, "sleep", lambda secs: now.__setitem__(0, now[0] + 1))
    return looks


@pytest.mark.parametrize("call", ["resize", "reserve"])
def test_a_slot_held_by_a_killed_topologys_ending_task_is_waited_for(
    slots_read: list[float], call: str
) -> None:
    """A rebalance (resize) or a submit (reserve) right after another topology's kill:
    the killed topology's task still runs for a few seconds, held by no reservation.
    Both wait for it to end and then take the slot, where they used to refuse at once
    (NotEnoughSlotsError, "1 busy with other jobs": CI, stop 41)."""
    from tupletree.spark import reservations

    if call == "resize":
        sc = _LocalContext(busy=[2, 2, 2, 1])  # ours (1 slot held) and the ending one
        reservations._reservations.setdefault(id(sc), {})["ours"] = 1  # ours, running
        reservations.resize(sc, "ours", "wc", 2)
    else:
        sc = _LocalContext(busy=[1, 1, 1, 0])  # the ending one only
        reservations.reserve(sc, "ours", "wc", 2, slot_wait=0)
    try:
        assert len(slots_read) >= 4 and slots_read[-1] >= 3.0
    finally:
        reservations.release(sc, "ours")


@pytest.mark.parametrize("call", ["resize", "reserve"])
def test_slots_that_stay_busy_or_are_held_are_refused_with_both_numbers(
    slots_read: list[float], call: str
) -> None:
    """An unheld task that does not end is waited for WINDING_DOWN_SECS, no longer;
    a slot another topology of this process holds is refused at once (its owner runs
    on)."""
    from tupletree.spark import reservations
    from tupletree.spark.errors import NotEnoughSlotsError

    sc = _LocalContext(busy=[2] if call == "resize" else [1])
    if call == "resize":
        reservations._reservations.setdefault(id(sc), {})["ours"] = 1  # ours, running
    try:
        with pytest.raises(
            NotEnoughSlotsError, match="wc needs 2 worker slots but Spark has only 1 free"
        ):
            if call == "resize":
                reservations.resize(sc, "ours", "wc", 2)
            else:
                reservations.reserve(sc, "ours", "wc", 2, slot_wait=0)
        assert slots_read[-1] == pytest.approx(reservations.WINDING_DOWN_SECS, abs=1)
        slots_read.clear()
        sc.busy = [2] if call == "resize" else [1]
        reservations._reservations[id(sc)]["theirs"] = 1  # another topology's: final
        with pytest.raises(NotEnoughSlotsError):
            if call == "resize":
                reservations.resize(sc, "ours", "wc", 2)
            else:
                reservations.reserve(sc, "ours", "wc", 2, slot_wait=0)
        assert len(slots_read) <= 2
    finally:
        reservations.release(sc, "ours")
        reservations.release(sc, "theirs")


class _RacingSpark:
    """A SparkContext whose first job reaches Spark only as the first cancel is made: a
    job thread that had passed its check of ``stopping`` when ``stop`` began. A job
    runs until a cancel made after its submission."""

    def __init__(self) -> None:
        import threading

        self.cancels = 0
        self.submitted: list[int] = []
        self.cond = threading.Condition()
        self.in_parallelize = threading.Event()

    def setJobGroup(self, *args: object, **kwargs: object) -> None:
        pass

    def parallelize(self, data: object, slices: int) -> _RacingSpark:
        self.in_parallelize.set()
        with self.cond:  # held back until the first cancel
            self.cond.wait_for(lambda: self.cancels > 0, timeout=10)
        return self

    def mapPartitions(self, fn: object) -> _RacingSpark:
        return self

    def collect(self) -> list[object]:
        with self.cond:
            seen = self.cancels
            self.submitted.append(seen)
            if not self.cond.wait_for(lambda: self.cancels > seen, timeout=10):
                return []  # never cancelled: ran to its end
        raise RuntimeError("job cancelled")

    def cancelJobGroup(self, group: str) -> None:
        with self.cond:
            self.cancels += 1
            self.cond.notify_all()


def test_a_job_submitted_just_after_the_cancel_is_cancelled_too() -> None:
    """Stopping a topology cancels its job group until every job's thread has ended:
    a job that reached Spark just after one cancel (its thread was past its check)
    used to run on, holding its slot, and the next submit or rebalance was refused
    for it (CI, stop 41)."""
    import time

    from tupletree.spark.job import SparkJobs

    sc = _RacingSpark()
    jobs = SparkJobs(sc, "g", "wc", 1, lambda index: lambda it: it, lambda i, e: 0.0)
    jobs.start()
    assert sc.in_parallelize.wait(5)
    jobs.stopping()
    t0 = time.monotonic()
    assert jobs.cancel_until_ended(8.0)
    assert time.monotonic() - t0 < 5  # not the job's own end (10 s)
    assert sc.submitted == [1] and sc.cancels >= 2
