"""The driver's control service and a real ControlClient over loopback, no Spark: a
stranger who connects to the control port cannot take a worker's route; the driver's
messages wake a worker that waits for input."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from tupletree import BasicBolt, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.distributed import control, worker_main
from tupletree.distributed.control import Activate, Deactivate, Envelope, Register, Stop, Welcome
from tupletree.distributed.control_client import ControlClient, DriverLost, make_control_address
from tupletree.distributed.control_service import ControlService
from tupletree.distributed.driver_state import DriverState
from tupletree.distributed.registration import Send
from tupletree.distributed.scheduler import assign
from tupletree.distributed.worker_main import TopologyWorkerMain
from tupletree.runtime.worker import make_layout


class Driver:
    """A control service with the driver's state, as a launcher wires them (and a
    record of every message it took, to see heartbeats and readiness arrive)."""

    def __init__(self, num_workers: int) -> None:
        self.secret = control.new_secret()
        self.state = DriverState("t", num_workers)
        self.lock = threading.Lock()
        self.heard: list[tuple[int, str]] = []  # (worker, message type), in order
        self.service = ControlService(
            "t",
            self.secret,
            self.handle,
            self.routes,
            ping_interval=0.05,
            on_rejected=lambda text: self.read(lambda s: s.report(text, 0.0)),
        )
        port = self.service.start("127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.address = make_control_address(self.endpoint, self.secret)

    def handle(self, route: bytes, env: Envelope, now: float) -> list[Send]:
        with self.lock:
            self.heard.append((env.worker, type(env.message).__name__))
            return [o for o in self.state.on(route, env, now) if isinstance(o, Send)]

    def read(self, view: Any) -> Any:
        with self.lock:
            return view(self.state)

    def routes(self) -> list[bytes]:
        return self.read(lambda s: list(s.registry.routes.values()))

    def route(self, worker: int) -> bytes:
        return self.read(lambda s: s.registry.routes[worker])

    def count(self, kind: str) -> int:
        return self.read(lambda s: sum(t == kind for _, t in self.heard))


@pytest.fixture
def driver() -> Iterator[Driver]:
    d = Driver(1)
    yield d
    d.service.close()


def wait_until(predicate: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def connected(sock: zmq.Socket, endpoint: str) -> None:
    """Connect ``sock`` and wait until its handshake with the driver's ROUTER is done
    (so what the test then sees is the ROUTER's answer to it, not a connection still
    on its way)."""
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        sock.connect(endpoint)
        assert monitor.poll(10_000), "no handshake with the driver"
        assert recv_monitor_message(monitor)["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED
    finally:
        sock.disable_monitor()
        monitor.close()


def registered_client(driver: Driver) -> ControlClient:
    client = ControlClient(driver.address, 0, 0, heartbeat_interval=0.05, driver_timeout=None)
    welcome = client.register("tcp://127.0.0.1:1", timeout=10)
    assert isinstance(welcome, Welcome) and welcome.peers == {0: "tcp://127.0.0.1:1"}
    assert isinstance(client.recv(1), Welcome)
    return client


def test_a_stranger_with_the_workers_routing_id_cannot_take_its_route(driver: Driver):
    """As the attacker: a DEALER connects with the routing id it saw worker 0 use,
    sends nothing and holds on. The driver's messages still reach the real worker and
    never the stranger, the worker keeps being heard, and the route is unchanged. Then
    the stranger sends a registration signed with a wrong key and a bare frame: both
    are refused, counted and reported once."""
    client = registered_client(driver)
    try:
        route = driver.route(0)
        intruder = zmq.Context.instance().socket(zmq.DEALER)
        intruder.setsockopt(zmq.LINGER, 0)
        intruder.setsockopt(zmq.ROUTING_ID, route)
        connected(intruder, driver.endpoint)  # then holds on, silent, as the attack did

        heard = driver.count("Heartbeat")
        driver.service.send(route, Activate())
        msg = client.recv(5)
        assert isinstance(msg, Activate), "the driver's command reached someone else"
        assert intruder.poll(300) == 0, "the stranger received the worker's traffic"
        wait_until(lambda: driver.count("Heartbeat") > heard, "the worker's heartbeats")
        assert driver.route(0) == route

        forged = control.encode(
            control.new_secret(), Envelope(0, 0, Register(1, "h", "tcp://evil:1"))
        )
        other = zmq.Context.instance().socket(zmq.DEALER)
        other.setsockopt(zmq.LINGER, 0)
        other.connect(driver.endpoint)
        other.send_multipart(forged)
        other.send(b"not even two frames")
        wait_until(lambda: driver.service.rejections.total == 2, "both frames refused")
        assert driver.route(0) == route
        assert driver.read(lambda s: s.registry.workers[0].address) == "tcp://127.0.0.1:1"
        reports = [e for e in driver.read(lambda s: s.errors.texts()) if "control frames" in e]
        assert len(reports) == 1 and "dropped 1 control frames" in reports[0]
        driver.service.send(route, Activate())
        assert isinstance(client.recv(5), Activate)
        intruder.close()
        other.close()
    finally:
        client.close()


def test_a_replayed_registration_from_another_socket_is_refused(driver: Driver):
    """A signed registration sent again from another socket (what a stranger who
    captured one could do) does not move the route; it is refused and reported."""
    client = registered_client(driver)
    try:
        route = driver.route(0)
        replay = zmq.Context.instance().socket(zmq.DEALER)
        replay.setsockopt(zmq.LINGER, 0)
        replay.connect(driver.endpoint)
        replay.send_multipart(
            control.encode(driver.secret, Envelope(0, 0, Register(1, "h", "tcp://evil:1")))
        )
        for _ in range(50):  # a flood of replays: one report
            replay.send_multipart(
                control.encode(driver.secret, Envelope(0, 0, Register(1, "h", "tcp://evil:1")))
            )
        wait_until(lambda: driver.read(lambda s: s.refused.total) == 51, "the refusals")
        assert driver.route(0) == route
        errors = driver.read(lambda s: s.errors.texts())
        reports = [e for e in errors if "never changes hands" in e]
        assert len(reports) == 1 and "dropped 1 control messages" in reports[0]
        assert replay.poll(300) == 0
        replay.close()
    finally:
        client.close()


def test_the_driver_warns_at_most_once_per_interval_about_bad_frames(driver: Driver, caplog):
    """A flood of bad control frames yields one WARNING per report interval, not one per
    frame; the table of senders stays bounded."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(driver.endpoint)
    with caplog.at_level("WARNING"):
        for _ in range(300):
            sock.send_multipart([b"x" * 32, b"junk"])
        wait_until(lambda: driver.service.rejections.total == 300, "every frame counted")
    warnings = [r for r in caplog.records if "control frames" in r.getMessage()]
    assert len(warnings) == 1
    assert len(driver.service.rejections.by_sender) == 1
    sock.close()


