"""The supervisor's decisions (``tupletree.spark.supervision``) with plain values:
backoff, crash loops, hung workers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.spark.supervision import RestartPolicy, WorkerRestarts, hung_for

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
