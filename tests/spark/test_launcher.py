"""WorkerLauncher on a real local Spark (local[2,4]): registration, broadcast, stop,
too few slots, a killed worker re-run by Spark, a failing job, a start timeout."""

from __future__ import annotations

import ast
import os
import signal
import time

import pytest
import workerfns

from tupletree.distributed.control import Activate, Deactivate, Stop
from tupletree.spark.errors import NotEnoughSlotsError, SparkJobFailed, WorkerStartTimeout
from tupletree.spark.launcher import WorkerLauncher, WorkerMessage, pid_alive, wait_pids_gone
from tupletree.spark.slots import slot_info


def reply(m: WorkerMessage) -> tuple[str, object] | None:
    """What an echo worker said in ``m`` (see workerfns.echo_worker), if anything."""
    if m.type != "LogLine":
        return None
    return ast.literal_eval(m.msg.line)


def peers_seen(m: WorkerMessage) -> tuple[dict, list | None] | None:
    said = reply(m)
    return said[1] if said and said[0] == "peers" else None


def echoed(m: WorkerMessage) -> str | None:
    said = reply(m)
    return said[1] if said and said[0] == "echo" else None


pytestmark = [pytest.mark.spark, pytest.mark.slow]


def collect(launcher: WorkerLauncher, want, timeout: float = 15.0) -> list[WorkerMessage]:
    """Read the inbox until ``want(messages)`` is true; fail with what came otherwise."""
    got: list[WorkerMessage] = []
    deadline = time.monotonic() + timeout
    while not want(got):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            pytest.fail(f"timed out; got {[(m.worker, m.attempt, m.msg) for m in got]}")
        m = launcher.recv(timeout=remaining)
        if m is not None:
            got.append(m)
    return got


def test_two_workers_register_get_broadcast_and_stop_cleanly(spark):
    launcher = WorkerLauncher(spark, workerfns.echo_worker, 2, name="echo", start_timeout=25)
    workers = launcher.start()
    try:
        assert sorted(workers) == [0, 1]
        pids = [w.pid for w in workers.values()]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        assert all(pid_alive(p) for p in pids)
        assert all(
            w.attempt == 0 and w.address.startswith("tcp://127.0.0.1:") for w in workers.values()
        )
        assert workers[0].info == {"role": "echo"}
        assert workers[0].task_attempt_id is not None

        # Every worker ends up with the full peer table.
        full = {i: w.address for i, w in workers.items()}
        collect(
            launcher,
            lambda ms: {m.worker for m in ms if (peers_seen(m) or ({},))[0] == full} == {0, 1},
        )

        launcher.broadcast(Activate())
        echoes = collect(launcher, lambda ms: {m.worker for m in ms if echoed(m)} == {0, 1})
        assert all(echoed(m) == "Activate" for m in echoes if echoed(m))

        assert launcher.send(1, Deactivate())
        got = collect(launcher, lambda ms: any(echoed(m) for m in ms))
        assert [(m.worker, echoed(m)) for m in got if echoed(m)] == [(1, "Deactivate")]

        # Heartbeats come on their own, twice a second.
        collect(launcher, lambda ms: {m.worker for m in ms if m.type == "Heartbeat"} == {0, 1})
    finally:
        t0 = time.monotonic()
        leftovers = launcher.stop(timeout=10)
        stop_secs = time.monotonic() - t0
    assert leftovers == []
    assert wait_pids_gone(pids, 1.0) == []
    assert not launcher.running and launcher.job_error is None
    assert stop_secs < 30, stop_secs  # bounded by its timeout, with room for a busy machine


def test_more_workers_than_slots_fails_fast_with_both_numbers(spark):
    launcher = WorkerLauncher(
        spark, workerfns.echo_worker, 3, name="topology 'wide'", slot_wait=100
    )
    t0 = time.monotonic()
    with pytest.raises(NotEnoughSlotsError) as info:
        launcher.start()
    # At once, not after the 100 s slot wait: room for a busy machine.
    assert time.monotonic() - t0 < 30
    msg = str(info.value)
    assert "needs 3 worker slots" in msg and "only 2" in msg and "local[2,4]" in msg, msg
    assert (info.value.needed, info.value.available) == (3, 2)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds()


def test_slots_held_by_another_launcher_count_as_busy(spark):
    first = WorkerLauncher(spark, workerfns.echo_worker, 1, name="first")
    first.start()
    try:
        second = WorkerLauncher(spark, workerfns.echo_worker, 2, name="second")
        with pytest.raises(NotEnoughSlotsError) as info:
            second.start()
        assert "needs 2 worker slots but Spark has only 1 free" in str(info.value)
    finally:
        assert first.stop() == []


