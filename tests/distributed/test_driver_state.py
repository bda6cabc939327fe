"""The driver's one state (``tupletree.distributed.driver_state``) with plain values:
every worker message in, the messages to send and the events out; no sockets, no Spark."""

from __future__ import annotations

import logging
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.distributed.control import (
    Ack,
    Activate,
    Deactivate,
    Envelope,
    ErrorReport,
    Exiting,
    Heartbeat,
    LogLine,
    Metrics,
    Ready,
    Register,
    Stop,
    TaskStarted,
    Welcome,
)
from tupletree.distributed.driver_state import ONE_SHOT, DriverState, KillTask, Log
from tupletree.distributed.registration import Send
from tupletree.distributed.supervision import RestartPolicy
from tupletree.records.errors import ERROR, RESTART, TaskError, WorkerEvent
from tupletree.runtime.error_log import MAX_ERROR_CHARS, MAX_ERRORS_KEPT
from tupletree.runtime.metrics import COUNTERS, merge_snapshots

POLICY = RestartPolicy(base_delay=0.5, max_delay=30.0, stable_secs=60.0, crash_loop_after=3)


def reg(address: str, pid: int = 100) -> Register:
    return Register(pid=pid, host="h", address=address)


def task_error(message: str) -> TaskError:
    """A task's error as a worker reports it (no worker or attempt yet: the driver's)."""
    return TaskError("split", 3, "execute", "ValueError", message, "tb\n", 1000.0)


def metrics(errors: list[str] = (), snapshot: Any = None, idle: bool = True) -> Metrics:
    return Metrics(snapshot or {}, [task_error(e) for e in errors], idle, {}, {})


def sends(outcomes: list[Any]) -> list[Send]:
    return [o for o in outcomes if isinstance(o, Send)]


def live(workers: int = 2, timeout: float | None = None, active: bool = True) -> DriverState:
    """A state whose workers all started (attempt 0 at t=0) and registered at t=1, each
    on route b"r<i>"."""
    s = DriverState("t", workers, policy=POLICY, worker_timeout=timeout, active=active)
    for w in range(workers):
        s.on(b"tmp", Envelope(w, 0, TaskStarted(100 + w, "h", 40 + w), want_ack=True), 0.0)
        s.on(f"r{w}".encode(), Envelope(w, 0, reg(f"tcp://w{w}", 100 + w)), 1.0)
    assert s.registry.all_registered
    return s


def test_every_message_lands_in_one_place():
    """Registration answers, readiness, one error list (a worker's own errors, its tasks'
    errors from a metrics report, an unasked end of its job), log lines, and the Ack
    first when one is wanted."""
    s = DriverState("t", 1, active=True, epoch_offset=1000.0)
    out = s.on(b"r0", Envelope(0, 0, reg("tcp://w0")), now=1.0)
    assert sends(out) == [Send(b"r0", Welcome(1, {0: "tcp://w0"}, 0))]
    assert s.on(b"r0", Envelope(0, 0, Ready()), 1.1) == [Send(b"r0", Activate())]
    assert s.ready == {0}
    assert s.on(b"r0", Envelope(0, 0, metrics(["boom"])), 1.2) == []
    assert s.on(b"r0", Envelope(0, 0, LogLine("WARNING", "careful")), 1.3) == [
        Log(logging.WARNING, "worker 0: careful")
    ]
    assert s.on(b"r0", Envelope(0, 0, Heartbeat()), 5.0) == []
    fatal = Envelope(0, 0, ErrorReport("E: x", "tb", True), want_ack=True)
    assert s.on(b"tmp", fatal, 6.0) == [Send(b"tmp", Ack(0.0))]
    s.stop_all("bye")
    assert s.job_ended(0, 0, "Job aborted", 7.0, spark_gone=False) == (None, [])
    assert s.errors.texts() == [
        "worker 0: split[task 3] execute: ValueError: boom\ntb\n",
        "worker 0 (attempt 0): E: x\ntb",
    ]
    # The records: the task's error as its worker sent it, stamped with the envelope's
    # worker and attempt; the worker's own error with the driver's wall-clock time.
    assert s.errors.task_errors() == [task_error("boom").on_worker(0, 0)]
    assert s.errors.events() == [WorkerEvent(ERROR, "E: x", 1006.0, 0, 0, "tb")]
    assert list(s.logs) == ["worker 0 WARNING: careful"]
    assert s.fatal_errors() == {0: "E: x"}


