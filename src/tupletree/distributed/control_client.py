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
                elif isinstance(msg, Stop): break
                elif isinstance(msg, Peers): ...reconnect to msg.changed...
            if control.driver_lost: raise DriverLost(control.driver_lost)

The messages are ``tupletree.distributed.control``'s. The client owns its zmq socket on
a background thread (zmq sockets must not be shared between threads, and a worker's
executors are many threads), so every method here is safe to call from any thread. It
heartbeats on its own, and turns a driver that went silent into a ``Stop`` and sets
``driver_lost``: a worker never outlives its topology, and never ends quietly when it
lost its driver (the topology's worker ends with ``DriverLost``, which is reported and
fails its task, so Spark runs it again).

Its DEALER's routing id is random (16 bytes from ``secrets``) and kept for the
socket's life, so a reconnect keeps its route, and nobody can guess it to claim it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import socket
import threading
import time
import traceback
from collections.abc import Callable

import zmq

from tupletree.distributed import control
from tupletree.distributed.control import (
    Ack,
    BadFrame,
    Envelope,
    ErrorReport,
    FromWorker,
    Heartbeat,
    LogLine,
    Peers,
    Ping,
    Register,
    Stop,
    ToWorker,
    Welcome,
)
from tupletree.distributed.waiting import wait_for
from tupletree.distributed.waker import Waker

# A driver's commands are small; a peer table is one address per worker.
MAX_COMMAND_BYTES = 16 * 1024 * 1024

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

    ``SPARK_LOCAL_IP`` first, when it names one address: it is Spark's own setting for
    the address this host's Spark binds (``spark-env.sh``), and executors and their
    Python workers inherit it from the Spark worker. Else, with a driver on loopback
    (local mode), 127.0.0.1. Else the local address of the interface that routes to the
    driver, found by connecting a UDP socket (which sends nothing), so multi-homed
    executors pick the reachable one.
    """
    local_ip = os.environ.get("SPARK_LOCAL_IP", "").strip()
    if local_ip and local_ip not in ("0.0.0.0", "::"):
        return local_ip
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


class DriverLost(RuntimeError):
    """The driver was silent for longer than the worker waits: it died, or the
    worker's route to it was lost. Raised by a worker so that it ends reported."""


