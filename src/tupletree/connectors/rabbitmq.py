"""RabbitMQ: RabbitMQSpout consumes a queue with manual acknowledgements, RabbitMQSink
publishes with publisher confirms (pika).

The spout's contract beyond BrokerSpout's (connectors/spout.py):

- It consumes an existing queue (a missing one is a ConnectorError at submit, as are
  an unreachable broker and refused credentials), with manual acknowledgements and a
  prefetch of the messages ``topology.max.spout.pending`` trees hold (times
  ``messages_per_tree``) plus the spout's buffer (``BrokerSpout.default_buffer``: as
  much again for a message a tree): the broker never hands a task more than it may
  have in flight and buffered.
- A message is acknowledged (``basic.ack``) on the channel that delivered it when its
  tree completes. A failed message stays unacknowledged and is replayed by the spout
  after its backoff; a dead-lettered one is published to the ``dead_letter`` queue
  (with a confirm) and then acknowledged (one the broker returns or refuses, the
  dead-letter queue gone, say, is reported and requeued); with no ``dead_letter`` it is
  rejected without requeueing, so the queue's own dead-letter exchange, if it has one,
  gets it.
- Delivery tags belong to a channel: when the connection drops the broker requeues
  what the channel held and delivers it again (marked redelivered), so acks and
  replays for the old channel's tags are dropped (counted as ``stale``), never sent on
  the new channel. The spout reconnects with backoff (``reconnect``).
- RabbitMQ's ``consumer_timeout`` (30 minutes by default) closes a channel that keeps a
  delivery unacknowledged longer; ``consumer_timeout_secs`` tells the spout the
  broker's value (None: disabled), which must exceed twice the message timeout plus the
  retry's ``max_delay_secs`` (checked at submit). A bolt's ``reset_timeout`` cannot
  extend it: RabbitMQ has no way to renew a delivery.

The sink's, beyond BrokerSink's (connectors/sink.py): a message over the broker's
``max_message_size`` fails its input alone, counted as refused, the rest of its batch
written. RabbitMQ does not tell a client its ``max_message_size`` (128 MiB by default
in 3.8 to 3.13, 16 MiB from 4.0, set lower by many brokers; pika's negotiated
``frame_max`` only sizes the frames a body is split into): it refuses a larger message
by closing the channel (406 PRECONDITION_FAILED, naming its limit), dropping what was
published after it. The sink then takes the limit from the refusal, refuses the
message, and publishes the rest of the batch again on a new channel of the same
connection (a message the broker took just before, whose confirm the closed channel
lost, is written twice: at least once); from then on that connection refuses a message
over the limit before publishing it. ``max_message_bytes`` (None by default: the
broker's refusal is waited for) refuses a larger message before it is published, with
no channel closed at all.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tupletree.config import Config
from tupletree.connectors.errors import ConnectorError, redact
from tupletree.connectors.retry import RetryPolicy
from tupletree.connectors.sink import BrokerSink
from tupletree.connectors.spout import ACK, DEAD, BrokerSpout, Delivery
from tupletree.extras import missing

try:
    import pika
    import pika.exceptions
    from pika.adapters import select_connection
except ImportError as exc:
    raise missing("pika", "rabbitmq", "tupletree.connectors.rabbitmq") from exc

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
MAX_PREFETCH = 65535
PERSISTENT = pika.BasicProperties(delivery_mode=2)
# RabbitMQ's reply (406 PRECONDITION_FAILED, closing the channel) to a message over its
# max_message_size: "message size 134217729 is larger than configured max size 134217728".
_TOO_LARGE = re.compile(r"message size (\d+) is larger than configured max size (\d+)")


def _connect(url: str, connector: str, address: str) -> pika.BlockingConnection:
    params = pika.URLParameters(url)
    params.socket_timeout = 5.0
    params.blocked_connection_timeout = 30.0
    try:
        return pika.BlockingConnection(params)
    except pika.exceptions.ProbableAuthenticationError as exc:
        raise ConnectorError(connector, address, f"credentials refused: {exc!r}") from exc
    except pika.exceptions.AMQPConnectionError as exc:
        cause = exc.args[0] if exc.args else exc
        raise ConnectorError(connector, address, f"cannot connect: {cause!r}") from exc


def _check_queue(channel: Any, queue: str, connector: str, address: str) -> None:
    try:
        channel.queue_declare(queue, passive=True)
    except pika.exceptions.ChannelClosedByBroker as exc:
        raise ConnectorError(
            connector, address, f"queue {queue!r} does not exist ({exc.reply_text})"
        ) from exc


class _SpoutSession:
    def __init__(self, spout: RabbitMQSpout, epoch: int) -> None:
        self.spout = spout
        self.epoch = epoch
        name, address = spout.connector_name(), spout.address()
        self.conn = _connect(spout.url, name, address)
        try:
            self.channel = self.conn.channel()
            _check_queue(self.channel, spout.queue, name, address)
            self.channel.basic_qos(prefetch_count=spout.prefetch)
            self.got: list[Delivery] = []
            # Tags delivered on this channel and not settled yet, and the highest tag.
            self.unsettled: set[int] = set()
            self.last_tag = 0
            self.channel.basic_consume(spout.queue, self._on_message, auto_ack=False)
            self.dead_channel: Any = None
        except Exception:
            self.close()
            raise

    def _on_message(self, _channel: Any, method: Any, _props: Any, body: bytes) -> None:
        tag = method.delivery_tag
        self.unsettled.add(tag)
        self.last_tag = tag
        self.got.append(Delivery((self.epoch, tag), body, self.epoch, method.redelivered, tag))

    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]:
        # Returns as soon as a delivery arrived (or after ``timeout``); the prefetch
        # bounds how many a call can bring.
        self.conn.process_data_events(time_limit=0 if self.got else timeout)
        got, self.got = self.got, []
        return got

    def keepalive(self) -> None:
        """Let pika send and answer heartbeats while the spout fetches nothing (its
        BlockingConnection does so only inside calls like this one). A delivery that
        arrives meanwhile waits in ``got`` for the next fetch: the prefetch bounds it."""
        self.conn.process_data_events(time_limit=0)

    def interrupt(self) -> None:
        """From another thread: end a waiting ``fetch`` now (settles are queued)."""
        try:
            self.conn.add_callback_threadsafe(_nothing)
        except Exception:  # closed meanwhile: the fetch ends anyway
            return

    def settle(self, actions: list[tuple[str, Delivery]]) -> None:
        channel = self.channel
        acks: list[int] = []
        for action, d in actions:
            if action == ACK:
                acks.append(d.handle)
            elif action == DEAD:
                if self.spout.dead_letter is None:
                    channel.basic_reject(d.handle, requeue=False)
                elif self._publish_dead(d):
                    channel.basic_ack(d.handle)
                else:  # not written: back to its queue (it fails its way back here)
                    channel.basic_reject(d.handle, requeue=True)
                self.unsettled.discard(d.handle)
        if not acks:
            return
        unsettled = self.unsettled
        unsettled.difference_update(acks)
        # Every tag below the lowest one still unsettled is settled now: one ack with
        # ``multiple`` covers those of this batch (tags delivered in order, from 1).
        below = min(unsettled) if unsettled else self.last_tag + 1
        prefix = [tag for tag in acks if tag < below]
        if prefix:
            channel.basic_ack(max(prefix), multiple=True)
        for tag in acks:
            if tag >= below:
                channel.basic_ack(tag)

    def _publish_dead(self, d: Delivery) -> bool:
        """Publish to the dead letter, confirmed; False (reported) when the broker
        returned or refused it. Raised, the refusal closed the connection at every
        give-up, and RabbitMQ requeued every message in flight with it."""
        sp = self.spout
        if self.dead_channel is None:
            self.dead_channel = self.conn.channel()
            self.dead_channel.confirm_delivery()
        try:
            self.dead_channel.basic_publish(
                "",
                sp.dead_letter,
                d.body,
                pika.BasicProperties(
                    delivery_mode=2,
                    headers={"x-tupletree-source": sp.queue, "x-failures": d.failures},
                ),
                mandatory=True,
            )
        except (
            pika.exceptions.UnroutableError,
            pika.exceptions.NackError,
            pika.exceptions.ChannelClosedByBroker,
        ) as exc:
            if not self.dead_channel.is_open:
                self.dead_channel = None
            sp._errors.post(
                sp.connector_error(
                    f"message {d.key} could not be written to the dead letter "
                    f"{sp.dead_letter!r}: {type(exc).__name__}: {exc}; requeued"
                )
            )
            return False
        return True

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


def _nothing() -> None:
    pass


class RabbitMQSpout(BrokerSpout):
    """Emits ``[message]`` for each message of ``queue``."""

    settles_survive_reconnect = False
    # The consumer timeout runs from the delivery and only an ack ends it: a delivery
    # waiting in the buffer cannot be kept from it (docs/connectors.md).
    renews_leases = False

    def __init__(
        self,
        queue: str,
        url: str = DEFAULT_URL,
        *,
        retry: RetryPolicy | None = None,
        dead_letter: str | None = None,
        consumer_timeout_secs: float | None = 1800.0,
        **options: Any,
    ) -> None:
        super().__init__(retry=retry, dead_letter=dead_letter, **options)
        self.queue = queue
        self.url = url
        self.consumer_timeout_secs = consumer_timeout_secs
        self.prefetch = 0

    def address(self) -> str:
        return f"{redact(self.url)} queue {self.queue!r}"

    def leases(self, conf: dict[str, Any]) -> list[tuple[str, float | None, str]]:
        limit = self.consumer_timeout_secs
        if limit is None:
            return []
        max_delay = self.retry.max_delay_secs
        return [
            (
                "consumer_timeout_secs",
                limit - max_delay,
                f"RabbitMQ's consumer timeout less the retry's max_delay_secs ({limit} - "
                f"{max_delay} s)",
            )
        ]

    def probe(self) -> None:
        name, address = self.connector_name(), self.address()
        conn = _connect(self.url, name, address)
        try:
            _check_queue(conn.channel(), self.queue, name, address)
            if self.dead_letter is not None:
                _check_queue(conn.channel(), self.dead_letter, name, address)
        finally:
            if conn.is_open:
                conn.close()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        max_pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        buffer = self.buffer_size or self.default_buffer(max_pending)
        # Max spout pending counts trees: the messages in flight are as many trees of
        # messages_per_tree each.
        in_flight = (max_pending or 0) * self.messages_per_tree
        self.prefetch = min(MAX_PREFETCH, in_flight + buffer)
        super().open(conf, context, collector)

    def connect(self, epoch: int) -> _SpoutSession:
        return _SpoutSession(self, epoch)


class ConfirmingPublisher:
    """Publishes batches with publisher confirms, many in flight at once (pika's
    blocking API waits a round trip per message): its own ``SelectConnection``, whose
    I/O loop runs only inside ``__init__``, ``write``, ``keepalive`` and ``close``, on
    the caller's thread. ``write(bodies)`` returns one verdict per body: None once the
    broker confirmed it, else why not (nacked, or returned as unroutable); it raises
    when the connection or channel fails, or no confirm came within ``timeout``
    seconds. A body over ``max_bytes``, or over the broker's ``max_message_size`` once
    it refused one (the channel closed for it is replaced and the batch's unconfirmed
    bodies published again), is refused alone."""

    def __init__(
        self,
        url: str,
        exchange: str,
        routing_key: str,
        queue: str | None,
        connector: str,
        address: str,
        timeout: float = 30.0,
        max_bytes: int | None = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.queue = queue
        self.connector = connector
        self.address = address
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.broker_max: int | None = None  # the broker's max_message_size, once refused
        self.error: BaseException | None = None
        self.ready = False
        self.channel: Any = None
        self.tag = 0
        self.outstanding: dict[int, int] = {}
        self.verdicts: list[str | None] = []
        self.returned: dict[int, str] = {}
        self.declaring: str | None = None  # the exchange or queue being checked
        params = pika.URLParameters(url)
        params.socket_timeout = 5.0
        # An I/O loop driven by hand (poll, process_timeouts), as BlockingConnection does.
        self.ioloop = select_connection.IOLoop()
        self.ioloop.activate_poller()
        self.conn = pika.SelectConnection(
            params,
            on_open_callback=self._on_open,
            on_open_error_callback=self._on_failure,
            on_close_callback=self._on_failure,
            custom_ioloop=self.ioloop,
        )
        self._run_until(lambda: self.ready, timeout)
        if not self.ready:
            error = self.error
            self.close()
            raise _connector_error(
                error, connector, address, "no answer while connecting", self.declaring
            )

    # -- the I/O loop ---------------------------------------------------------------

    def _run_until(self, done: Any, secs: float) -> None:
        loop = self.ioloop
        expired: list[bool] = []
        timer = loop.call_later(max(0.0, secs), lambda: expired.append(True))
        try:
            while not done() and self.error is None and not expired:
                loop.poll()
                loop.process_timeouts()
        finally:
            loop.remove_timeout(timer)

    def _on_failure(self, _conn: Any, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc

    def _on_open(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        self.tag = 0  # delivery tags count from 1 on each channel
        channel.add_on_close_callback(self._on_failure)
        channel.add_on_return_callback(self._on_return)
        if self.exchange:
            # Passive: the broker answers 404 (and closes the channel) for a missing
            # exchange here, at connect (so at submit), not at every publish after.
            self.declaring = f"exchange {self.exchange!r}"
            channel.exchange_declare(self.exchange, passive=True, callback=self._on_exchange)
        else:
            self._on_exchange(None)

    def _on_exchange(self, _frame: Any) -> None:
        if self.queue is not None:
            self.declaring = f"queue {self.queue!r}"
            self.channel.queue_declare(self.queue, passive=True, callback=self._on_declared)
        else:
            self._on_declared(None)

    def _on_declared(self, _frame: Any) -> None:
        self.declaring = None
        self.channel.confirm_delivery(
            ack_nack_callback=self._on_confirm, callback=self._on_confirming
        )

    def _on_confirming(self, _frame: Any) -> None:
        self.ready = True

    def _on_return(self, _channel: Any, method: Any, props: Any, _body: bytes) -> None:
        # The broker returns an unroutable message just before it confirms it.
        self.returned[int(props.message_id)] = f"returned: {method.reply_text}"

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        last = method.delivery_tag
        tags = [t for t in self.outstanding if t <= last] if method.multiple else [last]
        nacked = isinstance(method, pika.spec.Basic.Nack)
        for tag in tags:
            index = self.outstanding.pop(tag, None)
            if index is None:
                continue
            refusal = self.returned.pop(tag, None)
            if nacked:
                refusal = "the broker refused the message (basic.nack)"
            self.verdicts[index] = refusal

    # -- the caller's side ----------------------------------------------------------

    def write(self, bodies: list[bytes]) -> list[str | None]:
        if self.error is not None:
            raise _connector_error(self.error, self.connector, self.address, "")
        self.verdicts = ["unconfirmed"] * len(bodies)
        self.outstanding.clear()
        deadline = time.monotonic() + self.timeout
        indices: list[int] | None = list(range(len(bodies)))
        while indices is not None:
            self._publish(bodies, indices)
            self._run_until(lambda: not self.outstanding, deadline - time.monotonic())
            if not self.outstanding:
                return self.verdicts
            indices = self._after_size_refusal(bodies, deadline)
        raise _connector_error(
            self.error, self.connector, self.address, "no confirm within the timeout"
        )

    def _publish(self, bodies: list[bytes], indices: list[int]) -> None:
        for index in indices:
            body = bodies[index]
            refusal = self._too_large(len(body))
            if refusal is not None:
                self.verdicts[index] = refusal
                continue
            self.tag += 1
            props = pika.BasicProperties(delivery_mode=2, message_id=str(self.tag))
            self.outstanding[self.tag] = index
            self.channel.basic_publish(self.exchange, self.routing_key, body, props, mandatory=True)

    def _too_large(self, size: int) -> str | None:
        broker_max = self.broker_max
        if broker_max is not None and size > broker_max:
            return f"message of {size} bytes over the broker's max_message_size ({broker_max})"
        if self.max_bytes is not None and size > self.max_bytes:
            return f"message of {size} bytes over max_message_bytes ({self.max_bytes})"
        return None

    def _after_size_refusal(self, bodies: list[bytes], deadline: float) -> list[int] | None:
        """When the broker closed the channel for a message over its max_message_size:
        learn the limit, open a new channel and return the indices of the bodies left
        unconfirmed (to publish again; those over the limit are refused then). None
        otherwise, or when the new channel did not open in time."""
        exc = self.error
        if not isinstance(exc, pika.exceptions.ChannelClosedByBroker) or exc.reply_code != 406:
            return None
        found = _TOO_LARGE.search(exc.reply_text or "")
        if found is None or not self.conn.is_open:
            return None
        limit = int(found.group(2))
        self.broker_max = limit if self.broker_max is None else min(limit, self.broker_max)
        unconfirmed = sorted(self.outstanding.values())
        if not any(len(bodies[i]) > self.broker_max for i in unconfirmed):
            return None  # published again, nothing would change
        self.outstanding.clear()
        self.returned.clear()
        self.error = None
        self.ready = False
        self.conn.channel(on_open_callback=self._on_channel)
        self._run_until(lambda: self.ready, deadline - time.monotonic())
        return unconfirmed if self.ready else None

    def keepalive(self) -> None:
        """One pass of the I/O loop, not waiting: heartbeats sent and answered while
        nothing is written. Raises if the connection or channel failed meanwhile."""
        self._run_until(lambda: False, 0)
        if self.error is not None:
            raise _connector_error(self.error, self.connector, self.address, "")

    def close(self) -> None:
        conn = self.conn
        if conn.is_open:
            conn.close()
            self.error = None
            self._run_until(lambda: conn.is_closed, 5.0)
        self.ioloop.deactivate_poller()
        self.ioloop.close()


def _connector_error(
    exc: BaseException | None,
    connector: str,
    address: str,
    otherwise: str,
    declaring: str | None = None,
) -> ConnectorError:
    if isinstance(exc, pika.exceptions.ProbableAuthenticationError):
        return ConnectorError(connector, address, f"credentials refused: {exc!r}")
    if isinstance(exc, pika.exceptions.ChannelClosedByBroker) and exc.reply_code == 404:
        if declaring is not None:  # the passive declare at connect: name what is missing
            return ConnectorError(
                connector, address, f"{declaring} does not exist ({exc.reply_text})"
            )
        return ConnectorError(connector, address, f"does not exist: {exc.reply_text}")
    if exc is None:
        return ConnectorError(connector, address, otherwise)
    return ConnectorError(connector, address, f"{type(exc).__name__}: {exc!r}")


class RabbitMQSink(BrokerSink):
    """Publishes each input's ``message`` to ``queue`` (through the default exchange),
    or to ``exchange`` with ``routing_key``; persistent, mandatory, confirmed. The
    exchange and the queue must exist: each connection (the submit-time check's too)
    declares them passively, and a missing one is a ConnectorError naming it.

    ``max_message_bytes``: a message larger is refused (its input failed alone) before
    it is published; set it to the broker's ``max_message_size`` when that is known.
    None (the default): the broker's own refusal is waited for, which costs a channel
    the first time on each connection (the module docstring says how)."""

    def __init__(
        self,
        queue: str | None = None,
        url: str = DEFAULT_URL,
        *,
        exchange: str = "",
        routing_key: str | None = None,
        max_message_bytes: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if queue is None and routing_key is None:
            raise ValueError("RabbitMQSink needs a queue or a routing_key")
        if max_message_bytes is not None and (
            not isinstance(max_message_bytes, int)
            or isinstance(max_message_bytes, bool)
            or max_message_bytes < 1
        ):
            raise ValueError(
                f"max_message_bytes must be a positive integer or None, got {max_message_bytes!r}"
            )
        self.max_message_bytes = max_message_bytes
        self.queue = queue
        self.url = url
        self.exchange = exchange
        self.routing_key = routing_key if routing_key is not None else queue

    def address(self) -> str:
        where = f"queue {self.queue!r}" if self.queue is not None else ""
        if self.exchange:
            where = f"exchange {self.exchange!r} key {self.routing_key!r}"
        return f"{redact(self.url)} {where}".strip()

    def connect(self) -> ConfirmingPublisher:
        return ConfirmingPublisher(
            self.url,
            self.exchange,
            self.routing_key,  # type: ignore[arg-type]
            self.queue,
            self.connector_name(),
            self.address(),
            max_bytes=self.max_message_bytes,
        )
