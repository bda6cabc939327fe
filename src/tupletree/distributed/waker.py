"""Waking a thread that waits in a zmq poll, from any other thread.

The control service and the control client each own their zmq socket on an I/O thread
(zmq sockets must not be shared between threads); other threads queue what to send
and ``wake`` that thread, which polls ``rx`` with its socket and ``drain``s it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading

import zmq

# Names are numbered, not taken from id(self): a Waker freed while its I/O thread had
# not yet closed its PULL socket left the name bound, and a new Waker at the same id
# failed with "Address already in use" (seen once in tests/distributed).
_names = itertools.count()


class Waker:
    """An inproc PUSH/PULL pair: ``wake`` from any thread, ``rx`` polled and ``drain``ed
    by the I/O thread, which also closes it (``close_rx``); ``close`` ends the sending
    side (later wakes do nothing)."""

    def __init__(self, ctx: zmq.Context) -> None:
        address = f"inproc://tupletree-wake-{os.getpid()}-{next(_names)}"
        self.rx = ctx.socket(zmq.PULL)
        self.rx.bind(address)
        self._tx: zmq.Socket | None = ctx.socket(zmq.PUSH)
        self._tx.connect(address)
        self._lock = threading.Lock()

    def wake(self) -> None:
        with self._lock:
            if self._tx is not None:
                with contextlib.suppress(zmq.ZMQError):
                    self._tx.send(b"", zmq.NOBLOCK)

    def drain(self) -> None:
        """Read every pending wake-up (on the I/O thread)."""
        with contextlib.suppress(zmq.Again):
            while True:
                self.rx.recv(zmq.NOBLOCK)

    def close(self) -> None:
        with self._lock:
            if self._tx is not None:
                self._tx.close(linger=0)
                self._tx = None

    def close_rx(self) -> None:
        self.rx.close(linger=0)
