"""Registration and the peer table, and the bounded count of refused input, as pure
state machines: plain values in, the messages to send out; no sockets, no Spark."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tupletree.distributed.control import Peers, Register, Stop, TaskStarted, Welcome
from tupletree.distributed.registration import Registry, Send
from tupletree.distributed.rejections import OTHER_SENDERS, Rejections


def reg(address: str, pid: int = 100) -> Register:
    return Register(pid=pid, host="h", address=address)


def test_first_registrations_then_the_full_table_to_everyone_else():
    """Each worker is welcomed with the peers known so far; the last one's arrival sends
    the full table to every other worker."""
    r = Registry(3)
    first = r.register(b"r0", 0, 0, reg("tcp://w0"))
    assert first.sends == [Send(b"r0", Welcome(3, {0: "tcp://w0"}, 0))]
    assert first.registered is not None and not first.restarted
    assert (first.registered.pid, first.registered.address) == (100, "tcp://w0")
    assert r.register(b"r1", 1, 0, reg("tcp://w1")).sends == [
        Send(b"r1", Welcome(3, {0: "tcp://w0", 1: "tcp://w1"}, 0))
    ]
    assert not r.all_registered
    last = r.register(b"r2", 2, 0, reg("tcp://w2"))
    full = {0: "tcp://w0", 1: "tcp://w1", 2: "tcp://w2"}
    assert last.sends == [
        Send(b"r2", Welcome(3, full, 0)),
        Send(b"r0", Peers(full, [0, 1, 2])),
        Send(b"r1", Peers(full, [0, 1, 2])),
    ]
    assert r.all_registered and r.unreachable() == []


def test_a_restarted_worker_replaces_its_old_attempt_and_peers_are_told():
    r = Registry(2)
    r.register(b"r0", 0, 0, reg("tcp://w0"))
    r.register(b"r1", 1, 0, reg("tcp://w1"))
    again = r.register(b"r0-new", 0, 1, reg("tcp://w0b", pid=200))
    table = {0: "tcp://w0b", 1: "tcp://w1"}
    assert again.sends == [
        Send(b"r0-new", Welcome(2, table, 1)),
        Send(b"r0", Stop("replaced by attempt 1")),
        Send(b"r1", Peers(table, [0])),
    ]
    assert again.restarted and again.registered is not None and again.registered.pid == 200
    assert r.routes[0] == b"r0-new" and r.workers[0].attempt == 1
    # The old attempt, still alive, registering again is told to stop and changes nothing.
    stale = r.register(b"r0", 0, 0, reg("tcp://w0"))
    assert stale.sends == [Send(b"r0", Stop("attempt 0 was replaced"))]
    assert stale.registered is None
    assert r.routes[0] == b"r0-new"


def test_a_route_never_changes_hands_within_an_attempt():
    """A second registration of the current attempt from another route (a replayed
    frame, another socket) is refused and counted; the worker keeps its route."""
    r = Registry(1)
    r.register(b"real", 0, 0, reg("tcp://w0"))
    replay = r.register(b"intruder", 0, 0, reg("tcp://evil"))
    assert replay.sends == [] and replay.registered is None
    assert "never changes hands" in replay.refused
    assert r.routes[0] == b"real" and r.workers[0].address == "tcp://w0"
    unknown = r.register(b"x", 5, 0, reg("tcp://x"))
    assert "unknown worker index 5" in unknown.refused
    two = Registry(2)
    two.register(b"real", 0, 0, reg("tcp://w0"))
    borrowed = two.register(b"real", 1, 0, reg("tcp://w1"))
    assert "came on worker 0's route" in borrowed.refused and 1 not in two.routes


def test_worker_indexes_run_from_zero_to_below_the_worker_count():
    """The index equal to the worker count (one past the last) is refused, as -1 is."""
    r = Registry(2)
    for index in (2, -1):
        outcome = r.register(b"r", index, 0, reg("tcp://x"))
        assert outcome.refused == f"registration from unknown worker index {index}"
        assert not r.accepts(index, 0, b"r", one_shot=True)
    assert r.register(b"r1", 1, 0, reg("tcp://w1")).refused is None
    assert r.workers.keys() == {1}


def test_messages_are_taken_from_the_bound_route_of_the_current_attempt_only():
    r = Registry(2)
    assert r.accepts(0, 0, b"any", one_shot=True)  # a task's words before registering
    assert not r.accepts(0, 0, b"any", one_shot=False)
    r.register(b"r0", 0, 1, reg("tcp://w0"))
    assert r.accepts(0, 1, b"r0", one_shot=False)
    assert not r.accepts(0, 1, b"other", one_shot=False)  # not its route
    assert not r.accepts(0, 0, b"r0", one_shot=True)  # a replaced attempt
    assert r.accepts(0, 1, b"short-lived", one_shot=True)
    assert not r.accepts(7, 0, b"r0", one_shot=True)


def test_stopping_stops_everyone_and_every_late_registration():
    r = Registry(2)
    r.register(b"r0", 0, 0, reg("tcp://w0"))
    assert r.stop_all("bye") == [Send(b"r0", Stop("bye"))]
    assert r.unreachable() == [1]
    late = r.register(b"r1", 1, 0, reg("tcp://w1"))
    assert Send(b"r1", Stop("launcher is stopping")) in late.sends


def test_task_attempt_id_comes_from_the_task_start_of_the_same_attempt():
    r = Registry(1)
    r.task_started(0, 0, TaskStarted(100, "h", 42))
    r.register(b"r0", 0, 0, reg("tcp://w0"))
    assert r.workers[0].task_attempt_id == 42
    r.task_started(0, 1, TaskStarted(101, "h", 43))
    r.register(b"r1", 0, 2, reg("tcp://w0b"))  # attempt 2 never said it started
    assert r.workers[0].task_attempt_id is None
    assert r.seen_pids == {("h", 100), ("h", 101)}


def test_a_new_generation_forgets_the_workers_and_refuses_their_attempts():
    """A rebalance: the old workers are gone, a new count registers from each index's
    floor; an old process registering again is told to stop, and its messages dropped."""
    r = Registry(1)
    r.register(b"r0", 0, 3, reg("tcp://w0"))
    r.new_generation(2, {0: 4})
    assert r.workers == {} and r.routes == {} and not r.all_registered
    stale = r.register(b"r0", 0, 3, reg("tcp://w0"))
    assert stale.sends == [Send(b"r0", Stop("attempt 3 was replaced"))]
    assert not r.accepts(0, 3, b"r0", one_shot=True)
    r.register(b"a", 0, 4, reg("tcp://a"))
    last = r.register(b"b", 1, 0, reg("tcp://b"))
    assert r.all_registered and last.sends[0] == Send(b"b", Welcome(2, r.peers(), 0))


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
        outcome = r.register(route, index, attempt, reg(f"tcp://{index}.{attempt}"))
        for i, info in r.workers.items():
            old = before[0].get(i)
            if old is not None:
                assert info.attempt >= old.attempt
                if r.routes[i] != before[1][i]:
                    assert info.attempt > old.attempt
        assert len(set(r.routes.values())) == len(r.routes)
        if outcome.refused is not None or outcome.registered is None:
            assert (dict(r.workers), dict(r.routes)) == before
        for send in outcome.sends:
            if isinstance(send.message, Peers):
                assert send.message.peers == r.peers()
                assert send.route in r.routes.values() and send.route != r.routes[index]


def test_a_burst_of_refused_frames_is_reported_on_the_timer():
    """Issue "Hold under a hostile neighbour", item 9: "dropped N frames" used to wait
    for the next bad frame (20,000 reported as 1 until then). ``due`` reports on a timer."""
    rej = Rejections("data frames", report_every=10.0)
    assert rej.reject("a", "bad mac", now=0.0) is not None  # the first, at once
    for i in range(20_000):
        assert rej.reject("a", "bad mac", now=1.0 + i / 10_000) is None
    assert rej.due(9.9) is None  # not due yet
    report = rej.due(10.0)
    assert report is not None and "dropped 20000 data frames" in report
    assert rej.due(25.0) is None  # nothing new: nothing to say
