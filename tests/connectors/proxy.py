"""TcpProxy: a TCP forwarder on 127.0.0.1 whose ``cut()`` drops every live connection,
to test what connectors do when the broker's connections go away mid-run, without
restarting a broker other tests share.

Threads and blocking sockets: one thread accepts, two pump each connection (one per
direction). A connection whose one side closes is closed on both sides, as a dropped
connection is. New connections are accepted again right after a cut.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

Address = tuple[str, int]


class TcpProxy:
    """``with TcpProxy(upstream) as proxy:`` clients connect to ``proxy.address``;
    ``upstream`` is an address, or a function giving it at each new connection (for a
    broker started after the proxy, told to advertise the proxy's address)."""

    def __init__(self, upstream: Address | Callable[[], Address]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0  # connections forwarded since the start
        self.cuts = 0
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def cut(self) -> int:
        """Drop every live connection (a reset to both ends); returns how many sockets
        (two per connection) were dropped."""
        with self._lock:
            live, self._live = self._live, set()
            self.cuts += 1
        for sock in live:
            _reset(sock)
        return len(live)

    def live(self) -> int:
        with self._lock:
            return len(self._live) // 2

    def close(self) -> None:
        self._closed.set()
        # shutdown, not just close: it wakes the accept() blocked in the other thread.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.cut()
        self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = self._upstream() if callable(self._upstream) else self._upstream
            try:
                server = socket.create_connection(upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._live.update((client, server))
                self.accepted += 1
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        # One side is gone: so is the connection, for the other side too.
        with self._lock:
            self._live.discard(src)
            self._live.discard(dst)
        _reset(src)
        _reset(dst)


def _reset(sock: socket.socket) -> None:
    """Abort the connection: linger 0 makes close() send a reset rather than a FIN, as a
    broker's dropped connection looks; shutdown first wakes a pump blocked in recv()."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
