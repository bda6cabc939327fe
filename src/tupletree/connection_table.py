"""ConnectionTable: which connections an HTTP service keeps, and which it must close.

Pure: opaque connection keys, peer addresses (strings) and ``now`` (seconds, never
decreasing) in; decisions out. ``webserver.WebServer`` does the I/O around it, for both
of tupletree's services (the DRPC server, the web view).

A connection is in one of three states:

- *idle*: just accepted, or its last response is done, and no byte of a new request
  has arrived: closed ``idle_timeout`` after it became idle;
- *reading*: a byte of a request head arrived, the head is not complete: closed
  ``header_timeout`` after that first byte (more bytes do not extend it, so trickling a
  byte every few seconds buys nothing);
- *busy*: a complete request head arrived and the application handles it: never closed
  here (the application bounds its own handlers: a body deadline, a request timeout).

Admission (``admit``), so that no client can keep the others out:

1. a peer address holding ``max_per_peer`` connections has its own oldest idle or
   reading connection closed to make room; with all of them busy, the new one is refused;
2. a service holding ``max_connections`` has its oldest idle or reading connection (any
   peer's) closed; with all of them busy, the new one is refused.

"Oldest" is the longest since the connection last made progress (accepted, a response
done, the first byte of a head). So connections that send nothing or half a head hold
no place against a newcomer, and a client that sends its request at once is displaced
only if more newcomers arrive before its head than there are older connections to
displace (a flood reconnecting faster than the service reads: the larger the pool, the
rarer). Every connection of one machine shares one address (loopback): the per-peer cap
cannot tell local clients apart, the displacing of idle ones still does.

Bounds and costs: one entry per open connection (at most ``max_connections``); every
call O(1) but ``expired``, O(1 + connections it returns).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable
from typing import NamedTuple

IDLE = "idle"
READING = "reading"
BUSY = "busy"

MAX_TIMEOUT_SECS = 86400.0


class Admission(NamedTuple):
    """``admit``'s verdict: ``admitted``; the connections to ``close`` now (displaced
    to make room, already forgotten); ``reason`` a refusal's words ("" when admitted)."""

    admitted: bool
    close: tuple[Hashable, ...]
    reason: str


class _Entry:
    __slots__ = ("peer", "since", "state")

    def __init__(self, peer: str, state: str, since: float) -> None:
        self.peer, self.state, self.since = peer, state, since


