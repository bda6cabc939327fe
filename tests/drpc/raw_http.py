"""Raw-socket helpers for the DRPC server's tests: what an attacker sends, where an HTTP
library would not send it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

from tupletree.drpc import DRPCServer
from tupletree.drpc.pending import PendingRequests

DEADLINE = 30.0  # generous: the machine is shared; nothing here asserts a duration


def poll(condition: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"still not true after {deadline:g} s: {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def serving(book: PendingRequests, function: str, fn: Callable[[str], str]) -> Iterator[list[str]]:
    """A stand-in topology on a thread: fetches ``function`` (as a remote spout would)
    and answers ``fn(args)``; yields the list of arguments it saw."""
    seen: list[str] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            for rid, args in book.fetch(function, 16, 0.1):
                seen.append(args)
                book.respond(rid, fn(args))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(5)


def connect(server: DRPCServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=DEADLINE)
    sock.settimeout(10)
    return sock


def send(sock: socket.socket, data: bytes) -> None:
    """Send what the server still reads (it may answer and close first)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def read_to_close(sock: socket.socket) -> tuple[bytes, bool]:
    """Everything the server sends until it closes; (data, closed) - closed is False if
    it kept the connection open for 10 s."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionResetError:
        pass
    return data, True


def read_response(sock: socket.socket) -> bytes:
    """One response (head and a Content-Length body), leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return data


def statuses(data: bytes) -> list[int]:
    """The status codes of the HTTP responses in ``data``."""
    return [int(line.split()[1]) for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.")]


def call_and_wait(server: DRPCServer, n: int) -> list[socket.socket]:
    """``n`` connections, each with a ``POST /drpc/f`` (argument "x") the server holds."""
    socks = [connect(server) for _ in range(n)]
    for sock in socks:
        send(sock, b"POST /drpc/f HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx")
    poll(lambda: server.pending_requests() == n, f"{n} requests waiting")
    return socks


def error_kind(data: bytes) -> str | None:
    for line in data.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"x-drpc-error":
            return value.strip().decode()
    return None
