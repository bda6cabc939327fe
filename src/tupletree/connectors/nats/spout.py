"""JetStreamSpout: a durable pull consumer of a NATS JetStream stream.

The consumer (``durable``, explicit acks) is created if missing, with ``ack_wait`` as
the lease the broker gives each delivery and no limit on redeliveries (the spout's
RetryPolicy decides). A completed tree acks its message (``+ACK``); a failed one is
nak'ed with the policy's delay (``-NAK {"delay": ...}``), so the server delivers it
again after the backoff and counts the deliveries (which survive a worker's restart);
after more than ``retry.max_retries`` failures the message is published to the
``dead_letter`` subject (JetStream-acked: a stream must capture it) and terminated
(``+TERM``). A bolt's ``reset_timeout`` sends in-progress (``+WPI``), renewing the
lease. Acks go to the reply subject of the delivery, which stays valid across
reconnects, so a settle is never lost with a connection.

On a NATS server older than 2.10.16 the spout does not nak with a delay: it holds a
failed message and replays it itself after the backoff, sending in-progress to keep the
lease, as the spouts of brokers without delayed redelivery do. Those servers have a
defect (fixed by nats-server PRs #5305 and #5338, April 2024): when a delayed
redelivery falls due while no pull request is waiting (pull requests expire every
fetch), the server drops it from its redelivery queue, steps its stream position back
and delivers the last message again as new; the nak'ed message then waits out the whole
``ack_wait``. Seen here with 2.9.10, Debian's, in about one run in four under load, and
never with 2.15.1. (Which 2.10 patch release first carried both fixes we could not
check: 2.10.16 leaves a margin.) Only a redelivery after an expired ``ack_wait`` (a
worker that died) still goes through the server's queue there, and at worst waits one
more ``ack_wait``.

The message id is the message's stream sequence. At submit the topology's message
timeout is checked against ``ack_wait`` (the existing consumer's, if it has one): a
tree may stay pending up to twice the message timeout, so the default ``ack_wait`` of
90 s fits the default timeout of 30 s.
"""

from __future__ import annotations

import json
from typing import Any

from tupletree.connectors.errors import redact
from tupletree.connectors.nats.client import JetStreamClient, explain, open_client
from tupletree.connectors.spout import ACK, DEAD, RETRY, TOUCH, BrokerSpout, Delivery, check_lease

ACK_BODY = b"+ACK"
PROGRESS_BODY = b"+WPI"
TERM_BODY = b"+TERM"
# The first nats-server release treated as free of the lost-redelivery defect (module
# docstring).
RELIABLE_DELAYED_REDELIVERY = (2, 10, 16)


def delays_redeliveries_reliably(version: Any) -> bool:
    """Whether a server of ``version`` (nats-py's ServerVersion) can be trusted with
    a nak's delay; an unknown version is not."""
    try:
        found = (int(version.major), int(version.minor), int(version.patch))
    except (AttributeError, TypeError, ValueError):
        return False
    return found >= RELIABLE_DELAYED_REDELIVERY


def nak_body(delay_secs: float) -> bytes:
    if delay_secs <= 0:
        return b"-NAK"
    return b"-NAK " + json.dumps({"delay": int(delay_secs * 1e9)}).encode()


def delivery_of(msg: Any) -> tuple[int, int]:
    """(stream sequence, times delivered) of a JetStream message, read off its ack
    subject: ``$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.
    <time>.<pending>``, or with ``<domain>.<account hash>`` after ``ACK`` and a token at
    the end (12 tokens). nats-py's ``msg.metadata`` parses all of it into objects, a
    tenth of the spout's time; any other form still goes to it."""
    tokens = msg.reply.split(".")
    if len(tokens) == 9:
        return int(tokens[5]), int(tokens[4])
    if len(tokens) == 12:
        return int(tokens[7]), int(tokens[6])
    meta = msg.metadata
    return meta.sequence.stream, meta.num_delivered


class JetStreamSpout(BrokerSpout):
    # Set per session from the server's version (module docstring): True, the server
    # redelivers a nak'ed message after the backoff; False, the spout replays it.
    broker_redelivers = True
    settles_survive_reconnect = True

    def __init__(
        self,
        stream: str,
        durable: str,
        servers: str = "nats://127.0.0.1:4222",
        *,
        subject: str | None = None,
        ack_wait: float = 90.0,
        max_ack_pending: int = 1000,
        timeout_secs: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("stream", stream), ("durable", durable)):
            if not isinstance(value, str) or not value or any(c in value for c in " .*>"):
                raise ValueError(
                    f"JetStreamSpout {name} must be a name without spaces, dots or "
                    f"wildcards, got {value!r}"
                )
        if not (isinstance(ack_wait, int | float) and ack_wait > 0):
            raise ValueError(f"JetStreamSpout ack_wait must be seconds > 0, got {ack_wait!r}")
        self.stream = stream
        self.durable = durable
        self.servers = servers
        self.subject = subject
        self.ack_wait = float(ack_wait)
        self.max_ack_pending = max_ack_pending
        self.timeout_secs = timeout_secs
        self.existing_ack_wait: float | None = None

    def address(self) -> str:
        return ",".join(redact(s) for s in self.servers.split(","))

    def leases(self, conf: dict[str, Any]) -> list[tuple[str, float | None, str]]:
        return [("ack_wait", self.ack_wait, "the JetStream consumer's ack_wait")]

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        super().check_config(conf, component)
        existing = self.existing_ack_wait
        if existing is not None and existing != self.ack_wait:
            check_lease(
                self.connector_name(),
                conf,
                "ack_wait",
                existing,
                f"the ack_wait of the existing consumer {self.durable!r} of stream {self.stream!r}",
            )

    def connect(self, epoch: int) -> _Session:
        return _Session(self, epoch)


