"""Registration, the peer table and the driver's dispatcher, as pure state machines:
plain values in, the messages to send out; no sockets, no Spark."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tupletree.distributed.control import (
    Ack,
    Envelope,
    ErrorReport,
    Exiting,
    Heartbeat,
    JobEnded,
    LogLine,
    Metrics,
    Peers,
    Ready,
    Register,
    Stop,
    TaskStarted,
    Welcome,
    WorkerRegistered,
)
from tupletree.distributed.dispatch import Dispatcher
from tupletree.distributed.registration import Registry, Send
from tupletree.distributed.rejections import OTHER_SENDERS, Rejections


def reg(address: str, pid: int = 100) -> Register:
    return Register(pid=pid, host="h", address=address)


def test_first_registrations_then_the_full_table_to_everyone_else():
    """Each worker is welcomed with the peers known so far; the last one's arrival sends
    the full table to every other worker."""
    r = Registry(3, {0: "a0", 1: "a1", 2: "a2"})
    first = r.register(b"r0", 0, 0, reg("tcp://w0"), now=1.0)
    assert first.sends == [Send(b"r0", Welcome(3, {0: "tcp://w0"}, "a0", 0))]
    assert first.event == WorkerRegistered(False, None, 100, "h", "tcp://w0")
    assert r.register(b"r1", 1, 0, reg("tcp://w1"), 1.0).sends == [
        Send(b"r1", Welcome(3, {0: "tcp://w0", 1: "tcp://w1"}, "a1", 0))
    ]
    assert not r.all_registered
    last = r.register(b"r2", 2, 0, reg("tcp://w2"), 1.0)
    full = {0: "tcp://w0", 1: "tcp://w1", 2: "tcp://w2"}
    assert last.sends == [
        Send(b"r2", Welcome(3, full, "a2", 0)),
        Send(b"r0", Peers(full, [0, 1, 2])),
        Send(b"r1", Peers(full, [0, 1, 2])),
    ]
    assert r.all_registered and r.unreachable() == []


def test_a_restarted_worker_replaces_its_old_attempt_and_peers_are_told():
    r = Registry(2)
    r.register(b"r0", 0, 0, reg("tcp://w0"), 1.0)
    r.register(b"r1", 1, 0, reg("tcp://w1"), 1.0)
    again = r.register(b"r0-new", 0, 1, reg("tcp://w0b", pid=200), 2.0)
    table = {0: "tcp://w0b", 1: "tcp://w1"}
    assert again.sends == [
        Send(b"r0-new", Welcome(2, table, None, 1)),
        Send(b"r0", Stop("replaced by attempt 1")),
        Send(b"r1", Peers(table, [0])),
    ]
    assert again.event == WorkerRegistered(True, 0, 200, "h", "tcp://w0b")
    assert r.routes[0] == b"r0-new" and r.workers[0].attempt == 1
    # The old attempt, still alive, registering again is told to stop and changes nothing.
    stale = r.register(b"r0", 0, 0, reg("tcp://w0"), 3.0)
    assert stale.sends == [Send(b"r0", Stop("attempt 0 was replaced"))] and stale.event is None
    assert r.routes[0] == b"r0-new"


def test_a_route_never_changes_hands_within_an_attempt():
    """A second registration of the current attempt from another route (a replayed
    frame, another socket) is refused and counted; the worker keeps its route."""
    r = Registry(1)
    r.register(b"real", 0, 0, reg("tcp://w0"), 1.0)
    replay = r.register(b"intruder", 0, 0, reg("tcp://evil"), 2.0)
    assert replay.sends == [] and replay.event is None
    assert "never changes hands" in replay.refused
    assert r.routes[0] == b"real" and r.workers[0].address == "tcp://w0" and r.refused == 1
    unknown = r.register(b"x", 5, 0, reg("tcp://x"), 2.0)
    assert "unknown worker index 5" in unknown.refused and r.refused == 2
    two = Registry(2)
    two.register(b"real", 0, 0, reg("tcp://w0"), 1.0)
    borrowed = two.register(b"real", 1, 0, reg("tcp://w1"), 1.0)
    assert "came on worker 0's route" in borrowed.refused and 1 not in two.routes


def test_messages_are_taken_from_the_bound_route_of_the_current_attempt_only():
    r = Registry(2)
    assert r.accepts(0, 0, b"any", one_shot=True)  # a task's words before registering
    assert not r.accepts(0, 0, b"any", one_shot=False)
    r.register(b"r0", 0, 1, reg("tcp://w0"), 1.0)
    assert r.accepts(0, 1, b"r0", one_shot=False)
    assert not r.accepts(0, 1, b"other", one_shot=False)  # not its route
    assert not r.accepts(0, 0, b"r0", one_shot=True)  # a replaced attempt
    assert r.accepts(0, 1, b"short-lived", one_shot=True)
    assert not r.accepts(7, 0, b"r0", one_shot=True)


def test_stopping_stops_everyone_and_every_late_registration():
    r = Registry(2)
    r.register(b"r0", 0, 0, reg("tcp://w0"), 1.0)
    assert r.stop_all("bye") == [Send(b"r0", Stop("bye"))]
    assert r.unreachable() == [1]
    late = r.register(b"r1", 1, 0, reg("tcp://w1"), 2.0)
    assert Send(b"r1", Stop("launcher is stopping")) in late.sends


def test_task_attempt_id_comes_from_the_task_start_of_the_same_attempt():
    r = Registry(1)
    r.task_started(0, 0, TaskStarted(100, "h", 42))
    r.register(b"r0", 0, 0, reg("tcp://w0"), 1.0)
    assert r.workers[0].task_attempt_id == 42
    r.task_started(0, 1, TaskStarted(101, "h", 43))
    r.register(b"r1", 0, 2, reg("tcp://w0b"), 2.0)  # attempt 2 never said it started
    assert r.workers[0].task_attempt_id is None
    assert r.seen_pids == {("h", 100), ("h", 101)}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def worker_registered(self, worker, attempt, event):
        self.calls.append(("registered", worker, attempt, event.restarted))

    def ready(self, worker, attempt):
        self.calls.append(("ready", worker, attempt))

    def metrics(self, worker, attempt, report):
        self.calls.append(("metrics", worker, attempt, report.idle))

    def job_ended(self, event):
        self.calls.append(("ended", event))


def metrics(errors: list[str]) -> Metrics:
    return Metrics({}, errors, True, {}, {})


def test_one_dispatcher_one_error_list():
    """Every kind of message lands in one place: registration answers, listener calls
    for what a cluster keeps, and one error list for a worker's own errors, its tasks'
    errors from metrics reports and an unasked job end."""
    listener = Recorder()
    d = Dispatcher("t", Registry(1), listener)
    sends = d.dispatch(b"r0", Envelope(0, 0, reg("tcp://w0")), now=1.0)
    assert [type(s.message) for s in sends] == [Welcome]
    assert d.dispatch(b"r0", Envelope(0, 0, Ready()), 1.1) == []
    d.dispatch(b"r0", Envelope(0, 0, metrics(["task 3: boom"])), 1.2)
    d.dispatch(b"r0", Envelope(0, 0, LogLine("WARNING", "careful")), 1.3)
    d.dispatch(b"r0", Envelope(0, 0, Heartbeat()), 5.0)
    acked = d.dispatch(b"tmp", Envelope(0, 0, ErrorReport("E: x", "tb", True), want_ack=True), 6)
    assert acked == [Send(b"tmp", Ack())]
    d.job_ended(RuntimeError("spark"), "Job aborted: too many failures")
    assert listener.calls == [
        ("registered", 0, 0, False),
        ("ready", 0, 0),
        ("metrics", 0, 0, True),
        ("ended", JobEnded("Job aborted: too many failures", False)),
    ]
    assert d.errors[0] == "worker 0: task 3: boom"
    assert d.errors[1].startswith("worker 0 (attempt 0): E: x")
    assert "Job aborted" in d.errors[2] and len(d.errors) == 3
    assert d.fatal == {0: "E: x"} and list(d.logs) == ["worker 0 WARNING: careful"]
    assert d.last_heard[0] == 6


def test_dispatcher_drops_what_a_replaced_attempt_or_a_wrong_route_says():
    listener = Recorder()
    d = Dispatcher("t", Registry(1), listener)
    d.dispatch(b"r1", Envelope(0, 1, reg("tcp://w0")), 1.0)
    d.dispatch(b"r1-old", Envelope(0, 0, metrics(["old"])), 1.1)  # replaced attempt
    d.dispatch(b"elsewhere", Envelope(0, 1, metrics(["forged route"])), 1.2)
    d.dispatch(b"r0", Envelope(0, 0, Exiting()), 1.3)  # one-shot, but a replaced attempt
    assert d.dropped == 3 and list(d.errors) == [] and d.registry.exited == set()
    assert listener.calls == [("registered", 0, 1, False)]


def test_without_a_listener_everything_goes_to_the_bounded_inbox():
    d = Dispatcher("t", Registry(1), None, inbox_size=2)
    d.dispatch(b"r0", Envelope(0, 0, reg("tcp://w0")), 1.0)
    d.dispatch(b"r0", Envelope(0, 0, Ready()), 1.0)
    d.dispatch(b"r0", Envelope(0, 0, Heartbeat()), 1.0)
    assert [m.type for m in d.inbox] == ["Ready", "Heartbeat"]


def test_rejections_keep_a_bounded_table_and_report_at_most_once_per_interval():
    rej = Rejections("data frames", max_senders=2, report_every=10.0)
    first = rej.reject("a", "bad mac", now=0.0)
    assert first is not None and "dropped 1 data frames" in first
    assert rej.reject("b", "bad mac", 1.0) is None
    for i in range(100):
        assert rej.reject(f"made-up {i}", "bad mac", 2.0) is None
    later = rej.reject("c", "too large", 10.0)
    assert later is not None and "dropped 102 data frames" in later and "103 in all" in later
    assert rej.by_sender == {"a": 1, "b": 1, OTHER_SENDERS: 101}
    assert rej.total == 103


@given(
    st.lists(
        st.tuples(
            st.integers(-1, 3),  # worker index (3 and -1 are out of range for 3 workers)
            st.integers(0, 3),  # attempt
            st.sampled_from([b"r0", b"r1", b"r2", b"r3", b"evil"]),  # route
        ),
        max_size=30,
    )
)
def test_any_sequence_of_registrations_keeps_routes_owned(events):
    """Whatever registrations arrive, in any order and from any route: a worker's
    attempt never goes back, its route changes only with a newer attempt, no route
    serves two workers, and every Peers update carries the table of that moment and
    goes to the other workers."""
    r = Registry(3)
    for index, attempt, route in events:
        before = dict(r.workers), dict(r.routes)
        outcome = r.register(route, index, attempt, reg(f"tcp://{index}.{attempt}"), 1.0)
        for i, info in r.workers.items():
            old = before[0].get(i)
            if old is not None:
                assert info.attempt >= old.attempt
                if r.routes[i] != before[1][i]:
                    assert info.attempt > old.attempt
        assert len(set(r.routes.values())) == len(r.routes)
        if outcome.refused is not None or outcome.event is None:
            assert (dict(r.workers), dict(r.routes)) == before
        for send in outcome.sends:
            if isinstance(send.message, Peers):
                assert send.message.peers == r.peers()
                assert send.route in r.routes.values() and send.route != r.routes[index]