def test_a_huge_log_line_is_kept_cut():
    """A worker's log line is cut as an error's text is: the driver keeps MAX_LOGS_KEPT
    of them and the web view serves them, so none may be megabytes."""
    s = live(1)
    (log,) = s.on(b"r0", Envelope(0, 0, LogLine("WARNING", "x" * 1_000_000)), 2.0)
    (kept,) = s.logs
    assert len(kept) < MAX_ERROR_CHARS + 100 and kept.endswith(" more characters]")
    assert len(log.text) < MAX_ERROR_CHARS + 100


def test_what_a_replaced_attempt_or_a_wrong_route_says_is_dropped():
    s = DriverState("t", 1)
    s.on(b"r1", Envelope(0, 1, reg("tcp://w0")), 1.0)
    s.on(b"r1-old", Envelope(0, 0, metrics(["old"])), 1.1)  # replaced attempt
    s.on(b"elsewhere", Envelope(0, 1, metrics(["forged route"])), 1.2)
    s.on(b"r0", Envelope(0, 0, Exiting()), 1.3)  # one-shot, but a replaced attempt
    assert s.errors.records() == [] and s.reports == {} and s.registry.exited == set()
    # A replaced attempt that wants an Ack still gets one (its task must not hang on it).
    assert s.on(b"x", Envelope(0, 0, Exiting(), want_ack=True), 1.4) == [Send(b"x", Ack())]


def test_the_ack_to_a_task_start_carries_its_backoff():
    """Issue "A codebase the next engineer can carry": the supervisor's answer is made
    where the Ack is made (a second quick death waits base_delay)."""
    s = live(1)
    first = s.on(b"t1", Envelope(0, 1, TaskStarted(201, "h", 51), want_ack=True), 5.0)
    assert first[0] == Send(b"t1", Ack(0.0))
    assert any("worker 0 restarted (restart 1)" in o.text for o in first if isinstance(o, Log))
    second = s.on(b"t2", Envelope(0, 2, TaskStarted(202, "h", 52), want_ack=True), 6.0)
    assert second[0] == Send(b"t2", Ack(0.5))
    assert s.restarts() == {0: 2}


def test_a_flood_of_task_errors_cannot_push_a_restart_out():
    """A bolt that raises on every tuple sends thousands of errors in its worker's
    reports; the restart before them stays, as a record with its worker, the attempt
    that ended and its time, and as its line in the texts."""
    s = live(1)
    s.on(b"t1", Envelope(0, 1, TaskStarted(201, "h", 51), want_ack=True), 5.0)
    s.on(b"r1", Envelope(0, 1, reg("tcp://w0b", 201)), 6.0)
    for i in range(30):
        s.on(b"r1", Envelope(0, 1, metrics([f"e{i}.{j}" for j in range(100)])), 7.0 + i)
    (restart,) = s.errors.events()
    assert (restart.kind, restart.worker, restart.attempt, restart.time) == (RESTART, 0, 0, 5.0)
    assert len(s.errors.task_errors()) == MAX_ERRORS_KEPT < 3000
    assert s.errors.task_errors()[-1] == task_error("e29.99").on_worker(0, 1)
    assert s.errors.texts()[0].startswith("worker 0 restarted (restart 1): attempt 0 ended")


