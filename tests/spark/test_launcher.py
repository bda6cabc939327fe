"""WorkerLauncher on a real local Spark (local[2,4]): registration, commands, stop,
too few slots, a killed worker re-run by Spark, a failing job, a start timeout, a worker
whose task ends. What the workers say is read from the launcher's state, through its one
wait helper."""

from __future__ import annotations

import ast
import os
import re
import signal
import time
from typing import Any

import pytest
import workerfns

from tupletree.distributed.processes import pid_alive, wait_pids_gone
from tupletree.spark.errors import NotEnoughSlotsError, SparkJobFailed, WorkerStartTimeout
from tupletree.spark.launcher import WorkerLauncher
from tupletree.spark.slots import slot_info

pytestmark = [pytest.mark.spark, pytest.mark.slow]

Reply = tuple[int, str, Any, int]  # worker, kind ("peers" | "echo"), payload, attempt


def replies(lines: list[str]) -> list[Reply]:
    """What echo workers said (see workerfns.echo_worker), from the driver's log lines."""
    out = []
    for line in lines:
        m = re.fullmatch(r"worker (\d+) INFO: (.*)", line, re.DOTALL)
        if m:
            kind, payload, attempt = ast.literal_eval(m.group(2))
            out.append((int(m.group(1)), kind, payload, attempt))
    return out


def heard(launcher: WorkerLauncher, want: Any, timeout: float = 15.0) -> list[Reply]:
    """Wait until ``want(replies)`` holds; fail with what came otherwise."""

    def check(state: Any) -> list[Reply] | None:
        said = replies(list(state.logs))
        return said if want(said) else None

    got = launcher.wait(check, timeout)
    if got is None:
        pytest.fail(f"timed out; the workers said {replies(launcher.read(lambda s: s.logs))}")
    return got


def registered(launcher: WorkerLauncher, worker: int, min_attempt: int, timeout: float) -> Any:
    def check(state: Any) -> Any:
        info = state.workers.get(worker)
        return info if info is not None and info.attempt >= min_attempt else None

    info = launcher.wait(check, timeout)
    assert info is not None, f"worker {worker} did not register attempt >= {min_attempt}"
    return info


def test_two_workers_register_get_commands_and_stop_cleanly(spark):
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
        assert workers[0].task_attempt_id is not None

        # Every worker ends up with the full peer table.
        full = {i: w.address for i, w in workers.items()}
        heard(
            launcher, lambda rs: {w for w, k, p, _ in rs if k == "peers" and p[0] == full} == {0, 1}
        )

        launcher.set_active(True)
        echoes = heard(launcher, lambda rs: {w for w, k, _, _ in rs if k == "echo"} == {0, 1})
        assert {p for _, k, p, _ in echoes if k == "echo"} == {"Activate"}
        assert launcher.read(lambda s: s.active)

        launcher.set_active(False)
        got = heard(launcher, lambda rs: {w for w, _, p, _ in rs if p == "Deactivate"} == {0, 1})
        assert sorted(w for w, _, p, _ in got if p == "Deactivate") == [0, 1]
    finally:
        t0 = time.monotonic()
        leftovers = launcher.stop(timeout=10)
        stop_secs = time.monotonic() - t0
    assert leftovers == []
    assert wait_pids_gone(pids, 1.0) == []
    assert not launcher.running and launcher.read(lambda s: s.gave_up) is None
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
        # Let the initial peer tables arrive before the kill.
        heard(launcher, lambda rs: {w for w, k, _, _ in rs if k == "peers"} == {0, 1})

        t0 = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        again = registered(launcher, 0, min_attempt=1, timeout=20)
        print(f"SIGKILL -> re-registered in {time.monotonic() - t0:.2f} s")

        assert again.attempt == victim.attempt + 1
        assert again.pid != victim.pid and again.address != victim.address
        assert not pid_alive(victim.pid)
        assert launcher.workers[1].pid == workers[1].pid  # worker 1 was left alone
        heard(
            launcher,
            lambda rs: any(
                w == 1 and k == "peers" and p[1] == [0] and p[0][0] == again.address
                for w, k, p, _ in rs
            ),
        )
        (line,) = [e for e in launcher.errors() if e.startswith("worker 0 restarted")]
        assert "attempt 0 ended" in line and "died without a word" in line

        # The new attempt is fully usable.
        launcher.set_active(True)
        heard(launcher, lambda rs: any((w, k, a) == (0, "echo", 1) for w, k, _, a in rs))
        pids = [again.pid, launcher.workers[1].pid]
    finally:
        leftovers = launcher.stop(timeout=10)
    assert leftovers == []
    assert wait_pids_gone(pids, 1.0) == []


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
    job, ends "cleanly") is given a new job: it registers again and the restart is
    reported with the reason. Spark alone does not re-run a task that finished."""
    # The tasks an earlier test cancelled may hold their slots for a few seconds more.
    deadline = time.monotonic() + 30
    while slot_info(spark.sparkContext).free < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    launcher = WorkerLauncher(spark, workerfns.returning_worker, 1, name="clean", start_timeout=25)
    workers = launcher.start()
    try:
        launcher.set_active(True)  # attempt 0 returns on it
        again = registered(launcher, 0, min_attempt=1, timeout=30)
        assert again.pid != workers[0].pid
        (line,) = [e for e in launcher.errors() if e.startswith("worker 0 restarted")]
        assert line.startswith("worker 0 restarted (restart 1): attempt 0 ended after")
        assert "returned while the topology is running; next attempt in 0.0 s" in line
        assert launcher.read(lambda s: s.restarts()) == {0: 1}
        assert launcher.running
    finally:
        assert launcher.stop(timeout=10) == []
    assert not launcher.running
