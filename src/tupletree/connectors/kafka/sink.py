"""KafkaSink: produces each input's message to a topic and acks the input on a positive
delivery report only (``acks=all`` by default: the partition's in-sync replicas have it).

The producing and the waiting for reports happen on the sink's I/O thread (BrokerSink):
the worker never blocks. A report with an error, or none within ``timeout_secs``, fails
the input, so the spout replays it; the producer's ``message.timeout.ms`` is
``timeout_secs`` unless ``producer_config`` says otherwise, so a record whose input was
failed is not kept to be written later. A record the client refuses before sending it
(one over ``message.max.bytes``) fails its input alone.
"""

from __future__ import annotations

from typing import Any

from tupletree.connectors.kafka.client import (
    KafkaErrors,
    check_topic,
    client_config,
    produce_all,
)
from tupletree.connectors.sink import BrokerSink
from tupletree.redact import redact

# How much longer than ``timeout_secs`` a batch waits for its delivery reports.
REPORT_GRACE_SECS = 1.5


class KafkaSink(BrokerSink):
    def __init__(
        self,
        topic: str,
        bootstrap_servers: str = "127.0.0.1:9092",
        *,
        producer_config: dict[str, Any] | None = None,
        timeout_secs: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"KafkaSink topic must be a non-empty string, got {topic!r}")
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self.producer_config = dict(producer_config or {})
        self.timeout_secs = timeout_secs

    def address(self) -> str:
        return redact(self.bootstrap_servers)

    def connect(self) -> _SinkSession:
        return _SinkSession(self)


class _SinkSession:
    def __init__(self, sink: KafkaSink) -> None:
        from confluent_kafka import Producer

        self.sink = sink
        self.errors = KafkaErrors()
        self.producer = Producer(
            {
                **client_config(sink.bootstrap_servers, self.errors),
                "acks": "all",
                "linger.ms": 2,
                # The producer gives up on a record when the sink does (its input is
                # failed, to be replayed): kept for librdkafka's 300 s, every replay
                # while the broker is down would queue one more copy of it, all of
                # them written once it is back.
                "message.timeout.ms": max(1, int(sink.timeout_secs * 1000)),
                **sink.producer_config,
            }
        )
        check_topic(
            self.producer, sink.topic, sink.timeout_secs, self.errors, self.sink.connector_error
        )

    def write(self, bodies: list[bytes]) -> list[str | None]:
        self.errors.raise_fatal(self.sink.connector_error)
        # A little longer than message.timeout.ms: librdkafka reports the records it
        # gave up on (it looks for them once a second), so none is left behind.
        wait = self.sink.timeout_secs + REPORT_GRACE_SECS
        verdicts = produce_all(self.producer, self.sink.topic, bodies, wait)
        self.sink.io_counts["reconnects"] += self.errors.take_reconnects()
        self.errors.post_to(self.sink._errors.post, self.sink.connector_error)
        return verdicts

    def close(self) -> None:
        self.producer.flush(self.sink.timeout_secs)