def test_a_replayed_task_start_is_refused_and_the_hung_worker_still_killed():
    """Issue "Hold under a hostile neighbour", item 8: a sniffed, signed TaskStarted of
    the current attempt, replayed every 2 s, kept a hung worker from ever being killed.
    The start is taken once per attempt; the replays are refused and reported."""
    s = live(1, timeout=5.0)
    s.on(b"r0", Envelope(0, 0, Ready()), 2.0)
    replay = Envelope(0, 0, TaskStarted(100, "h", 40), want_ack=True)
    killed: list[KillTask] = []
    now = 2.0
    while now < 40.0 and not killed:
        now += 2.0
        out = s.on(b"sniffer", replay, now)
        assert out[0] == Send(b"sniffer", Ack(0.0))
        killed = [o for o in s.tick(now) if isinstance(o, KillTask)]
    assert killed == [KillTask(0, 0, False, TaskStarted(100, "h", 40))] and now == 8.0
    assert s.refused.total == 3
    assert any("TaskStarted came again" in e for e in s.errors.texts())


def test_each_one_shot_message_is_taken_once_per_attempt():
    """A fatal error and an exit replayed do not fill the error list nor change state."""
    s = live(1)
    fatal = Envelope(0, 0, ErrorReport("E: once", "tb", True), want_ack=True)
    for t in range(5):
        s.on(b"tmp", fatal, 2.0 + t)
        s.on(b"tmp", Envelope(0, 0, Exiting(), want_ack=True), 2.0 + t)
    assert [e for e in s.errors.texts() if "E: once" in e] == ["worker 0 (attempt 0): E: once\ntb"]
    assert s.refused.total == 8
    # The next attempt's are taken (once each).
    s.on(b"tmp", Envelope(0, 1, ErrorReport("E: twice", "tb", True), want_ack=True), 9.0)
    assert s.fatal_errors() == {0: "E: twice"}
    # Reported once per interval, and the rest on the timer.
    assert sum("dropped" in e for e in s.errors.texts()) == 1
    s.tick(100.0)
    assert sum("dropped" in e for e in s.errors.texts()) == 2


def test_workers_start_inactive_and_are_told_the_state_of_the_moment():
    s = live(2, active=False)
    assert s.on(b"r0", Envelope(0, 0, Ready()), 2.0) == []
    assert s.set_active(True) == [Send(b"r0", Activate()), Send(b"r1", Activate())]
    assert s.on(b"r1", Envelope(1, 0, Ready()), 2.1) == [Send(b"r1", Activate())]
    assert s.set_active(False) == [Send(b"r0", Deactivate()), Send(b"r1", Deactivate())]
    assert not s.active


def test_a_job_that_ends_before_every_worker_registered_gives_up_once():
    s = DriverState("t", 2)
    s.on(b"r0", Envelope(0, 0, reg("tcp://w0")), 1.0)
    assert s.job_ended(1, 0, "Job aborted: boom", 2.0, spark_gone=False) == (
        None,
        [Log(logging.WARNING, "the Spark job running the workers ended: Job aborted: boom")],
    )
    assert s.done and s.gave_up == "Job aborted: boom"
    assert s.job_ended(0, 0, None, 3.0, spark_gone=False) == (None, [])  # said once
    assert s.failure() == ": Job aborted: boom"


def test_a_job_that_ends_while_live_is_restarted_with_its_backoff():
    s = live(1)
    s.on(b"tmp", Envelope(0, 0, Exiting(), want_ack=True), 5.0)
    delay, out = s.job_ended(0, 0, None, 6.0, spark_gone=False)
    assert delay == 0.0 and s.restarts() == {0: 1} and s.next_base(0) == 1
    assert "returned while the topology is running" in out[0].text
    # Spark itself gone: no more jobs, and the reads say why.
    assert s.job_ended(0, 1, "stopped", 7.0, spark_gone=True)[0] is None and s.gave_up