class ConnectionTable:
    """The open connections of one service (see the module docstring)."""

    def __init__(
        self,
        max_connections: int,
        max_per_peer: int,
        header_timeout: float,
        idle_timeout: float,
    ) -> None:
        check_count("max_connections", max_connections, 1, 10**6)
        check_count("max_connections_per_peer", max_per_peer, 1, max_connections)
        check_timeout("header_timeout", header_timeout)
        check_timeout("idle_timeout", idle_timeout)
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.header_timeout = float(header_timeout)
        self.idle_timeout = float(idle_timeout)
        self._entries: dict[Hashable, _Entry] = {}
        # Connections that may be displaced or expire, oldest progress first: all of
        # them, each kind (for its own timeout), and each peer's.
        self._waiting: OrderedDict[Hashable, None] = OrderedDict()
        self._by_state: dict[str, OrderedDict[Hashable, None]] = {
            IDLE: OrderedDict(),
            READING: OrderedDict(),
        }
        self._peers: dict[str, OrderedDict[Hashable, None]] = {}
        self._peer_counts: dict[str, int] = {}

    # -- events -----------------------------------------------------------------------

    def admit(self, conn: Hashable, peer: str, now: float) -> Admission:
        """A connection from ``peer`` was accepted: keep it (idle), displacing others if
        need be, or refuse it. The displaced are forgotten here; the caller closes them."""
        if conn in self._entries:
            raise ValueError(f"connection {conn!r} was admitted already")
        close: list[Hashable] = []
        if self._peer_counts.get(peer, 0) >= self.max_per_peer:
            victim = self._oldest(self._peers.get(peer))
            if victim is None:
                return Admission(
                    False,
                    (),
                    f"{peer} holds {self._peer_counts[peer]} connections, all busy "
                    f"(at most {self.max_per_peer} per client address)",
                )
            self.remove(victim)
            close.append(victim)
        # (A peer's displaced connection made room in the total as well.)
        if len(self._entries) >= self.max_connections:
            victim = self._oldest(self._waiting)
            if victim is None:
                return Admission(
                    False,
                    (),
                    f"{len(self._entries)} connections open, all busy "
                    f"(at most {self.max_connections})",
                )
            self.remove(victim)
            close.append(victim)
        self._entries[conn] = _Entry(peer, IDLE, now)
        self._peer_counts[peer] = self._peer_counts.get(peer, 0) + 1
        self._wait(conn, peer, IDLE)
        return Admission(True, tuple(close), "")

    def started(self, conn: Hashable, now: float) -> None:
        """A byte of a request head arrived: an idle connection starts reading (its
        header deadline runs from now); otherwise nothing changes."""
        entry = self._entries.get(conn)
        if entry is None or entry.state != IDLE:
            return
        self._unwait(conn, entry)
        entry.state, entry.since = READING, now
        self._wait(conn, entry.peer, READING)

    def busy(self, conn: Hashable) -> None:
        """A complete request head arrived: the application handles it."""
        entry = self._entries.get(conn)
        if entry is None or entry.state == BUSY:
            return
        self._unwait(conn, entry)
        entry.state = BUSY

    def idle(self, conn: Hashable, now: float) -> None:
        """Its response is done: idle from now."""
        entry = self._entries.get(conn)
        if entry is None:
            return
        if entry.state != BUSY:
            self._unwait(conn, entry)
        entry.state, entry.since = IDLE, now
        self._wait(conn, entry.peer, IDLE)

    def remove(self, conn: Hashable) -> None:
        """It is gone (closed by either side); unknown connections are ignored."""
        entry = self._entries.pop(conn, None)
        if entry is None:
            return
        if entry.state != BUSY:
            self._unwait(conn, entry)
        n = self._peer_counts[entry.peer] - 1
        if n:
            self._peer_counts[entry.peer] = n
        else:
            del self._peer_counts[entry.peer]

    def expired(self, now: float) -> list[Hashable]:
        """The connections past their deadline, forgotten here; the caller closes them."""
        out: list[Hashable] = []
        for state, timeout in ((IDLE, self.idle_timeout), (READING, self.header_timeout)):
            queue = self._by_state[state]
            while queue:
                conn = next(iter(queue))
                if now - self._entries[conn].since < timeout:
                    break
                self.remove(conn)
                out.append(conn)
        return out

    # -- observation --------------------------------------------------------------------

    def state(self, conn: Hashable) -> str | None:
        entry = self._entries.get(conn)
        return None if entry is None else entry.state

    def peer_count(self, peer: str) -> int:
        return self._peer_counts.get(peer, 0)

    def next_deadline(self) -> float | None:
        """When the earliest deadline falls (None: no idle or reading connection)."""
        times = []
        for state, timeout in ((IDLE, self.idle_timeout), (READING, self.header_timeout)):
            queue = self._by_state[state]
            if queue:
                times.append(self._entries[next(iter(queue))].since + timeout)
        return min(times, default=None)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, conn: object) -> bool:
        return conn in self._entries

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _oldest(queue: OrderedDict[Hashable, None] | None) -> Hashable | None:
        return next(iter(queue)) if queue else None

    def _wait(self, conn: Hashable, peer: str, state: str) -> None:
        self._waiting[conn] = None
        self._by_state[state][conn] = None
        self._peers.setdefault(peer, OrderedDict())[conn] = None

    def _unwait(self, conn: Hashable, entry: _Entry) -> None:
        del self._waiting[conn]
        del self._by_state[entry.state][conn]
        peers = self._peers[entry.peer]
        del peers[conn]
        if not peers:
            del self._peers[entry.peer]


def check_count(name: str, value: object, minimum: int, maximum: int) -> None:
    """``value`` must be an int from ``minimum`` to ``maximum``; ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be from {minimum} to {maximum}, got {value}")


def check_timeout(name: str, value: object, maximum: float = MAX_TIMEOUT_SECS) -> None:
    """``value`` must be a finite number of seconds > 0 and at most ``maximum`` (NaN and
    infinity refused: a NaN deadline never passes); ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(
            f"{name} must be a number of seconds, got {type(value).__name__} {value!r}"
        )
    if not math.isfinite(value) or not 0 < value <= maximum:
        raise ValueError(f"{name} must be a number of seconds > 0 and <= {maximum:g}, got {value}")
