"""BrokerSink: what every broker sink (a bolt that writes to a broker) shares.

Contract, for users of a broker sink:

- Each input's ``message`` field (``field`` changes which; text is written as UTF-8,
  bytes as they are; ``encode`` maps a whole tuple to bytes) is written to the broker,
  and the input is acked only once the broker confirmed the write. A write the broker
  refuses, or that a dropped connection leaves unconfirmed, fails the input, so the
  spout replays it (at least once: a write lost with its confirm is written twice).
- ``execute`` never waits for the broker: it queues the write for the sink's I/O
  thread, which writes in batches and hands the verdicts back; the worker settles them
  on the task's own thread at its next round (``TopologyContext.call_each_round``).
  At most ``max_in_flight`` writes wait for a verdict: an input beyond that is failed
  at once (counted as ``overflow``), so memory stays bounded when the broker is slow.
- While the broker cannot be reached, queued writes are failed rather than held (the
  spout's backoff paces the replays) and the error, naming the connector and the
  address, is reported in ``cluster.errors(name)``; the sink reconnects, paced by
  ``reconnect``. So is a broker that takes the connection and breaks it at every write
  (the first failed write after one that worked reconnects at once, as the spouts do).
- A value the sink cannot write fails its input alone: an ``encode`` that returns no
  bytes (TypeError naming the sink, raised in ``execute``), a message the client
  refuses before sending it (Kafka: over ``message.max.bytes``; JetStream: over the
  server's ``max_payload``), or a message too large for the broker (RabbitMQ: over
  its ``max_message_size`` or the sink's ``max_message_bytes``); counted as refused.
  ``check_config`` (at submit) connects once unless ``check_at_submit=False``.
- ``metrics(topology)[component]["custom"]["connector"][task]``: written (confirmed),
  refused, lost (connection dropped before the confirm), overflow, reconnects, and the
  gauge in_flight.

Contract, for a broker's subclass: ``connect() -> SinkSession`` (on the I/O thread),
``address()``; a ``SinkSession`` has ``write(bodies) -> list[str | None]`` (one verdict
per body, in order: None when the broker confirmed it, else why it refused it; raising
means the connection is in trouble: every body of the batch counts as unconfirmed) and
``close()``; it may have ``keepalive()``, which the I/O thread calls each idle turn
(it may raise, as ``write``: the session is then replaced).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from tupletree.connectors.base import Connector
from tupletree.connectors.mailbox import close_quietly
from tupletree.connectors.retry import RetryPolicy
from tupletree.connectors.spout import POLL_SECS
from tupletree.topology.components import Bolt

log = logging.getLogger("tupletree.connectors")

WRITE_BATCH = 500
DEFAULT_MAX_IN_FLIGHT = 10_000


class SinkSession(Protocol):
    def write(self, bodies: list[bytes]) -> list[str | None]: ...

    def close(self) -> None: ...


class BrokerSink(Connector, Bolt):
    """Base of the broker sinks; see the module docstring for the contract."""

    outputs: list[str] = []

    def __init__(
        self,
        *,
        field: str = "message",
        encode: Callable[[Any], bytes] | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        reconnect: RetryPolicy | None = None,
        check_at_submit: bool = True,
    ) -> None:
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be a positive integer, got {max_in_flight!r}")
        self.field = field
        self.encode = encode
        self.max_in_flight = max_in_flight
        self._init_connector(reconnect, check_at_submit)

    # -- what a broker provides -------------------------------------------------------

    def connect(self) -> SinkSession:
        raise NotImplementedError

    def probe(self) -> None:
        self.connect().close()

    # -- the worker's side ------------------------------------------------------------

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.component = context.component_id
        self.collector = collector
        self.counts = {"overflow": 0}
        self.io_counts = {"written": 0, "refused": 0, "lost": 0, "reconnects": 0}
        self._in_flight = 0  # written by the worker's thread only
        # Shared with the I/O thread; deque append/popleft are atomic.
        self._writes: deque[tuple[Any, bytes]] = deque()
        self._verdicts: deque[tuple[Any, str | None]] = deque()
        self._start_io(context, self._io_loop, self._settle)

    def execute(self, tup: Any) -> None:
        if self._in_flight >= self.max_in_flight:
            self.counts["overflow"] += 1
            self.collector.fail(tup)
            return
        if self.encode is not None:
            body = self.encode(tup)
            if not isinstance(body, bytes):
                if not isinstance(body, bytearray | memoryview):
                    # Raised here it fails this input alone (reported by the worker);
                    # on the I/O thread the client would refuse the whole batch with it.
                    raise TypeError(
                        f"{self.connector_name()}: encode must return bytes, it returned "
                        f"{type(body).__name__}"
                    )
                body = bytes(body)
        else:
            value = tup.get(self.field)
            body = value if isinstance(value, bytes) else str(value).encode()
        self._in_flight += 1
        self._writes.append((tup, body))

    def _settle(self) -> bool:
        """On the task's thread, each round: wake the I/O thread for the writes queued
        (once per round: they go out as one batch), ack or fail what the broker
        answered."""
        if self._writes:
            self._kick.set()
        if self._errors:
            self._errors.deliver(self.collector)
        verdicts = self._verdicts
        if not verdicts:
            return False
        collector = self.collector
        while verdicts:
            tup, refusal = verdicts.popleft()
            self._in_flight -= 1
            if refusal is None:
                collector.ack(tup)
            else:
                collector.fail(tup)
        return True

    def cleanup(self) -> None:
        self._stop_io()

    def connector_metrics(self) -> dict[str, int]:
        return {**self.counts, **self.io_counts, "in_flight": self._in_flight}

    # -- the I/O thread ---------------------------------------------------------------

    def _io_loop(self) -> None:
        session: SinkSession | None = None
        failures = 0
        connected = False
        while not self._stopping.is_set():
            if session is None:
                try:
                    session = self.connect()
                except Exception as exc:
                    failures += 1
                    self._errors.post(exc)
                    self._fail_queued("the broker cannot be reached")
                    self._stopping.wait(self.reconnect.delay(failures))
                    continue
                if connected:
                    self.io_counts["reconnects"] += 1
                connected = True
                # ``failures`` is reset by a write that went through, not here: a broker
                # that takes the connection and breaks it at every write (a missing
                # exchange closes RabbitMQ's channel) is backed off from as well.
            writes = self._writes
            if not writes:
                # Idle: a client whose heartbeats run only inside its calls (the
                # RabbitMQ sink's) must still answer them, or the broker closes the
                # connection and the next write fails; a session that finds itself
                # dropped is replaced now, before a write needs it.
                keepalive = getattr(session, "keepalive", None)
                if keepalive is not None:
                    try:
                        keepalive()
                    except Exception as exc:
                        self._errors.post(exc)
                        close_quietly(session)
                        session = None
                        continue
                self._kick.wait(POLL_SECS)
                self._kick.clear()
                continue
            batch = [writes.popleft() for _ in range(min(len(writes), WRITE_BATCH))]
            try:
                verdicts = session.write([body for _, body in batch])
            except Exception as exc:
                self.io_counts["lost"] += len(batch)
                self._hand_back([(tup, "connection lost") for tup, _ in batch])
                self._errors.post(exc)
                close_quietly(session)
                session = None
                failures += 1
                # As the spouts do: the first failure after a write that worked
                # reconnects at once, the next ones back off. Writes queued meanwhile
                # wait (at most max_in_flight of them) for the next session.
                self._stopping.wait(self.reconnect.delay(failures - 1))
                continue
            failures = 0  # a write the broker answered
            refused = sum(1 for v in verdicts if v is not None)
            self.io_counts["refused"] += refused
            self.io_counts["written"] += len(verdicts) - refused
            if refused:
                first = next(v for v in verdicts if v is not None)
                self._errors.post(self.connector_error(first))
            self._hand_back([(tup, v) for (tup, _), v in zip(batch, verdicts, strict=True)])
        if session is not None:
            close_quietly(session)
        self._fail_queued("the sink is closing")

    def _fail_queued(self, why: str) -> None:
        writes = self._writes
        failed = [(writes.popleft()[0], why) for _ in range(len(writes))]
        if failed:
            self.io_counts["lost"] += len(failed)
            self._hand_back(failed)

    def _hand_back(self, verdicts: list[tuple[Any, str | None]]) -> None:
        self._verdicts.extend(verdicts)
        self.context.wakeup()