def test_a_crash_loop_is_reported_and_clears_after_a_stable_run():
    s = live(1)
    for attempt in range(1, 5):
        s.on(b"t", Envelope(0, attempt, TaskStarted(1, "h", None), want_ack=True), attempt)
    assert s.crash_loops == {0: "its process died without a word (killed, or out of memory?)"}
    s.on(b"t", Envelope(0, 5, TaskStarted(1, "h", None), want_ack=True), 500.0)
    assert s.crash_loops == {}


def counters(acked: int, pending: int = 0) -> dict[str, Any]:
    """A task's snapshot as a worker reports it (every counter, a gauge)."""
    return {**dict.fromkeys(COUNTERS, 0), "acked": acked, "emitted": acked, "pending": pending}


def snap(task: int, acked: int, pending: int = 0) -> dict[int, dict[str, Any]]:
    return {task: counters(acked, pending)}


def test_a_crash_loop_keeps_one_total_not_every_attempt():
    """Issue "Hold under a hostile neighbour", item 9: a day of a crash loop kept one
    snapshot per attempt and merged them all on every read. Ended attempts fold into
    one total: the counts are the same, what is kept is one report per worker."""
    s = live(2)
    for attempt in range(1, 1001):
        s.registry.register(f"a{attempt}".encode(), 0, attempt, reg("tcp://x"))
        s.on(f"a{attempt}".encode(), Envelope(0, attempt, metrics(snapshot=snap(1, 3))), attempt)
    s.on(b"r1", Envelope(1, 0, metrics(snapshot=snap(2, 5))), 1.0)
    assert len(s.reports) == 2 and s.folded[1]["acked"] == 999 * 3
    total = s.snapshot()
    assert total[1]["acked"] == 3000 and total[2]["acked"] == 5


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # worker
            st.booleans(),  # a new attempt of it
            st.dictionaries(st.integers(0, 3), st.integers(0, 50), max_size=3),  # task: acked
        ),
        max_size=40,
    )
)
def test_folding_gives_what_merging_every_attempt_gave(steps):
    """Whatever the reports and restarts, the folded total plus the current reports is
    what merging every attempt's last report gives (gauges from the newest report)."""
    s = DriverState("t", 2)
    attempts = {0: 0, 1: 0}
    last: dict[tuple[int, int], dict] = {}  # the old way: (worker, attempt) -> snapshot
    for worker, restart, acked in steps:
        if restart:
            attempts[worker] += 1
        attempt = attempts[worker]
        route = f"{worker}.{attempt}".encode()
        s.registry.register(route, worker, attempt, reg("tcp://x"))
        report = {t: counters(n, n % 3) for t, n in acked.items()}
        s.on(route, Envelope(worker, attempt, metrics(snapshot=report)), 1.0)
        last[(worker, attempt)] = report
    assert len(s.reports) <= 2
    expected = merge_snapshots(list(last.values()))
    got = s.snapshot()
    assert {t: v["acked"] for t, v in got.items()} == {t: v["acked"] for t, v in expected.items()}


def test_idle_and_drained_are_judged_on_reports_after_a_moment():
    s = live(2)
    assert not s.all_idle(0.0) and not s.drained(0.0)  # no reports yet
    s.on(b"r0", Envelope(0, 0, metrics(snapshot=snap(1, 1, pending=2))), 5.0)
    s.on(b"r1", Envelope(1, 0, metrics(snapshot=snap(2, 1))), 5.0)
    assert s.all_idle(4.0) and not s.all_idle(6.0)
    assert not s.drained(4.0)  # a tree pending on worker 0
    s.on(b"r0", Envelope(0, 0, metrics(snapshot=snap(1, 3, pending=0))), 6.0)
    assert s.drained(4.0) and not s.drained(5.5)  # worker 1's report is older


