"""The supervisor's decisions (``tupletree.distributed.supervision``) with plain values:
backoff, crash loops, hung workers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.distributed.supervision import (
    Kill,
    RestartPolicy,
    Supervisor,
    WorkerRestarts,
    hung_for,
)

POLICY = RestartPolicy(base_delay=0.5, max_delay=30.0, stable_secs=60.0, crash_loop_after=3)


def test_restarts_forever_with_backoff_and_a_crash_loop_from_the_third_quick_death() -> None:
    w = WorkerRestarts(0, POLICY)
    decisions = [w.died(attempt, lived=1.0, reason=f"boom {attempt}") for attempt in range(12)]
    assert all(d is not None for d in decisions)
    assert [d.restarts for d in decisions] == list(range(1, 13))  # never gives up
    assert [d.delay for d in decisions[:7]] == [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    assert [d.delay for d in decisions[7:]] == [30.0] * 5
    assert [d.crash_loop for d in decisions[:4]] == [False, False, True, True]
    assert decisions[-1].reason == "boom 11" and w.last_error == "boom 11"


def test_a_stable_run_resets_the_backoff_and_ends_the_crash_loop() -> None:
    w = WorkerRestarts(0, POLICY)
    for attempt in range(5):
        w.died(attempt, lived=0.1, reason="quick")
    calm = w.died(5, lived=3600.0, reason="after an hour")
    assert calm is not None and calm.delay == 0.0 and not calm.crash_loop
    assert calm.restarts == 6  # the count of restarts itself is never reset
    again = w.died(6, lived=0.1, reason="quick")
    assert again is not None and again.delay == 0.0 and not again.crash_loop


def test_one_death_learned_twice_counts_once() -> None:
    w = WorkerRestarts(0, POLICY)
    assert w.died(3, lived=5.0, reason="its successor started") is not None
    assert w.died(3, lived=5.0, reason="its job ended") is None
    assert w.died(2, lived=5.0, reason="a straggler") is None
    assert w.restarts == 1


@given(st.lists(st.floats(min_value=0, max_value=1e4), max_size=60))
def test_backoff_is_bounded_and_grows_only_with_quick_deaths(lives: list[float]) -> None:
    w = WorkerRestarts(0, POLICY)
    previous = None
    for attempt, lived in enumerate(lives):
        d = w.died(attempt, lived, "x")
        assert d is not None
        assert 0.0 <= d.delay <= POLICY.max_delay
        if lived >= POLICY.stable_secs:
            assert d.quick_deaths == 0 and d.delay == 0.0 and not d.crash_loop
        elif previous is not None:
            assert d.quick_deaths == previous.quick_deaths + 1
            assert d.delay >= previous.delay
        assert d.crash_loop == (d.quick_deaths >= POLICY.crash_loop_after)
        previous = d


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="base_delay"):
        RestartPolicy(base_delay=5, max_delay=1)
    with pytest.raises(ValueError, match="stable_secs"):
        RestartPolicy(stable_secs=0)
    with pytest.raises(ValueError, match="crash_loop_after"):
        RestartPolicy(crash_loop_after=0)


def test_hung_after_the_timeout_since_the_last_report() -> None:
    kw = {"timeout": 30.0, "start_timeout": 120.0}
    assert hung_for(129.0, started_at=100.0, last_beat=100.0, **kw) is None
    assert hung_for(131.0, started_at=100.0, last_beat=100.0, **kw) == pytest.approx(31.0)
    # A report resets the clock.
    assert hung_for(131.0, started_at=100.0, last_beat=110.0, **kw) is None


def test_a_starting_worker_gets_the_start_timeout() -> None:
    kw = {"timeout": 30.0, "start_timeout": 120.0}
    assert hung_for(200.0, started_at=100.0, last_beat=None, **kw) is None
    assert hung_for(221.0, started_at=100.0, last_beat=None, **kw) == pytest.approx(121.0)
    # A worker told to wait out a backoff starts later: the wait is not silence.
    assert hung_for(135.0, started_at=110.0, last_beat=90.0, **kw) is None


@given(
    st.floats(0, 1e6),
    st.floats(0, 1e3),
    st.one_of(st.none(), st.floats(0, 1e3)),
    st.floats(0.1, 100),
    st.floats(0.1, 300),
)
def test_hung_only_when_silent_longer_than_allowed(
    started: float, since: float, beat_ago: float | None, timeout: float, start: float
) -> None:
    now = started + since
    last = None if beat_ago is None else max(started, now - beat_ago)
    silent = hung_for(now, started, last, timeout=timeout, start_timeout=start)
    limit = start if last is None else timeout
    expected = now - (started if last is None else last)
    if expected > limit:
        assert silent == pytest.approx(expected)
    else:
        assert silent is None


def live_supervisor(workers: int = 2, timeout: float | None = 30.0) -> Supervisor:
    """A supervisor whose workers all started (attempt 0 at t=0) and registered."""
    sup = Supervisor(workers, POLICY, worker_timeout=timeout, start_timeout=120.0)
    for w in range(workers):
        assert sup.task_started(w, 0, now=0.0) == (0.0, None)
        sup.registered(w, 0, now=1.0)
    sup.live = True
    return sup


def test_a_retried_task_reveals_the_death_of_the_attempt_before_it() -> None:
    sup = live_supervisor()
    sup.failed(0, 0, "ValueError: boom")
    delay, restart = sup.task_started(0, 1, now=5.0)
    assert delay == 0.0 and restart is not None
    assert (restart.worker, restart.died_attempt, restart.lived) == (0, 0, 5.0)
    assert restart.reason == "it raised ValueError: boom"
    assert (restart.lived, restart.delay, restart.restarts) == (5.0, 0.0, 1)
    assert restart.text() == (
        "worker 0 restarted (restart 1): attempt 0 ended after 5.0 s: it raised "
        "ValueError: boom; next attempt in 0.0 s"
    )
    # A second quick death: the task is told to wait the backoff, and that wait is
    # not silence.
    delay, restart = sup.task_started(0, 2, now=6.0)
    assert delay == 0.5 and restart is not None
    assert restart.reason.startswith("its process died without a word")
    assert sup.started[0] == (2, 6.5)
    assert sup.restarts() == {0: 2, 1: 0}


def test_deaths_before_the_topology_is_live_are_the_starts_business() -> None:
    sup = Supervisor(1, POLICY)
    sup.task_started(0, 0, now=0.0)
    assert sup.task_started(0, 1, now=1.0) == (0.0, None)
    assert sup.restarts() == {0: 0}


def test_an_ended_job_counts_its_last_attempt_once_and_the_next_job_goes_on_from_it() -> None:
    sup = live_supervisor(1)
    sup.task_started(0, 1, now=10.0)
    sup.task_started(0, 2, now=20.0)
    sup.task_started(0, 3, now=30.0)
    restart = sup.job_ended(0, first_attempt=0, now=31.0, error="Job aborted: failed 4 times")
    assert restart is not None and restart.died_attempt == 3 and restart.restarts == 4
    assert restart.reason == "its Spark job failed: Job aborted: failed 4 times"
    assert sup.next_base(0) == 4
    # The next job's first task: its predecessor's death was counted, its wait too.
    assert sup.task_started(0, 4, now=40.0) == (0.0, None)


def test_a_job_that_ends_cleanly_is_a_restart_too() -> None:
    sup = live_supervisor(1)
    sup.exiting(0, 0)
    restart = sup.job_ended(0, first_attempt=0, now=100.0, error=None)
    assert restart is not None and restart.delay == 0.0
    assert restart.reason == "its worker code returned while the topology is running"
    sup2 = live_supervisor(1)
    restart = sup2.job_ended(0, first_attempt=0, now=100.0, error=None)
    assert restart is not None
    assert restart.reason == "its Spark task ended while the topology is running"


def test_a_job_whose_task_start_was_never_heard_still_counts_a_death() -> None:
    sup = live_supervisor(1)
    first = sup.job_ended(0, first_attempt=0, now=1.0, error="x")
    again = sup.job_ended(0, first_attempt=sup.next_base(0), now=2.0, error="x")
    assert first is not None and again is not None  # no hot loop without backoff
    assert again.died_attempt == 1 and again.delay == 0.5


def test_a_silent_worker_is_killed_once_then_hard_and_its_backoff_is_owed() -> None:
    sup = live_supervisor(2, timeout=2.0)
    sup.beat(0, 0, now=10.0)
    sup.beat(1, 0, now=10.0)
    assert sup.check_hung(11.9) == ([], [])
    sup.beat(1, 0, now=12.0)
    kills, restarts = sup.check_hung(12.5)
    assert kills == [Kill(0, 0, hard=False)]
    (restart,) = restarts
    assert restart.reason.startswith("it hung: no report from its loop for 2 s")
    assert "supervisor.worker.timeout.secs 2" in restart.reason
    assert sup.check_hung(13.0) == ([], [])  # being killed: not again at once
    sup.beat(1, 0, now=14.5)
    assert sup.check_hung(15.0) == ([Kill(0, 0, hard=True)], [])  # it did not take
    # Spark re-runs it: the death was counted already, the start gets no new restart.
    assert sup.task_started(0, 1, now=16.0) == (0.0, None)
    assert sup.restarts() == {0: 1, 1: 0}
    sup.beat(1, 0, now=16.5)
    assert sup.check_hung(17.0) == ([], [])  # the new attempt is starting


def test_no_hang_checks_without_a_timeout() -> None:
    sup = live_supervisor(1, timeout=None)
    assert sup.check_hung(1e9) == ([], [])


def test_the_backoff_owed_after_a_hang_is_what_the_next_start_waits() -> None:
    """A hang that is the second quick death in a row owes a backoff (0.5 s): the task
    that replaces the killed attempt is told to wait exactly that, once."""
    sup = live_supervisor(1, timeout=2.0)
    sup.failed(0, 0, "E: first")
    assert sup.task_started(0, 1, now=5.0)[1] is not None  # quick death 1: no backoff
    sup.beat(0, 1, now=6.0)
    kills, (restart,) = sup.check_hung(9.0)  # silent 3 s after 4 s of life: quick death 2
    assert kills == [Kill(0, 1, hard=False)] and restart.delay == 0.5
    assert sup.task_started(0, 2, now=10.0) == (0.5, None)
    assert sup.started[0] == (2, 10.5)  # the wait is not counted as silence
    assert 0 not in sup.owed


def test_no_worker_is_killed_as_hung_before_the_topology_is_live() -> None:
    """Before every worker registered once, a slow start is the start timeout's business
    (the launch fails with its report), not a hang to kill and restart."""
    sup = Supervisor(2, POLICY, worker_timeout=2.0, start_timeout=5.0)
    sup.task_started(0, 0, now=0.0)
    sup.registered(0, 0, now=1.0)
    assert sup.check_hung(1000.0) == ([], [])
    sup.live = True
    assert sup.check_hung(1000.0)[0] == [Kill(0, 0, hard=False)]


def test_a_replayed_task_start_does_not_hide_a_hang() -> None:
    """Issue "Hold under a hostile neighbour", item 8: the task start of the current
    attempt, replayed every 2 s, used to restart the attempt's clock, so a hung worker
    was never killed. A start is taken once per attempt."""
    sup = live_supervisor(1, timeout=5.0)
    sup.beat(0, 0, now=10.0)
    kills: list[Kill] = []
    now = 10.0
    while now < 40.0 and not kills:
        now += 2.0
        assert sup.task_started(0, 0, now) == (0.0, None)  # the replay changes nothing
        kills = sup.check_hung(now)[0]
    assert kills == [Kill(0, 0, hard=False)] and now == 16.0
