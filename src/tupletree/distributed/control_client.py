"""A worker's side of the control channel to the driver.

A worker is ``worker_main(worker_index, attempt, control_address)`` running inside one
long-running Spark task. It talks to the driver's WorkerLauncher through a
``ControlClient``:

    def worker_main(index, attempt, control_address):
        data = zmq_context.socket(zmq.PULL)          # the worker's own data socket
        port = data.bind_to_random_port(f"tcp://{advertise_host(control_address)}")
        with ControlClient(control_address, index, attempt) as control:
            welcome = control.register(f"tcp://{advertise_host(control_address)}:{port}")
            peers = control.wait_for_peers()
            while True:
                msg = control.recv(timeout=0.1)
                if msg is None: ...do work...
                elif msg["type"] == "stop": break
                elif msg["type"] == "peers": ...reconnect to msg["changed"]...

The client owns its zmq socket on a background thread (zmq sockets must not be shared
between threads, and a worker's executors are many threads), so every method here is
safe to call from any thread. It heartbeats on its own, and turns a driver that went
silent into a ``stop`` message, so a worker never outlives its topology.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import zmq

from tupletree.distributed import control as protocol
from tupletree.distributed.control import Message

WorkerMain = Callable[[int, int, str], None]
"""``worker_main(worker_index, attempt, control_address) -> None``: the body of a worker."""


def make_control_address(endpoint: str, secret: bytes) -> str:
    """Join the driver's zmq endpoint and the launcher's secret into the one string a
    worker needs (``tcp://host:port#key=<hex>``). It is handed to workers inside the
    Spark task, never over the control port itself."""
    return f"{endpoint}#key={secret.hex()}"


def parse_control_address(control_address: str) -> tuple[str, bytes]:
    """Split a control address into (zmq endpoint, secret)."""
    endpoint, sep, fragment = control_address.partition("#")
    if not sep or not fragment.startswith("key="):
        raise ValueError(
            f"not a tupletree control address (expected 'tcp://host:port#key=...'): {endpoint!r}"
        )
    return endpoint, bytes.fromhex(fragment[len("key=") :])


def advertise_host(control_address: str) -> str:
    """The IP address other workers should use to reach a socket bound on this worker.

    With a driver on loopback (local mode) that is 127.0.0.1. Otherwise it is the local
    address of the interface that routes to the driver, found by connecting a UDP
    socket (which sends nothing), so multi-homed executors pick the reachable one.
    """
    endpoint, _ = parse_control_address(control_address)
    host_port = endpoint.split("://", 1)[-1]
    host, _, port = host_port.rpartition(":")
    host = host.strip("[]")
    if host in ("127.0.0.1", "localhost", "::1"):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((host, int(port)))
            return probe.getsockname()[0]
        except OSError:
            return socket.gethostbyname(socket.gethostname())


@dataclass
class Welcome:
    """The driver's answer to a registration."""

    num_workers: int
    peers: dict[int, str]
    assignment: Any = None


def _task_attempt_id() -> int | None:
    """Spark's id of the running task attempt (lets the driver kill/restart it)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return None
    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx is not None else None


class ControlClient:
    """A worker's connection to the driver's control service.

    Register with ``register(data_address)``; then ``recv`` yields the driver's
    messages (``welcome``, ``peers`` updates, ``stop``, and any command dict the driver
    sends, e.g. ``{"type": "activate"}``); ``send``/``report_error``/``log``
    go the other way. Thread-safe. ``stop_requested`` is set once a ``stop`` arrived
    (or the driver was silent for ``driver_timeout`` seconds).
    """

    def __init__(
        self,
        control_address: str,
        worker_index: int,
        attempt: int,
        *,
        heartbeat_interval: float = 1.0,
        driver_timeout: float | None = 30.0,
    ) -> None:
        self.worker_index = worker_index
        self.attempt = attempt
        self.control_address = control_address
        self._endpoint, self._secret = parse_control_address(control_address)
        self._heartbeat_interval = heartbeat_interval
        self._driver_timeout = driver_timeout

        self.peers: dict[int, str] = {}
        self.num_workers: int | None = None
        self.assignment: Any = None
        self.stop_requested = threading.Event()
        self._welcome: Welcome | None = None
        self._welcomed = threading.Event()
        self._peers_changed = threading.Condition()
        self._inbox: queue.Queue[Message] = queue.Queue()
        self._outbox: queue.Queue[list[bytes]] = queue.Queue()
        self._closing = threading.Event()
        self._last_heard = time.monotonic()

        self._ctx = zmq.Context.instance()
        wake_address = f"inproc://tupletree-control-{os.getpid()}-{id(self)}"
        self._wake_rx = self._ctx.socket(zmq.PULL)
        self._wake_rx.bind(wake_address)
        self._wake_tx = self._ctx.socket(zmq.PUSH)
        self._wake_tx.connect(wake_address)
        self._wake_lock = threading.Lock()
        self._dealer = self._ctx.socket(zmq.DEALER)
        # A fixed routing id lets the driver's ROUTER hand a reconnecting socket its old
        # route back (ROUTER_HANDOVER) instead of treating it as a new peer.
        self._dealer.setsockopt(
            zmq.ROUTING_ID, f"w{worker_index}.a{attempt}.p{os.getpid()}".encode()
        )
        self._dealer.setsockopt(zmq.LINGER, 2000)
        self._dealer.connect(self._endpoint)
        self._thread = threading.Thread(
            target=self._io_loop, name=f"tupletree-control-w{worker_index}", daemon=True
        )
        self._thread.start()

    # ---------------------------------------------------------------- public API

    def register(
        self, address: str, info: Mapping[str, Any] | None = None, timeout: float = 30.0
    ) -> Welcome:
        """Announce this worker (its data socket ``address``, pid, host, Spark task id)
        and wait for the driver's welcome: worker count, peers known so far, assignment.
        """
        self._send_raw(
            {
                "type": protocol.REGISTER,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "address": address,
                "task_attempt_id": _task_attempt_id(),
                "info": dict(info or {}),
            }
        )
        if not self._welcomed.wait(timeout):
            raise TimeoutError(
                f"worker {self.worker_index} (attempt {self.attempt}) got no answer from "
                f"the driver at {self._endpoint} within {timeout} s of registering"
            )
        assert self._welcome is not None
        return self._welcome

    def wait_for_peers(self, timeout: float | None = 30.0) -> dict[int, str]:
        """Block until the address of every worker is known; return the peer table."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._peers_changed:
            while self.num_workers is None or len(self.peers) < self.num_workers:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"worker {self.worker_index}: knows {sorted(self.peers)} of "
                        f"{self.num_workers} peers after {timeout} s"
                    )
                self._peers_changed.wait(remaining)
            return dict(self.peers)

    def recv(self, timeout: float | None = None) -> Message | None:
        """The next message from the driver, or None after ``timeout`` seconds
        (``timeout=0`` polls; ``None`` waits forever)."""
        try:
            if timeout == 0:
                return self._inbox.get_nowait()
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def send(self, msg: Message) -> None:
        """Send a dict (it must have a ``"type"``) to the driver."""
        if "type" not in msg:
            raise ValueError(f"control messages need a 'type' key: {msg!r}")
        self._send_raw(msg)

    def report_error(self, exc: BaseException, *, fatal: bool = False) -> None:
        """Tell the driver about an error, with its traceback."""
        self._send_raw(error_message(exc, fatal=fatal))

    def log(self, line: str, level: str = "INFO") -> None:
        """Ship a log line to the driver (worker stdout goes to the executor's log)."""
        self._send_raw({"type": protocol.LOG, "level": level, "line": line})

    def close(self) -> None:
        """Flush what was sent (up to 2 s) and stop the I/O thread."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._wake()
        self._thread.join(5.0)
        with self._wake_lock:
            self._wake_tx.close(linger=0)

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------- internals

    def _send_raw(self, msg: Message) -> None:
        if self._closing.is_set():
            raise RuntimeError("ControlClient is closed")
        self._outbox.put(protocol.encode(self._secret, (self.worker_index, self.attempt, msg)))
        self._wake()

    def _wake(self) -> None:
        with self._wake_lock, contextlib.suppress(zmq.ZMQError):
            self._wake_tx.send(b"", zmq.NOBLOCK)

    def _io_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._dealer, zmq.POLLIN)
        poller.register(self._wake_rx, zmq.POLLIN)
        next_heartbeat = time.monotonic() + self._heartbeat_interval
        try:
            while True:
                self._flush_outbox()
                if self._closing.is_set():
                    break
                timeout_ms = max(0, int((next_heartbeat - time.monotonic()) * 1000))
                events = dict(poller.poll(timeout_ms))
                if self._wake_rx in events:
                    while True:
                        try:
                            self._wake_rx.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                if self._dealer in events:
                    self._drain_dealer()
                now = time.monotonic()
                if now >= next_heartbeat:
                    next_heartbeat = now + self._heartbeat_interval
                    if self._welcomed.is_set():
                        self._send_heartbeat()
                    self._check_driver(now)
        finally:
            self._dealer.close()  # LINGER (2 s) lets queued frames go out
            self._wake_rx.close(linger=0)

    def _flush_outbox(self) -> None:
        while True:
            try:
                frames = self._outbox.get_nowait()
            except queue.Empty:
                return
            self._dealer.send_multipart(frames)

    def _send_heartbeat(self) -> None:
        self._dealer.send_multipart(
            protocol.encode(
                self._secret, (self.worker_index, self.attempt, {"type": protocol.HEARTBEAT})
            )
        )

    def _check_driver(self, now: float) -> None:
        if (
            self._driver_timeout is not None
            and self._welcomed.is_set()
            and not self.stop_requested.is_set()
            and now - self._last_heard > self._driver_timeout
        ):
            self.stop_requested.set()
            self._inbox.put(
                {
                    "type": protocol.STOP,
                    "reason": f"driver silent for {self._driver_timeout} s",
                }
            )

    def _drain_dealer(self) -> None:
        while True:
            try:
                frames = self._dealer.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                msg = protocol.decode(self._secret, frames)
            except protocol.BadFrame:
                continue
            self._last_heard = time.monotonic()
            self._handle(msg)

    def _handle(self, msg: Message) -> None:
        kind = msg.get("type")
        if kind in (protocol.PING, protocol.ACK):
            return
        if kind == protocol.WELCOME:
            with self._peers_changed:
                self.num_workers = msg["num_workers"]
                self.peers.update(msg["peers"])
                self.assignment = msg.get("assignment")
                self._peers_changed.notify_all()
            self._welcome = Welcome(
                num_workers=msg["num_workers"],
                peers=dict(msg["peers"]),
                assignment=msg.get("assignment"),
            )
            self._welcomed.set()
        elif kind == protocol.PEERS:
            with self._peers_changed:
                self.peers.update(msg["peers"])
                self._peers_changed.notify_all()
        elif kind == protocol.STOP:
            self.stop_requested.set()
        self._inbox.put(msg)


def error_message(exc: BaseException, *, fatal: bool) -> Message:
    """The control message that reports ``exc`` (type, text and traceback)."""
    return {
        "type": protocol.ERROR,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(exc)),
        "fatal": fatal,
    }


def send_once(
    control_address: str, worker_index: int, attempt: int, msg: Message, timeout: float = 2.0
) -> bool:
    """Send one message on a short-lived socket and wait (up to ``timeout``) for the
    driver to acknowledge it. For the task wrapper's words before and after
    worker_main: the process may exit right after, and zmq sends in the background, so
    without the acknowledgement a last message could be lost. Returns whether it was.
    """
    return request(control_address, worker_index, attempt, msg, timeout) is not None


def request(
    control_address: str, worker_index: int, attempt: int, msg: Message, timeout: float = 2.0
) -> Message | None:
    """``send_once``, returning the driver's acknowledgement (which may carry an answer,
    e.g. how long to wait before starting), or None if none came within ``timeout``."""
    endpoint, secret = parse_control_address(control_address)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
        sock.send_multipart(
            protocol.encode(secret, (worker_index, attempt, {**msg, "want_ack": True}))
        )
        if sock.poll(int(timeout * 1000), zmq.POLLIN):
            with contextlib.suppress(protocol.BadFrame):
                reply = protocol.decode(secret, sock.recv_multipart())
                if isinstance(reply, dict) and reply.get("type") == protocol.ACK:
                    return reply
        return None
    finally:
        sock.close()