class ControlClient:
    """A worker's connection to the driver's control service.

    Register with ``register(data_address)``; then ``recv`` yields the driver's
    messages (``Welcome``, ``Peers`` updates, ``Stop``, ``Activate``, ``Deactivate``);
    ``send``/``report_error``/``log`` go the other way. Thread-safe.
    ``stop_requested`` is set once a ``Stop`` arrived or the driver was silent for
    ``driver_timeout`` seconds; in the latter case ``driver_lost`` says so.

    ``arrivals``: a socket that turns readable each time a message is queued for
    ``recv``, for a worker's idle poll beside its data socket (then ``clear_arrivals``
    once it saw it readable). So a worker can wait as long as its own timers allow and
    still act on the driver's Activate, Deactivate, Peers or Stop at once.
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
        self._endpoint, self._secret = parse_control_address(control_address)
        self._heartbeat_interval = heartbeat_interval
        self._driver_timeout = driver_timeout

        self.peers: dict[int, str] = {}
        self.num_workers: int | None = None
        self.stop_requested = threading.Event()
        self.driver_lost: str | None = None
        # Frames that failed authentication or did not parse (in the worker's reports).
        self.frames_refused = 0
        self._welcome: Welcome | None = None
        self._welcomed = threading.Event()
        self._peers_changed = threading.Condition()
        self._inbox: queue.Queue[ToWorker] = queue.Queue()
        self._outbox: queue.Queue[list[bytes]] = queue.Queue()
        self._closing = threading.Event()
        self._last_heard = time.monotonic()

        self._ctx = zmq.Context.instance()
        self._waker = Waker(self._ctx)
        self._arrived = Waker(self._ctx)  # its rx is the worker's, polled in its thread
        self._dealer = self._ctx.socket(zmq.DEALER)
        self._dealer.setsockopt(zmq.ROUTING_ID, secrets.token_bytes(16))
        self._dealer.setsockopt(zmq.LINGER, 2000)
        self._dealer.setsockopt(zmq.MAXMSGSIZE, MAX_COMMAND_BYTES)
        self._dealer.connect(self._endpoint)
        self._thread = threading.Thread(
            target=self._io_loop, name=f"tupletree-control-w{worker_index}", daemon=True
        )
        self._thread.start()

    # ---------------------------------------------------------------- public API

    def register(self, address: str, timeout: float = 30.0) -> Welcome:
        """Announce this worker (its data socket ``address``, pid, host) and wait for the
        driver's welcome: worker count and the peers known so far."""
        self._send_raw(Register(pid=os.getpid(), host=socket.gethostname(), address=address))
        if not self._welcomed.wait(timeout):
            raise TimeoutError(
                f"worker {self.worker_index} (attempt {self.attempt}) got no answer from "
                f"the driver at {self._endpoint} within {timeout} s of registering"
            )
        assert self._welcome is not None
        return self._welcome

    def wait_for_peers(self, timeout: float | None = 30.0) -> dict[int, str]:
        """Block until the address of every worker is known; return the peer table."""

        def known() -> dict[int, str] | None:
            complete = self.num_workers is not None and len(self.peers) >= self.num_workers
            return dict(self.peers) if complete else None

        peers = wait_for(self._peers_changed, known, timeout)
        if peers is None:
            raise TimeoutError(
                f"worker {self.worker_index}: knows {sorted(self.peers)} of "
                f"{self.num_workers} peers after {timeout} s"
            )
        return peers

    def recv(self, timeout: float | None = None) -> ToWorker | None:
        """The next message from the driver, or None after ``timeout`` seconds
        (``timeout=0`` polls; ``None`` waits forever)."""
        try:
            if timeout == 0:
                return self._inbox.get_nowait()
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    @property
    def arrivals(self) -> zmq.Socket:
        """Readable once a message waits for ``recv`` (see the class docstring); poll
        it only from the thread that calls ``recv`` and ``close``."""
        return self._arrived.rx

    def clear_arrivals(self) -> None:
        """Read the wake-ups ``arrivals`` holds, so the next poll waits again. The
        messages themselves stay queued for ``recv``."""
        self._arrived.drain()

    def send(self, msg: FromWorker) -> None:
        """Send a message of the control protocol to the driver."""
        if not isinstance(msg, control.FROM_WORKER):
            raise TypeError(
                f"not a message of the control protocol: {msg!r} (see "
                "tupletree.distributed.control.FromWorker)"
            )
        self._send_raw(msg)

    def report_error(self, exc: BaseException, *, fatal: bool = False) -> None:
        """Tell the driver about an error, with its traceback."""
        self._send_raw(error_message(exc, fatal=fatal))

    def log(self, line: str, level: str = "INFO") -> None:
        """Ship a log line to the driver (worker stdout goes to the executor's log)."""
        self._send_raw(LogLine(level, line))

    def close(self) -> None:
        """Flush what was sent (up to 2 s) and stop the I/O thread."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._waker.wake()
        self._thread.join(5.0)
        self._waker.close()
        self._arrived.close()
        self._arrived.close_rx()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---------------------------------------------------------------- internals

    def _send_raw(self, msg: FromWorker) -> None:
        if self._closing.is_set():
            raise RuntimeError("ControlClient is closed")
        self._outbox.put(self._frames(msg))
        self._waker.wake()

    def _frames(self, msg: FromWorker) -> list[bytes]:
        return control.encode(self._secret, Envelope(self.worker_index, self.attempt, msg))

    def _io_loop(self) -> None:
        poller = zmq.Poller()
        poller.register(self._dealer, zmq.POLLIN)
        poller.register(self._waker.rx, zmq.POLLIN)
        next_heartbeat = time.monotonic() + self._heartbeat_interval
        try:
            while True:
                self._flush_outbox()
                if self._closing.is_set():
                    break
                timeout_ms = max(0, int((next_heartbeat - time.monotonic()) * 1000))
                events = dict(poller.poll(timeout_ms))
                if self._waker.rx in events:
                    self._waker.drain()
                if self._dealer in events:
                    self._drain_dealer()
                now = time.monotonic()
                if now >= next_heartbeat:
                    next_heartbeat = now + self._heartbeat_interval
                    if self._welcomed.is_set():
                        self._dealer.send_multipart(self._frames(Heartbeat()))
                    self._check_driver(now)
        finally:
            self._dealer.close()  # LINGER (2 s) lets queued frames go out
            self._waker.close_rx()

    def _flush_outbox(self) -> None:
        while True:
            try:
                frames = self._outbox.get_nowait()
            except queue.Empty:
                return
            self._dealer.send_multipart(frames)

    def _check_driver(self, now: float) -> None:
        if (
            self._driver_timeout is not None
            and self._welcomed.is_set()
            and not self.stop_requested.is_set()
            and now - self._last_heard > self._driver_timeout
        ):
            self.driver_lost = (
                f"worker {self.worker_index} (attempt {self.attempt}) heard nothing from "
                f"the driver at {self._endpoint} for {self._driver_timeout} s"
            )
            self.stop_requested.set()
            self._deliver(Stop(self.driver_lost))

    def _drain_dealer(self) -> None:
        while True:
            try:
                frames = self._dealer.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                msg = control.decode_command(self._secret, frames)
            except BadFrame:
                self.frames_refused += 1
                continue
            self._last_heard = time.monotonic()
            self._handle(msg)

    def _handle(self, msg: ToWorker) -> None:
        if isinstance(msg, (Ping, Ack)):
            return
        if isinstance(msg, Welcome):
            with self._peers_changed:
                self.num_workers = msg.num_workers
                self.peers.update(msg.peers)
                self._peers_changed.notify_all()
            self._welcome = msg
            self._welcomed.set()
        elif isinstance(msg, Peers):
            with self._peers_changed:
                self.peers.update(msg.peers)
                self._peers_changed.notify_all()
        elif isinstance(msg, Stop):
            self.stop_requested.set()
        self._deliver(msg)

    def _deliver(self, msg: ToWorker) -> None:
        """Queue ``msg`` for ``recv``, then wake whoever polls ``arrivals``: in this
        order, so a poll that returns finds the message there."""
        self._inbox.put(msg)
        self._arrived.wake()


def error_message(exc: BaseException, *, fatal: bool) -> ErrorReport:
    """The control message that reports ``exc`` (type, text and traceback)."""
    return ErrorReport(
        f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc)), fatal
    )


def send_once(
    control_address: str, worker_index: int, attempt: int, msg: FromWorker, timeout: float = 2.0
) -> bool:
    """Send one message on a short-lived socket and wait (up to ``timeout``) for the
    driver to acknowledge it. For the task wrapper's words before and after
    worker_main: the process may exit right after, and zmq sends in the background, so
    without the acknowledgement a last message could be lost. Returns whether it was.
    """
    return request(control_address, worker_index, attempt, msg, timeout) is not None


def request(
    control_address: str, worker_index: int, attempt: int, msg: FromWorker, timeout: float = 2.0
) -> Ack | None:
    """``send_once``, returning the driver's ``Ack`` (which may carry an answer, e.g. how
    long to wait before starting), or None if none came within ``timeout``."""
    endpoint, secret = parse_control_address(control_address)
    sock = zmq.Context.instance().socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_COMMAND_BYTES)
        sock.connect(endpoint)
        sock.send_multipart(
            control.encode(secret, Envelope(worker_index, attempt, msg, want_ack=True))
        )
        if sock.poll(int(timeout * 1000), zmq.POLLIN):
            with contextlib.suppress(BadFrame):
                reply = control.decode_command(secret, sock.recv_multipart())
                return reply if isinstance(reply, Ack) else None
        return None
    finally:
        sock.close()