def test_relaunch_starts_a_new_generation_and_keeps_the_totals():
    """A rebalance from 2 workers to 1: the reports fold into the totals, the old
    processes are refused, the new worker starts from its next attempt, inactive until
    the driver activates the topology again; errors and restart counts go on."""
    s = live(2)
    s.on(b"r0", Envelope(0, 0, metrics(["e1"], snapshot=snap(1, 4))), 2.0)
    s.on(b"r1", Envelope(1, 0, metrics(snapshot=snap(2, 6))), 2.0)
    assert sends(s.stop_all("rebalance")) == [
        Send(b"r0", Stop("rebalance")),
        Send(b"r1", Stop("rebalance")),
    ]
    assert s.job_ended(0, 0, None, 3.0, spark_gone=False) == (None, [])  # stopping
    s.set_active(False)
    s.relaunch(1)
    assert s.num_workers == 1 and s.next_base(0) == 1 and s.workers == {} and s.reports == {}
    assert s.snapshot()[1]["acked"] == 4 and s.snapshot()[2]["acked"] == 6
    # An old process of worker 0 or 1 is stopped or refused.
    assert sends(s.on(b"r0", Envelope(0, 0, reg("tcp://w0")), 4.0)) == [
        Send(b"r0", Stop("attempt 0 was replaced"))
    ]
    assert sends(s.on(b"r1", Envelope(1, 0, reg("tcp://w1")), 4.0)) == []  # refused
    assert s.on(b"r1", Envelope(1, 0, Ready()), 4.0) == []
    s.on(b"t", Envelope(0, 1, TaskStarted(300, "h", 77), want_ack=True), 4.5)
    out = s.on(b"n0", Envelope(0, 1, reg("tcp://n0", 300)), 5.0)
    assert sends(out) == [Send(b"n0", Welcome(1, {0: "tcp://n0"}, 1))]
    assert s.registry.all_registered and s.restarts() == {0: 0}
    assert s.on(b"n0", Envelope(0, 1, Ready()), 5.5) == []  # inactive
    assert s.set_active(True) == [Send(b"n0", Activate())]
    texts = s.errors.texts()
    assert texts[0].startswith("worker 0: split[task 3] execute: ValueError: e1")
    assert "unknown worker index 1" in texts[1]


ROUTES = [b"r0", b"r1", b"tmp", b"evil"]
MESSAGES = [
    TaskStarted(1, "h", 7),
    reg("tcp://x"),
    Heartbeat(),
    Ready(),
    metrics(["e"]),
    ErrorReport("E", "tb", True),
    ErrorReport("E", "tb", False),
    LogLine("WARNING", "l"),
    Exiting(),
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-1, 2),
            st.integers(0, 3),
            st.sampled_from(ROUTES),
            st.sampled_from(MESSAGES),
            st.booleans(),
        ),
        max_size=60,
    ),
    st.booleans(),
)
def test_any_sequence_of_messages_keeps_the_state_bounded_and_the_one_shots_once(events, active):
    """Whatever arrives, in any order, from any route: nothing raises; the tables hold
    at most one entry per worker (and kind); each one-shot kind is taken at most once
    per worker and attempt; an Ack answers every envelope that wants one, first; only a
    Ready is answered with Activate, and only while active."""
    s = DriverState("t", 2, policy=POLICY, worker_timeout=5.0, active=active)
    taken: list[tuple[int, type, int]] = []
    now = 0.0
    for index, attempt, route, msg, want_ack in events:
        now += 1.0
        before = dict(s.one_shots)
        out = s.on(route, Envelope(index, attempt, msg, want_ack), now)
        out += s.tick(now)
        if want_ack:
            assert isinstance(out[0], Send) and isinstance(out[0].message, Ack)
            assert out[0].route == route
        for o in out:
            if isinstance(o, Send) and isinstance(o.message, Activate):
                assert isinstance(msg, Ready) and active
        if isinstance(msg, ONE_SHOT) and s.one_shots != before:
            taken.append((index, type(msg), attempt))
        assert len(s.reports) <= 2 and len(s.ready) <= 2 and len(s.one_shots) <= 2 * 3
        assert set(s.reports) <= {0, 1}
    assert len(taken) == len(set(taken))