def test_killed_worker_is_rerun_by_spark_and_peers_are_told(spark):
    launcher = WorkerLauncher(spark, workerfns.echo_worker, 2, name="kill", start_timeout=25)
    workers = launcher.start()
    try:
        victim = workers[0]
        # Let the initial peer broadcast arrive before the kill.
        collect(launcher, lambda ms: {m.worker for m in ms if peers_seen(m)} == {0, 1})

        t0 = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        again = launcher.wait_for_registration(0, min_attempt=1, timeout=20)
        rerun_secs = time.monotonic() - t0
        print(f"SIGKILL -> re-registered in {rerun_secs:.2f} s")

        assert again.attempt == victim.attempt + 1
        assert again.pid != victim.pid and again.address != victim.address
        assert not pid_alive(victim.pid)
        assert launcher.workers[1].pid == workers[1].pid  # worker 1 was left alone

        def peer_told(ms):
            return any(
                m.worker == 1
                and peers_seen(m) is not None
                and peers_seen(m)[1] == [0]
                and peers_seen(m)[0][0] == again.address
                for m in ms
            )

        got = collect(launcher, peer_told)
        events = [m for m in got if m.type == "WorkerRegistered" and m.worker == 0]
        assert events and events[-1].msg.restarted and events[-1].attempt == 1
        assert events[-1].msg.previous_attempt == 0

        # The new attempt is fully usable.
        assert launcher.send(0, Activate())
        collect(launcher, lambda ms: any(echoed(m) and (m.worker, m.attempt) == (0, 1) for m in ms))
        pids = [again.pid, launcher.workers[1].pid]
    finally:
        leftovers = launcher.stop(timeout=10)
    assert leftovers == []
    assert wait_pids_gone(pids, 1.0) == []


def test_restart_worker_through_spark_kill_task(spark):
    launcher = WorkerLauncher(spark, workerfns.echo_worker, 1, name="restart", start_timeout=25)
    workers = launcher.start()
    try:
        t0 = time.monotonic()
        assert launcher.restart_worker(0, "test restart")
        again = launcher.wait_for_registration(0, min_attempt=1, timeout=20)
        print(f"killTaskAttempt -> re-registered in {time.monotonic() - t0:.2f} s")
        assert again.pid != workers[0].pid
    finally:
        assert launcher.stop(timeout=10) == []


def test_job_failure_is_raised_with_the_workers_error(spark):
    launcher = WorkerLauncher(spark, workerfns.failing_worker, 1, name="failing", start_timeout=25)
    t0 = time.monotonic()
    with pytest.raises(SparkJobFailed) as info:
        launcher.start()
    print(f"failing job detected in {time.monotonic() - t0:.2f} s")
    assert "boom from worker 0" in str(info.value)
    assert "RuntimeError" in info.value.worker_errors[0]
    assert not spark.sparkContext.statusTracker().getActiveJobsIds()


def test_start_timeout_names_missing_workers_and_cleans_up(spark):
    launcher = WorkerLauncher(spark, workerfns.silent_worker, 2, name="silent", start_timeout=3)
    t0 = time.monotonic()
    with pytest.raises(WorkerStartTimeout) as info:
        launcher.start()
    assert time.monotonic() - t0 < 60  # the 3 s start timeout, not the default 120 s
    assert info.value.missing == [0, 1]
    assert "workers [0, 1] did not register within 3" in str(info.value)
    deadline = time.monotonic() + 10
    while spark.sparkContext.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not spark.sparkContext.statusTracker().getActiveJobsIds()


def test_worker_whose_task_ends_cleanly_is_started_again_and_reported(spark):
    """A worker whose code returns while the launcher runs (its Spark task, and so its
    job, ends "cleanly") is given a new job: it registers again and the restart is an
    event with the reason. Spark alone does not re-run a task that finished."""
    # The tasks an earlier test cancelled may hold their slots for a few seconds more.
    deadline = time.monotonic() + 30
    while slot_info(spark.sparkContext).free < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    launcher = WorkerLauncher(spark, workerfns.echo_worker, 1, name="clean", start_timeout=25)
    workers = launcher.start()
    try:
        assert launcher.send(0, Stop("not from the launcher's stop"))
        again = launcher.wait_for_registration(0, min_attempt=1, timeout=30)
        assert again.pid != workers[0].pid
        got = collect(launcher, lambda ms: any(m.type == "WorkerRestarting" for m in ms))
        event = next(m for m in got if m.type == "WorkerRestarting")
        assert event.worker == 0 and event.attempt == 0
        assert event.msg.restarts == 1 and event.msg.delay == 0.0
        assert "returned while the topology is running" in event.msg.reason
        assert any(e.startswith("worker 0 restarted (restart 1)") for e in launcher.errors())
        assert launcher.restarts == {0: 1}
        assert launcher.running
    finally:
        assert launcher.stop(timeout=10) == []
    assert not launcher.running