def test_many_strangers_keep_the_sender_table_bounded(driver: Driver):
    socks = []
    for i in range(80):
        s = zmq.Context.instance().socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.ROUTING_ID, f"stranger-{i}".encode())
        s.connect(driver.endpoint)
        s.send(b"junk")
        socks.append(s)
    wait_until(lambda: driver.service.rejections.total == 80, "every frame counted")
    assert len(driver.service.rejections.by_sender) == driver.service.rejections.max_senders + 1
    for s in socks:
        s.close()


def test_send_from_many_threads_reaches_the_worker(driver: Driver):
    client = registered_client(driver)
    try:
        route = driver.route(0)
        threads = [
            threading.Thread(target=lambda: driver.service.send(route, Activate()))
            for _ in range(20)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = [client.recv(5) for _ in range(20)]
        assert all(isinstance(m, Activate) for m in got)
    finally:
        client.close()


class WordSpout(Spout):
    outputs = ["word"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def next_tuple(self) -> None:
        self.collector.emit(["w"], msg_id=1)


class Sink(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def started(
    main: TopologyWorkerMain, driver: Driver
) -> tuple[threading.Thread, list[BaseException | None]]:
    """Run worker 0 of ``main`` in a thread until it said Ready; the list gets what
    ``main`` ended with (None, or what it raised)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            main(0, 0, driver.address)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_until(lambda: driver.count("Ready") > 0, "the worker to be ready", timeout=30)
    return thread, outcome


def test_a_topology_worker_that_loses_its_driver_ends_with_an_error(driver: Driver):
    """A topology worker whose driver goes silent drains and then raises DriverLost
    (which the Spark task reports and fails on, so Spark runs it again) instead of
    returning as if it had been told to stop."""
    builder = TopologyBuilder()
    builder.set_spout("words", WordSpout())
    builder.set_bolt("sink", Sink()).shuffle_grouping("words")
    topology = builder.create_topology()
    conf = validate({"topology.workers": 1})
    placement = assign(make_layout(topology, conf), 1)
    main = TopologyWorkerMain(
        "lost", pickle.dumps(topology), conf, placement, 10.0, driver_timeout=0.5
    )
    thread, outcome = started(main, driver)
    driver.service.close()  # the driver goes silent
    thread.join(30)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], DriverLost), outcome
    assert "heard nothing from the driver" in str(outcome[0])


def test_the_end_of_a_burst_of_bad_frames_is_reported_without_another_one(driver: Driver):
    """Issue "Hold under a hostile neighbour", item 9: the count of a burst refused
    after the last report used to wait for the next bad frame. It comes on the timer."""
    driver.service.rejections.report_every = 0.5
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(driver.endpoint)

    def reports() -> list[str]:
        return [e for e in driver.read(lambda s: s.errors.texts()) if "control frames" in e]

    sock.send(b"junk")
    wait_until(lambda: len(reports()) == 1, "the first report")
    for _ in range(20):
        sock.send(b"junk")
    wait_until(lambda: driver.service.rejections.total == 21, "every frame counted")
    wait_until(lambda: len(reports()) == 2, "the burst reported on the timer")
    assert "dropped 20 control frames" in reports()[1]
    sock.close()


def test_a_driver_message_wakes_the_poll_on_arrivals_and_waits_there(driver: Driver):
    """``arrivals`` turns readable once a message is queued for ``recv``: a worker that
    polls it beside its data socket acts on Activate or Stop at once, however long it
    meant to wait. Cleared, it waits again; the message stays queued for ``recv``."""
    client = registered_client(driver)
    try:
        # The Welcome's wake-up (the client queues a message, then wakes: it may come
        # a moment after ``recv`` returned the Welcome).
        assert client.arrivals.poll(10_000) == zmq.POLLIN
        client.clear_arrivals()
        assert client.arrivals.poll(200) == 0, "readable with nothing queued"
        route = driver.route(0)
        for sent in (Activate(), Deactivate()):
            driver.service.send(route, sent)
            assert client.arrivals.poll(10_000) == zmq.POLLIN, f"{sent} woke nothing"
            assert client.recv(0) == sent, "woken before the message was queued"
            client.clear_arrivals()
            assert client.arrivals.poll(200) == 0, "still readable once cleared"
        assert client.recv(0) is None
    finally:
        client.close()


class QueueAtWake:
    """Stands in for a client's arrivals waker: records how many messages ``recv``
    could have taken at the moment of each wake, then wakes for real."""

    def __init__(self, client: ControlClient) -> None:
        self.client = client
        self.real = client._arrived
        self.queued_at_wake: list[int] = []

    def wake(self) -> None:
        self.queued_at_wake.append(self.client._inbox.qsize())
        self.real.wake()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_every_wake_finds_its_message_already_queued(driver: Driver):
    """The other test above finds the message after a wake, but a wake sent before the
    queue put would usually pass it too (the poll returns a little later). Recorded at
    the wake itself, the queue always holds the message: the order is queue, then
    wake."""
    client = registered_client(driver)
    try:
        assert client.arrivals.poll(10_000) == zmq.POLLIN  # the Welcome's
        client.clear_arrivals()
        recorder = client._arrived = QueueAtWake(client)
        route = driver.route(0)
        sent = [Activate(), Deactivate(), Activate()]
        for msg in sent:
            driver.service.send(route, msg)
        wait_until(lambda: len(recorder.queued_at_wake) == len(sent), "a wake per message")
        assert recorder.queued_at_wake == [1, 2, 3]
        assert [client.recv(0) for _ in sent] == sent
    finally:
        client.close()


def test_a_lost_driver_wakes_the_poll_on_arrivals_too():
    """The Stop a client makes up when its driver goes silent wakes the worker's wait
    as the driver's own would."""
    d = Driver(1)
    client = ControlClient(d.address, 0, 0, heartbeat_interval=0.05, driver_timeout=0.3)
    try:
        client.register("tcp://127.0.0.1:1", timeout=10)
        assert isinstance(client.recv(1), Welcome)
        assert client.arrivals.poll(10_000) == zmq.POLLIN  # the Welcome's
        client.clear_arrivals()
        d.service.close()  # the driver goes silent
        assert client.arrivals.poll(10_000) == zmq.POLLIN
        msg = client.recv(0)
        assert isinstance(msg, Stop) and "heard nothing from the driver" in msg.reason
        assert client.stop_requested.is_set()
    finally:
        client.close()


EMITTING = threading.Event()


class ClockFromZero:
    """A monotonic clock that reads 0 when made."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._start


class SignallingSpout(WordSpout):
    """Says when it first emits (the worker runs in this process, in a thread)."""

    def next_tuple(self) -> None:
        EMITTING.set()
        super().next_tuple()


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_a_worker_acts_on_stop_without_waiting_for_its_next_report(
    driver: Driver, monkeypatch: pytest.MonkeyPatch, busy: bool
):
    """A worker with nothing to do and no timer due for ten minutes waits until its
    next report, here a minute away. The driver's Stop must end that wait, and the
    drain that follows must not wait for reports either (a busy worker: its spout
    emitting when the Stop comes, so it has trees to finish), so the worker returns
    within seconds. Its clock starts at 0, as a fresh machine's monotonic clock nearly
    does: the first report must still go with the first step."""
    monkeypatch.setattr(worker_main, "REPORT_SECS", 60.0)
    monkeypatch.setattr(worker_main, "RealClock", ClockFromZero)
    EMITTING.clear()
    builder = TopologyBuilder()
    builder.set_spout("words", SignallingSpout())
    builder.set_bolt("sink", Sink()).shuffle_grouping("words")
    topology = builder.create_topology()
    conf = validate({"topology.workers": 1, "topology.message.timeout.secs": 600})
    placement = assign(make_layout(topology, conf), 1)
    main = TopologyWorkerMain("idle", pickle.dumps(topology), conf, placement, 10.0)
    thread, outcome = started(main, driver)
    # Its first report goes with its first step: past that, it is in its long wait.
    wait_until(lambda: driver.count("Metrics") > 0, "the worker's first report", timeout=30)
    reports = driver.count("Metrics")
    if busy:
        driver.service.send(driver.route(0), Activate())
        assert EMITTING.wait(30), "the spout never emitted"
    driver.service.send(driver.route(0), Stop("the test stops it"))
    thread.join(20)
    assert not thread.is_alive(), "the Stop or the drain waited for the next report (60 s)"
    assert EMITTING.is_set() == busy
    assert outcome == [None]
    # Drained and reported on its way out (the driver reads that report on its own
    # thread, maybe a moment after the worker returned), not at its minute's report.
    wait_until(lambda: driver.count("Metrics") > reports, "the worker's last report")
