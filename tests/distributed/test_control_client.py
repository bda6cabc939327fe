"""A worker's end of the control channel (``ControlClient``, ``send_once``) against a
bare ROUTER speaking the protocol, and the protocol's signed frames; no Spark."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
import zmq

from tupletree.distributed import control as protocol
from tupletree.distributed.control_client import (
    ControlClient,
    advertise_host,
    make_control_address,
    parse_control_address,
    send_once,
)


def test_protocol_round_trip_and_forgery():
    """A signed envelope decodes to what was sent; a frame signed with another key, cut
    short, or holding anything but a protocol message is refused."""
    key = protocol.new_secret()
    env = protocol.Envelope(1, 2, protocol.LogLine("INFO", "x"))
    frames = protocol.encode(key, env)
    assert protocol.decode_envelope(key, frames) == env
    with pytest.raises(protocol.BadFrame, match="bad signature"):
        protocol.decode_envelope(protocol.new_secret(), frames)
    with pytest.raises(protocol.BadFrame):
        protocol.decode_envelope(key, frames[:1])
    with pytest.raises(protocol.BadFrame, match="not a worker's envelope"):
        protocol.decode_envelope(key, protocol.encode(key, protocol.Stop("x")))
    with pytest.raises(protocol.BadFrame, match="not a message to a worker"):
        protocol.decode_command(key, frames)
    assert protocol.data_key(key) != key and len(protocol.data_key(key)) == 32


def test_control_address_round_trip(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    key = protocol.new_secret()
    address = make_control_address("tcp://127.0.0.1:5555", key)
    assert parse_control_address(address) == ("tcp://127.0.0.1:5555", key)
    assert advertise_host(address) == "127.0.0.1"
    with pytest.raises(ValueError, match="not a tupletree control address"):
        parse_control_address("tcp://127.0.0.1:5555")


def test_a_worker_advertises_spark_local_ip_when_its_host_sets_one(monkeypatch):
    """SPARK_LOCAL_IP (a host's spark-env.sh; inherited by executors) is the address a
    worker binds and advertises, even with the driver on loopback; a wildcard is not
    an address to advertise, and an unset one leaves the loopback rule."""
    address = make_control_address("tcp://127.0.0.1:5555", protocol.new_secret())
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.3")
    assert advertise_host(address) == "127.0.0.3"
    monkeypatch.setenv("SPARK_LOCAL_IP", "0.0.0.0")
    assert advertise_host(address) == "127.0.0.1"
    monkeypatch.delenv("SPARK_LOCAL_IP")
    assert advertise_host(address) == "127.0.0.1"


class FakeDriver:
    """A bare ROUTER speaking the protocol, to test ControlClient without Spark."""

    def __init__(self) -> None:
        self.key = protocol.new_secret()
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.address = make_control_address(f"tcp://127.0.0.1:{port}", self.key)

    def recv(self, timeout: float = 5.0):
        assert self.sock.poll(int(timeout * 1000)), "nothing from the worker"
        route, *frames = self.sock.recv_multipart()
        return route, protocol.decode_envelope(self.key, frames)

    def recv_type(self, kind: type, timeout: float = 5.0):
        deadline = time.monotonic() + timeout
        while True:
            route, env = self.recv(deadline - time.monotonic())
            if isinstance(env.message, kind):
                return route, env.worker, env.attempt, env.message

    def send(self, route: bytes, msg) -> None:
        self.sock.send_multipart([route, *protocol.encode(self.key, msg)])

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def driver():
    d = FakeDriver()
    yield d
    d.close()


def test_control_client_register_peers_commands_and_stop(driver):
    client = ControlClient(driver.address, 1, 2, heartbeat_interval=0.05, driver_timeout=None)
    try:
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("w", client.register("tcp://x:1")))
        t.start()
        route, index, attempt, reg = driver.recv_type(protocol.Register)
        assert (index, attempt, reg.address, reg.pid) == (1, 2, "tcp://x:1", os.getpid())
        assert len(route) == 16 and not route.startswith(b"w1."), "a random routing id"
        driver.send(route, protocol.Welcome(2, {1: "tcp://x:1"}, 2))
        t.join(5)
        assert result["w"].num_workers == 2 and result["w"].peers == {1: "tcp://x:1"}
        assert isinstance(client.recv(1), protocol.Welcome)

        driver.send(route, protocol.Ping())  # never reaches the worker's code
        driver.send(route, protocol.Peers({0: "tcp://y:2", 1: "tcp://x:1"}, [0]))
        assert client.wait_for_peers(2) == {0: "tcp://y:2", 1: "tcp://x:1"}
        assert client.recv(1).changed == [0]

        driver.recv_type(protocol.Heartbeat)  # sent on its own once registered
        client.send(protocol.LogLine("WARNING", "five"))
        assert driver.recv_type(protocol.LogLine)[3].line == "five"
        with pytest.raises(TypeError, match="not a message of the control protocol"):
            client.send({"type": "metrics"})
        client.report_error(ValueError("bad tuple"))
        err = driver.recv_type(protocol.ErrorReport)[3]
        assert err.error == "ValueError: bad tuple" and not err.fatal

        # A forged frame (wrong key) is dropped and counted; the next real one gets through.
        driver.sock.send_multipart([route, *protocol.encode(b"k" * 32, protocol.Stop("evil"))])
        driver.send(route, protocol.Stop("done"))
        assert client.recv(2) == protocol.Stop("done")
        assert client.stop_requested.is_set() and client.driver_lost is None
        assert client.frames_refused == 1
    finally:
        client.close()


def test_control_client_turns_a_silent_driver_into_stop_and_says_so(driver):
    """A driver gone silent stops the worker, and ``driver_lost`` says why, so the
    worker can end with an error instead of "cleanly"."""
    client = ControlClient(driver.address, 0, 0, heartbeat_interval=0.05, driver_timeout=0.3)
    try:
        t = threading.Thread(target=client.register, args=("tcp://x:1",))
        t.start()
        route, *_ = driver.recv_type(protocol.Register)
        driver.send(route, protocol.Welcome(1, {0: "tcp://x:1"}, 0))
        t.join(5)
        assert isinstance(client.recv(1), protocol.Welcome)
        msg = client.recv(3)
        assert isinstance(msg, protocol.Stop) and "heard nothing from the driver" in msg.reason
        assert client.driver_lost == msg.reason
    finally:
        client.close()


def test_register_times_out_clearly_without_a_driver(driver):
    with (
        ControlClient(driver.address, 0, 0) as client,
        pytest.raises(TimeoutError, match="got no answer from the driver"),
    ):
        client.register("tcp://x:1", timeout=0.2)


def test_send_once_waits_for_the_ack(driver):
    result = {}
    t = threading.Thread(
        target=lambda: result.setdefault(
            "acked", send_once(driver.address, 0, 0, protocol.Exiting(), timeout=5)
        )
    )
    t.start()
    route, env = driver.recv()
    assert env == protocol.Envelope(0, 0, protocol.Exiting(), want_ack=True)
    driver.send(route, protocol.Ack())
    t.join(5)
    assert result["acked"] is True
    assert send_once(driver.address, 0, 0, protocol.Exiting(), timeout=0.1) is False


def test_a_waker_freed_before_its_socket_was_closed_does_not_block_the_next_one() -> None:
    """The I/O thread closes a Waker's receiving socket, maybe after the Waker itself is
    gone; a new Waker (which CPython may place at the freed one's address) still binds."""
    from tupletree.distributed.waker import Waker

    ctx = zmq.Context.instance()
    left_open = []
    for _ in range(20):
        waker = Waker(ctx)
        left_open.append(waker.rx)  # its I/O thread has not closed it yet
        waker.close()
        del waker
    assert len({sock.LAST_ENDPOINT for sock in left_open}) == 20
    for sock in left_open:
        sock.close(linger=0)


def test_a_worker_ships_a_huge_log_line_cut():
    """A component's huge log record leaves the worker cut, as an error's text does: the
    control channel carries at most MAX_PER_SEC lines a second, none of megabytes."""
    from tupletree.distributed.worker_main import _ForwardLogs
    from tupletree.runtime.error_log import MAX_ERROR_CHARS

    sent: list[str] = []

    class Control:
        def log(self, line: str, level: str) -> None:
            sent.append(line)

    handler = _ForwardLogs(Control())
    handler.emit(logging.LogRecord("user.bolt", logging.WARNING, "f", 1, "z" * 10**6, (), None))
    (line,) = sent
    assert line.startswith("user.bolt: zzz") and len(line) < MAX_ERROR_CHARS + 100
