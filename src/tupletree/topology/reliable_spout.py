"""ReliableSpout: a spout base that replays failed messages, then dead-letters them.

Storm leaves replay to the spout. This base keeps each emitted message's values by
msg id until it is acked; on ``fail`` (an explicit fail downstream, or a timeout) it
re-emits the same values with the same msg id, up to ``max_retries`` times; after that
it hands the message to ``dead_letter`` instead of dropping it silently.

Subclasses implement ``next_message() -> (msg_id, values) | None`` and may override
``dead_letter`` (default: keep in ``self.dead_letters`` and log) and ``on_ack``.
A subclass that overrides ``open`` must call ``super().open(conf, context, collector)``.
The messages given up on are counted in the ``retries_exhausted`` metric
(``cluster.metrics(name)[component]["custom"]["retries_exhausted"]``, per task).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from tupletree.topology.components import DEFAULT_STREAM, Spout

log = logging.getLogger("tupletree")


class ReliableSpout(Spout):
    max_retries: int = 3
    stream: str = DEFAULT_STREAM

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._in_flight: dict[Any, list[Any]] = {}  # msg_id -> [values, failures]
        self._replay: deque[Any] = deque()
        self.dead_letters: list[tuple[Any, list[Any], int]] = []
        self.retries_exhausted = 0
        if context is not None:
            context.register_metric("retries_exhausted", self._retries_exhausted)

    def next_message(self) -> tuple[Any, list[Any]] | None:
        """Return the next ``(msg_id, values)`` to emit, or None if there is none now."""
        return None

    def next_tuple(self) -> None:
        if self._replay:
            msg_id = self._replay.popleft()
            entry = self._in_flight.get(msg_id)
            if entry is not None:
                self._emit(msg_id, entry[0])
            return
        message = self.next_message()
        if message is None:
            return
        msg_id, values = message
        if msg_id is None:
            raise ValueError("ReliableSpout.next_message must give every message a msg_id")
        if msg_id in self._in_flight:
            raise ValueError(f"ReliableSpout: msg_id {msg_id!r} is already in flight")
        # Emitted as a copy: inside a worker a tuple's values list is the one emitted, so
        # a bolt that changes it would otherwise change what a replay sends.
        values = list(values)
        self._in_flight[msg_id] = [values, 0]
        self._emit(msg_id, values)

    def _emit(self, msg_id: Any, values: list[Any]) -> None:
        """Emit a kept message; an emit that raises counts as a failure of it (replayed,
        or dead-lettered past ``max_retries``): no tree exists to time it out."""
        try:
            self.collector.emit(list(values), msg_id=msg_id, stream=self.stream)
        except BaseException:
            self.fail(msg_id)
            raise

    def ack(self, msg_id: Any) -> None:
        if self._in_flight.pop(msg_id, None) is not None:
            self.on_ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        entry = self._in_flight.get(msg_id)
        if entry is None:
            return
        entry[1] += 1
        if entry[1] > self.max_retries:
            del self._in_flight[msg_id]
            self.retries_exhausted += 1
            self.dead_letter(msg_id, entry[0], entry[1])
        else:
            self._replay.append(msg_id)

    def _retries_exhausted(self) -> int:
        return self.retries_exhausted

    def on_ack(self, msg_id: Any) -> None:
        """Called once a message's tree completed (e.g. to ack it at the source)."""

    def dead_letter(self, msg_id: Any, values: list[Any], failures: int) -> None:
        """Called when a message failed more than ``max_retries`` times."""
        log.error("message %r dead-lettered after %d failures", msg_id, failures)
        self.dead_letters.append((msg_id, values, failures))

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
