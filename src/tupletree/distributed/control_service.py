"""The driver's control socket: a ZeroMQ ROUTER on a thread of its own.

It authenticates every frame before anything is unpickled (``control.decode_envelope``),
hands each envelope to a handler (the launcher's, into its ``DriverState``) and sends
what the handler returns; it pings the registered workers every ``ping_interval``
seconds, so they know the driver is alive, and then calls ``on_tick(now)`` (the
state's hang checks). ``send`` may be called from any thread.

Routes: a worker's DEALER picks a random, unguessable routing id, and the ROUTER runs
without ``ROUTER_HANDOVER``, so a second connection that claims an id in use is refused
by ZeroMQ itself instead of taking the route over; and the driver's state binds a route
to a worker only on that worker's signed registration. Refused frames are counted per
claimed sender (bounded) and reported at most every ``Rejections.report_every`` seconds
(on the ping timer too, so the last of a burst is not left unsaid), to the log and
through ``on_rejected``. Frames over ``MAX_FRAME_BYTES`` are refused by
ZeroMQ before they are read (the connection that sent one is dropped).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable

import zmq

from tupletree.distributed import control
from tupletree.distributed.control import BadFrame, Envelope, Ping, ToWorker
from tupletree.distributed.registration import Send
from tupletree.distributed.rejections import Rejections
from tupletree.distributed.waker import Waker

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024 * 1024  # a metrics report carries every task's custom metrics

Handler = Callable[[bytes, Envelope, float], list[Send]]


class ControlService:
    """A bound ROUTER and its I/O thread (``start``/``close``)."""

    def __init__(
        self,
        name: str,
        secret: bytes,
        handler: Handler,
        routes: Callable[[], list[bytes]],
        *,
        ping_interval: float = 1.0,
        on_rejected: Callable[[str], None] | None = None,
        on_tick: Callable[[float], None] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self.name = name
        self._secret = secret
        self._handler = handler
        self._routes = routes
        self._ping_interval = ping_interval
        self._on_rejected = on_rejected
        self._on_tick = on_tick
        self._max_frame_bytes = max_frame_bytes
        self.rejections = Rejections("control frames")
        self._outbox: queue.Queue[tuple[bytes, list[bytes]]] = queue.Queue()
        self._ctx = zmq.Context.instance()
        self._waker: Waker | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.endpoint = ""

    def start(self, bind_ip: str) -> int:
        """Bind on ``bind_ip`` (a random port, returned) and start the I/O thread."""
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.MAXMSGSIZE, self._max_frame_bytes)
        port = router.bind_to_random_port(f"tcp://{bind_ip}")
        waker = self._waker = Waker(self._ctx)
        self.endpoint = f"tcp://{bind_ip}:{port}"
        self._thread = threading.Thread(
            target=self._loop,
            args=(router, waker),
            name=f"tupletree-control-{self.name}",
            daemon=True,
        )
        self._thread.start()
        return port

    def send(self, route: bytes, msg: ToWorker) -> None:
        """Queue ``msg`` for the worker behind ``route`` (any thread)."""
        if self._closed:
            return
        self._outbox.put((route, control.encode(self._secret, msg)))
        self._wake()

    def close(self) -> None:
        """Send what is queued, stop the thread and close the socket."""
        self._closed = True
        self._wake()
        if self._thread is not None:
            self._thread.join(5.0)
        if self._waker is not None:
            self._waker.close()

    # -- the I/O thread ---------------------------------------------------------------

    def _wake(self) -> None:
        if self._waker is not None:
            self._waker.wake()

    def _loop(self, router: zmq.Socket, waker: Waker) -> None:
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(waker.rx, zmq.POLLIN)
        next_ping = time.monotonic() + self._ping_interval
        try:
            while not self._closed:
                events = dict(poller.poll(int(self._ping_interval * 1000)))
                if waker.rx in events:
                    waker.drain()
                self._flush_outbox(router)
                if router in events:
                    self._drain(router)
                now = time.monotonic()
                if now >= next_ping:
                    next_ping = now + self._ping_interval
                    ping = control.encode(self._secret, Ping())
                    for route in self._routes():
                        router.send_multipart([route, *ping])
                    self._report(self.rejections.due(now))
                    if self._on_tick is not None:
                        self._on_tick(now)
        except zmq.ContextTerminated:
            pass
        except Exception:
            log.exception("%s: control loop crashed", self.name)
        finally:
            self._flush_outbox(router)
            router.close(linger=0)
            waker.close_rx()

    def _flush_outbox(self, router: zmq.Socket) -> None:
        while True:
            try:
                route, frames = self._outbox.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(zmq.ZMQError):  # a peer gone meanwhile
                router.send_multipart([route, *frames])

    def _drain(self, router: zmq.Socket) -> None:
        while True:
            try:
                route, *frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            now = time.monotonic()
            try:
                envelope = control.decode_envelope(self._secret, frames)
            except BadFrame as exc:
                self._reject(route, str(exc), now)
                continue
            try:
                sends = self._handler(route, envelope, now)
            except Exception:
                log.exception("%s: handling %r failed", self.name, envelope)
                continue
            for send in sends:
                with contextlib.suppress(zmq.ZMQError):
                    router.send_multipart([send.route, *control.encode(self._secret, send.message)])

    def _reject(self, route: bytes, reason: str, now: float) -> None:
        self._report(self.rejections.reject(route.hex(), reason, now))

    def _report(self, report: str | None) -> None:
        if report is None:
            return
        log.warning("%s: %s", self.name, report)
        if self._on_rejected is not None:
            self._on_rejected(report)
