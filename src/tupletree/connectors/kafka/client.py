"""What KafkaSpout and KafkaSink share around confluent-kafka: errors reported by the
client's callback, the topic check, and producing a batch with delivery reports.

Everything here runs on a connector's I/O thread (librdkafka serves its callbacks from
``poll``/``consume``/``flush`` on the calling thread).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tupletree.connectors.errors import ConnectorError

MakeError = Callable[[str], ConnectorError]

# librdkafka's own log lines go to logging, not to stderr.
log = logging.getLogger("tupletree.connectors.kafka")


def client_config(
    bootstrap_servers: str, errors: KafkaErrors, group_id: str | None = None
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        "error_cb": errors.callback,
        "logger": errors,
    }
    if group_id is not None:
        conf["group.id"] = group_id
    return conf


class KafkaErrors:
    """The client's error callback: keeps the latest errors (at most ``limit``) to name
    the cause when a call fails, and a fatal one to end the session."""

    def __init__(self, limit: int = 20) -> None:
        self.recent: deque[Any] = deque(maxlen=limit)
        self.unreported: deque[Any] = deque(maxlen=limit)
        self.fatal: Any = None
        self.last_log = ""
        self.lost_all = 0  # times every broker connection went down (not yet taken)

    def callback(self, err: Any) -> None:
        self.record(err)

    def log(self, level: int, msg: str, *args: Any) -> None:
        """librdkafka's log lines (the client's ``logger``): kept to name the cause of a
        failed connect (its error callback may not have spoken yet), then logged."""
        if level >= logging.WARNING:
            text = msg % args if args else msg
            self.last_log = text
        log.log(level, msg, *args)

    def record(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        self.recent.append(err)
        self.unreported.append(err)
        if err.fatal():
            self.fatal = err
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.lost_all += 1

    def take_reconnects(self) -> int:
        """Times the client lost every broker connection since the last call. librdkafka
        then reconnects by itself, within the session, and says nothing when it is
        back: this is the one sign of it, counted so the connector's ``reconnects``
        metric shows connections dropped and restored, not only sessions replaced. A
        lower bound: librdkafka does not report every such loss (in the connection-cut
        test, one or two of three)."""
        n, self.lost_all = self.lost_all, 0
        return n

    def last(self) -> str:
        if self.recent:
            return str(self.recent[-1].str())
        return self.last_log

    def raise_fatal(self, make_error: MakeError) -> None:
        if self.fatal is not None:
            raise make_error(f"fatal client error: {self.fatal.str()}")

    def post_to(self, post: Callable[[BaseException], None], make_error: MakeError) -> None:
        """Report what the client said since the last call (the mailbox rate-limits)."""
        while self.unreported:
            post(make_error(self.unreported.popleft().str()))


def check_topic(
    client: Any, topic: str, timeout: float, errors: KafkaErrors, make_error: MakeError
) -> list[int]:
    """The topic's partitions, sorted; ConnectorError when the broker cannot be reached
    or has no such topic. Lists every topic (a metadata request for one topic may
    create it on a broker that auto-creates topics)."""
    from confluent_kafka import KafkaException

    try:
        metadata = client.list_topics(timeout=timeout)
    except KafkaException as exc:
        if not getattr(client, "assignment", list)():
            # Serve the queued callbacks (the client's logs and errors name the cause);
            # never on a consumer with partitions, whose poll would take a record.
            client.poll(0.1)
        cause = errors.last() or str(exc.args[0].str() if exc.args else exc)
        raise make_error(f"cannot reach the broker: {cause}") from exc
    errors.unreported.clear()  # connecting is fine now: what was said before is stale
    info = metadata.topics.get(topic)
    if info is None:
        raise make_error(f"topic {topic!r} does not exist")
    if info.error is not None:
        raise make_error(f"topic {topic!r}: {info.error.str()}")
    return sorted(info.partitions)


def produce_all(producer: Any, topic: str, bodies: list[bytes], timeout: float) -> list[str | None]:
    """Produce ``bodies`` and wait up to ``timeout`` seconds for their delivery reports:
    one verdict per body, None when the broker confirmed it, else why not."""
    verdicts: list[str | None] = ["no delivery report"] * len(bodies)
    reported = 0

    def report(i: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            nonlocal reported
            reported += 1
            verdicts[i] = None if err is None else err.str()

        return on_delivery

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    expected = len(bodies)  # delivery reports to wait for
    for i, body in enumerate(bodies):
        while True:
            try:
                producer.produce(topic, body, on_delivery=report(i))
                break
            except BufferError:  # the client's queue is full: let reports drain it
                producer.poll(0.05)
                if time.monotonic() > deadline:
                    verdicts[i] = "the producer's queue stayed full"
                    expected -= 1
                    break
            except KafkaException as exc:
                # Refused by the client before it was sent (a record over
                # message.max.bytes, say): this record's verdict, not the batch's, and
                # not a sign of a broken connection.
                err = exc.args[0] if exc.args else exc
                verdicts[i] = f"refused: {err.str() if hasattr(err, 'str') else err}"
                expected -= 1
                break
    while reported < expected and time.monotonic() < deadline:
        producer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
    if reported < expected:
        verdicts = [
            v if v != "no delivery report" else f"no delivery report within {timeout} s"
            for v in verdicts
        ]
    return verdicts