class _Session:
    def __init__(self, spout: JetStreamSpout, epoch: int) -> None:
        self.spout = spout
        self.epoch = epoch
        self.client: JetStreamClient = open_client(
            spout.servers, spout.timeout_secs, spout.connector_name()
        )
        try:
            self.psub = self.client.run(self._bind())
        except BaseException:
            self.client.close()
            raise
        # Before any delivery of this session reaches the worker's thread, which reads it.
        spout.broker_redelivers = delays_redeliveries_reliably(
            self.client.nc.connected_server_version
        )

    async def _bind(self) -> Any:
        from nats.js.api import AckPolicy, ConsumerConfig
        from nats.js.errors import NotFoundError

        sp = self.spout
        js = self.client.js
        try:
            await js.stream_info(sp.stream)
        except Exception as exc:
            raise self.spout.connector_error(explain(exc, sp.stream)) from exc
        try:
            info = await js.consumer_info(sp.stream, sp.durable)
        except NotFoundError:
            config = ConsumerConfig(
                durable_name=sp.durable,
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=sp.ack_wait,
                max_deliver=-1,
                max_ack_pending=sp.max_ack_pending,
                filter_subject=sp.subject,
            )
            try:
                info = await js.add_consumer(sp.stream, config)
            except Exception as exc:
                raise self.spout.connector_error(
                    f"cannot create the durable consumer {sp.durable!r}: {explain(exc)}"
                ) from exc
        except Exception as exc:
            raise self.spout.connector_error(explain(exc, sp.stream)) from exc
        sp.existing_ack_wait = info.config.ack_wait
        if sp.dead_letter is not None:
            try:
                await js.find_stream_name_by_subject(sp.dead_letter)
            except Exception as exc:
                raise self.spout.connector_error(
                    f"no stream captures the dead-letter subject {sp.dead_letter!r} "
                    f"({type(exc).__name__})"
                ) from exc
        return await js.pull_subscribe_bind(consumer=sp.durable, stream=sp.stream)

    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]:
        self.client.check_alive()
        # nats-py's own reconnects keep this session: count them here (the I/O thread).
        self.spout.io_counts["reconnects"] += self.client.take_reconnects()
        return self.client.run(self._fetch(max_messages, timeout))  # type: ignore[no-any-return]

    async def _fetch(self, n: int, timeout: float) -> list[Delivery]:
        from nats.errors import TimeoutError as NatsTimeout

        try:
            msgs = await self.psub.fetch(n, timeout=timeout)
        except (NatsTimeout, TimeoutError):
            return []
        out = []
        for m in msgs:
            sequence, deliveries = delivery_of(m)
            d = Delivery(sequence, m.data, self.epoch, deliveries > 1, m.reply)
            d.failures = deliveries - 1
            out.append(d)
        return out

    def settle(self, actions: list[tuple[str, Delivery]]) -> None:
        self.client.check_alive()
        self.client.run(self._settle(actions))

    async def _settle(self, actions: list[tuple[str, Delivery]]) -> None:
        sp = self.spout
        publish = self.client.nc.publish
        for action, d in actions:
            if action == ACK:
                await publish(d.handle, ACK_BODY)
            elif action == RETRY:
                if sp.broker_redelivers:
                    await publish(d.handle, nak_body(sp.retry.delay(d.failures)))
                else:  # the spout replays it after the backoff: keep its lease
                    await publish(d.handle, PROGRESS_BODY)
            elif action == TOUCH:
                await publish(d.handle, PROGRESS_BODY)
            elif action == DEAD:
                await self._dead_letter(d)
        await self.client.nc.flush(self.client.timeout)

    async def _dead_letter(self, d: Delivery) -> None:
        sp = self.spout
        if sp.dead_letter is not None:
            headers = {
                "Tupletree-Stream": sp.stream,
                "Tupletree-Sequence": str(d.key),
                "Tupletree-Failures": str(d.failures),
            }
            try:
                await self.client.js.publish(sp.dead_letter, d.body, headers=headers)
            except Exception as exc:
                # Not written: give it back to the stream (it fails its way back here).
                await self.client.nc.publish(d.handle, nak_body(sp.retry.max_delay_secs))
                sp._errors.post(
                    self.spout.connector_error(
                        f"message {d.key} could not be written to the dead letter "
                        f"{sp.dead_letter!r}: {explain(exc)}; left in the stream"
                    )
                )
                return
        await self.client.nc.publish(d.handle, TERM_BODY)

    def close(self) -> None:
        self.client.close()
