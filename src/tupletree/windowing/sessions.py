"""SessionManager: session windows, beyond Storm (which has none). Pure, like
manager.WindowManager, and driven the same way (``add``, ``on_watermark``,
``advance``), yielding the same ``Fired``/``Expired`` outcomes.

A session is a run of events of one key with no gap of ``gap`` ms or more between two
consecutive timestamps. It closes once time (the watermark in event time, the clock in
processing time) reaches its newest timestamp plus the gap: then no event that is not
late can join it. It fires once, as a window holding all its events in arrival order
(``new`` = all of them, ``expired`` = none, ``start_ts`` = its oldest timestamp,
``end_ts`` = its newest plus the gap, as Flink's session windows), and its events
expire right after (``Expired`` follows ``Fired``).

Keys: sessions are kept per key (``add(item, ts, key)``); the bolt derives the key from
the tuple (fields or a function) or uses one key for its whole input. An event that
falls within ``gap`` of two sessions of its key (out of order, event time) merges them.

Costs and bounds: ``add`` is O(open sessions of the key) (usually one); closing is a
heap of close times, one entry per open session (an extended session is rescheduled
lazily when its old entry comes due). What is held is ``len(manager)`` events in open
sessions; the bolt refuses input beyond its cap, and refused input does not extend a
session, so a session that outgrew the cap still closes ``gap`` after its last
accepted event.

State: ``state(encode)`` gives ``{"seq", "sessions": [[key, [[seq, ts, item], ...]],
...]}`` and ``restore(state, decode)`` rebuilds the sessions and their schedule.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from tupletree.windowing.manager import NOTHING, Expired, Fired, Outcome


class Session:
    __slots__ = ("closed", "events", "key", "last", "start")

    def __init__(self, key: Hashable, seq: int, ts: int, item: Any) -> None:
        self.key = key
        self.start = ts
        self.last = ts
        self.events: list[tuple[int, int, Any]] = [(seq, ts, item)]
        self.closed = False


class SessionManager:
    def __init__(self, gap_ms: int) -> None:
        self.gap = gap_ms
        self.sessions: dict[Hashable, list[Session]] = {}
        self._heap: list[tuple[int, int, Session]] = []
        self._order = itertools.count()  # ties in the heap: the order sessions began
        self._seq = 0
        self._held = 0

    def __len__(self) -> int:
        """Events held in open sessions."""
        return self._held

    def open_sessions(self) -> int:
        return sum(len(s) for s in self.sessions.values())

    def _schedule(self, session: Session) -> None:
        heapq.heappush(self._heap, (session.last + self.gap, next(self._order), session))

    def add(self, item: Any, ts: int, key: Hashable = None) -> Iterable[Outcome]:
        """Add an event of ``key``; it never fires a window by itself (time does)."""
        # The key is looked up first: one that cannot be hashed raises here, before
        # the event is counted as held (counted, each such tuple would use up a slot of
        # the window's cap for good).
        mine = self.sessions.get(key)
        seq = self._seq
        self._seq += 1
        self._held += 1
        gap = self.gap
        if mine is None:
            session = Session(key, seq, ts, item)
            self.sessions[key] = [session]
            self._schedule(session)
            return NOTHING
        touching = [s for s in mine if s.start - gap < ts < s.last + gap]
        if not touching:
            session = Session(key, seq, ts, item)
            mine.append(session)
            mine.sort(key=lambda s: s.start)
            self._schedule(session)
            return NOTHING
        session = touching[0]
        session.events.append((seq, ts, item))
        if ts < session.start:
            session.start = ts
        if ts > session.last:
            session.last = ts  # its heap entry is now early: rescheduled when it pops
        for other in touching[1:]:  # the event bridges sessions: one session now
            other.closed = True
            mine.remove(other)
            session.events = list(heapq.merge(session.events, other.events))
            session.start = min(session.start, other.start)
            session.last = max(session.last, other.last)
        return NOTHING

    def close_until(self, t: int) -> Iterator[Outcome]:
        """Close, in order of their close times, every session whose newest timestamp
        plus the gap is at or before ``t``."""
        heap = self._heap
        gap = self.gap
        while heap and heap[0][0] <= t:
            due, _, session = heapq.heappop(heap)
            if session.closed:
                continue
            if session.last + gap != due:
                self._schedule(session)  # extended since: its real close time
                continue
            session.closed = True
            mine = self.sessions[session.key]
            mine.remove(session)
            if not mine:
                del self.sessions[session.key]
            self._held -= len(session.events)
            items = [item for _, _, item in session.events]
            seqs = [seq for seq, _, _ in session.events]
            yield Fired(items, list(items), [], session.start, due, seqs, session.key)
            yield Expired(items)

    def on_watermark(self, watermark: int) -> Iterable[Outcome]:
        return self.close_until(watermark)

    def advance(self, now: int) -> Iterable[Outcome]:
        if not self._heap or self._heap[0][0] > now:
            return NOTHING
        return self.close_until(now)

    def next_due(self) -> int | None:
        """The earliest close time scheduled (possibly stale: then ``advance`` only
        reschedules)."""
        return self._heap[0][0] if self._heap else None

    def held_items(self) -> Iterator[Any]:
        """Every item held in an open session."""
        for mine in self.sessions.values():
            for session in mine:
                for _, _, item in session.events:
                    yield item

    def remove(self, seqs: Iterable[int]) -> int:
        """A fired session already left; nothing to take out."""
        return 0

    def state(self, encode: Callable[[Any], Any] = lambda item: item) -> dict[str, Any]:
        return {
            "seq": self._seq,
            "sessions": [
                [key, [[seq, ts, encode(item)] for seq, ts, item in s.events]]
                for key, mine in self.sessions.items()
                for s in mine
            ],
        }

    def restore(
        self, state: dict[str, Any], decode: Callable[[Any], Any] = lambda item: item
    ) -> None:
        self.sessions = {}
        self._heap = []
        self._held = 0
        for key, events in state["sessions"]:
            key = tuple(key) if isinstance(key, list) else key
            first = events[0]
            session = Session(key, first[0], first[1], decode(first[2]))
            for seq, ts, item in events[1:]:
                session.events.append((seq, ts, decode(item)))
                session.start = min(session.start, ts)
                session.last = max(session.last, ts)
            self.sessions.setdefault(key, []).append(session)
            self._held += len(events)
            self._schedule(session)
        for mine in self.sessions.values():
            mine.sort(key=lambda s: s.start)
        self._seq = state["seq"]
