"""JetStreamSink: publishes each input's message to a subject with JetStream acks.

A write counts as confirmed when the stream that captures ``subject`` answered with
its PubAck; a refusal (no stream captures the subject, a full stream) fails the input.
The publishes of a batch are in flight together on the sink's loop thread; one without
a PubAck after ``timeout_secs`` fails its input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from tupletree.connectors.errors import redact
from tupletree.connectors.nats.client import JetStreamClient, explain, open_client
from tupletree.connectors.sink import BrokerSink


class JetStreamSink(BrokerSink):
    def __init__(
        self,
        subject: str,
        servers: str = "nats://127.0.0.1:4222",
        *,
        timeout_secs: float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(subject, str) or not subject or any(c in subject for c in " *>"):
            raise ValueError(f"JetStreamSink subject must be a plain subject, got {subject!r}")
        self.subject = subject
        self.servers = servers
        self.timeout_secs = timeout_secs

    def address(self) -> str:
        return ",".join(redact(s) for s in self.servers.split(","))

    def connect(self) -> _SinkSession:
        return _SinkSession(self)


class _SinkSession:
    def __init__(self, sink: JetStreamSink) -> None:
        self.sink = sink
        self.client: JetStreamClient = open_client(
            sink.servers, sink.timeout_secs, sink.connector_name()
        )
        self.acks = _PubAcks()
        try:
            self.client.run(self._check())
        except BaseException:
            self.client.close()
            raise

    async def _check(self) -> None:
        try:
            await self.client.js.find_stream_name_by_subject(self.sink.subject)
        except Exception as exc:
            raise self.sink.connector_error(
                f"no stream captures subject {self.sink.subject!r} ({explain(exc)})",
            ) from exc
        nc = self.client.nc
        self.inbox = nc.new_inbox()
        await nc.subscribe(self.inbox + ".*", cb=self.acks.take)

    def write(self, bodies: list[bytes]) -> list[str | None]:
        self.client.check_alive()
        # nats-py's own reconnects keep this session: count them here (the I/O thread).
        self.sink.io_counts["reconnects"] += self.client.take_reconnects()
        return self.client.run(self._write(bodies), self.client.timeout * 2 + 1)  # type: ignore[no-any-return]

    async def _write(self, bodies: list[bytes]) -> list[str | None]:
        # Every publish of the batch in flight at once, each with a reply subject of its
        # own under the session's inbox, and one wait for all their PubAcks: awaiting
        # js.publish per message costs nats-py a task, a timer and a wait_for each, and
        # its publish_async never completes a publish the stream refused (nats-py 2.16
        # raises inside its reply handler instead), which would leave a refusal looking
        # like a lost PubAck.
        nc = self.client.nc
        subject = self.sink.subject
        prefix = f"{self.inbox}.{self.acks.start(len(bodies))}-"
        limit = nc.max_payload
        for i, body in enumerate(bodies):
            if len(body) > limit:
                # nats-py would raise MaxPayloadError, as if the connection were broken:
                # the one message is refused, the rest of the batch goes on.
                self.acks.refuse(
                    i, f"message of {len(body)} bytes over the server's max_payload ({limit})"
                )
                continue
            await nc.publish(subject, body, reply=f"{prefix}{i}")
        await self.acks.wait(self.sink.timeout_secs)
        if nc.is_closed:
            raise ConnectionError(f"the connection closed: {self.client.last_error()}")
        return self.acks.verdicts(self.sink.timeout_secs)

    def close(self) -> None:
        self.client.close()


_NO_ACK = "no PubAck"


class _PubAcks:
    """The PubAcks of the batch being written, matched by the last token of their reply
    subject: ``<batch>-<index>``. An answer to an earlier batch (one that timed out) is
    ignored: its input was failed already and is replayed (at least once)."""

    def __init__(self) -> None:
        self.batch = 0
        self.answers: list[str | None] = []
        self.missing = 0
        self.done = asyncio.Event()

    def start(self, size: int) -> int:
        self.batch += 1
        self.answers = [_NO_ACK] * size
        self.missing = size
        self.done.clear()
        return self.batch

    def refuse(self, i: int, why: str) -> None:
        """A message of the batch not published: its verdict is ``why``."""
        self.answers[i] = why
        self.missing -= 1
        if self.missing == 0:
            self.done.set()

    async def take(self, msg: Any) -> None:
        batch, _, index = msg.subject.rpartition(".")[2].partition("-")
        if not (batch.isdigit() and index.isdigit()) or int(batch) != self.batch:
            return
        i = int(index)
        if i >= len(self.answers) or self.answers[i] is not _NO_ACK:
            return  # not ours, or answered already
        self.answers[i] = _refusal(msg)
        self.missing -= 1
        if self.missing == 0:
            self.done.set()

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), timeout)

    def verdicts(self, timeout: float) -> list[str | None]:
        late = f"no PubAck within {timeout} s"
        return [late if a is _NO_ACK else a for a in self.answers]


def _refusal(msg: Any) -> str | None:
    """None for a PubAck, else what the server said."""
    if msg.headers and msg.headers.get("Status") == "503":
        return "no stream captures the subject (no responders)"
    try:
        error = json.loads(msg.data).get("error")
    except (ValueError, AttributeError):
        return f"unreadable PubAck {msg.data[:80]!r}"
    if error is None:
        return None
    return f"{error.get('description', error)} (error code {error.get('err_code')})"
