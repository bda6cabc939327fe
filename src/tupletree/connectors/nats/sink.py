"""JetStreamSink: publishes each input's message to a subject with JetStream acks.

A write counts as confirmed when the stream that captures ``subject`` answered with
its PubAck; a refusal (no stream captures the subject, a full stream) fails the input.
The publishes of a batch are in flight together on the sink's loop thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tupletree.connectors.errors import ConnectorError, redact
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
        try:
            self.client.run(self._check())
        except BaseException:
            self.client.close()
            raise

    async def _check(self) -> None:
        try:
            await self.client.js.find_stream_name_by_subject(self.sink.subject)
        except Exception as exc:
            raise ConnectorError(
                self.sink.connector_name(),
                self.sink.address(),
                f"no stream captures subject {self.sink.subject!r} ({explain(exc)})",
            ) from exc

    def write(self, bodies: list[bytes]) -> list[str | None]:
        self.client.check_alive()
        # nats-py's own reconnects keep this session: count them here (the I/O thread).
        self.sink.io_counts["reconnects"] += self.client.take_reconnects()
        return self.client.run(self._write(bodies), self.client.timeout * 2 + 1)  # type: ignore[no-any-return]

    async def _write(self, bodies: list[bytes]) -> list[str | None]:
        js = self.client.js
        subject = self.sink.subject
        results = await asyncio.gather(
            *(js.publish(subject, b) for b in bodies), return_exceptions=True
        )
        if self.client.nc.is_closed:
            raise ConnectionError(f"the connection closed: {self.client.last_error()}")
        return [None if not isinstance(r, BaseException) else explain(r) for r in results]

    def close(self) -> None:
        self.client.close()
