"""Exactly-once Kafka output for Trident: ``TridentKafkaStateFactory`` with
``TridentKafkaStateUpdater`` (Storm's TridentKafkaState ignores its commits and so
writes a replayed batch twice; this one does not).

Each partition of the state is one transactional producer whose ``transactional.id``
is ``<prefix>-<partition>``, the prefix being ``transactional_id_prefix`` or
``tupletree-<topology>-<component>`` (from the TopologyContext the committer passes as
``metrics``): stable across restarts, so a restarted task's ``init_transactions`` fences
the task it replaces (a zombie's next write fails with ``_FENCED``) and aborts the
transaction that task left open.

A batch, in ``commit(txid)``: ``begin_transaction``; the batch's records (value from
``message_field``, key from ``key_field``); a *marker* record ``{"txid": txid}`` keyed by
the transactional.id on the marker topic; ``commit_transaction``. Records are produced
only here, not as the batch's tuples arrive, so a transaction is open for one commit's
duration and a failing batch leaves the least behind.

The marker topic (``<topic>-tupletree-txids`` unless ``marker_topic`` says otherwise;
created with ``cleanup.policy=compact`` and one partition per state partition when
missing): a marker commits with its batch, so the last committed marker of a
transactional.id *is* its last committed txid. Why a topic of its own rather than
markers in the output topic: readers of the output see only the user's records; why a
partition per state partition: that partition's last record is the marker wanted, so
reading it back costs the tail of one partition, not the topic (compaction keeps one
marker per transactional.id on a broker that compacts). At start, after
``init_transactions`` (so no other instance can still commit), a ``read_committed``
consumer reads the marker topic back: the last marker of every ``<prefix>-<q>``, with
the partition count it was committed under (markers are written every batch, empty
ones too). ``decide_in_layout`` then decides each batch as every sink does
(trident/state/sinks/base.py): a txid an earlier layout (another parallelism) committed
whole is skipped, one it committed in part refused (``SinkLayoutError``); else a batch at
this partition's txid is skipped, one below it refused (``BatchBehindError``).

Errors: ``commit_transaction`` is tried again on a retriable error. When every try
timed out, whether the batch committed is unknown (the coordinator may have committed it
and its answer been lost): the batch fails, nothing is aborted, and the next commit
starts as a restarted task does (a new producer, whose ``init_transactions`` completes
or aborts what the old one left, then the markers read back), so the replayed batch is
skipped if it did commit and written once if it did not. An error that
requires an abort aborts and raises (the batch fails and is replayed with its txid); a
fatal one (fenced: another task took this partition over) raises now and at every later
commit, without a new ``init_transactions`` (which would fence the task that replaced
this one). ``transaction.timeout.ms`` (60 s, librdkafka's) bounds how long a dead
task's transaction blocks ``read_committed`` readers if no task takes its id over.

Readers must use ``isolation.level=read_committed``. tansu 0.6.0 (the tests' broker)
returns no aborted-transaction ranges in its fetch responses, so there even a
read_committed reader sees records of aborted transactions (an open one stays hidden);
Kafka hides them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from tupletree.connectors.kafka.client import KafkaErrors, client_config
from tupletree.redact import redact
from tupletree.trident.state.base import State
from tupletree.trident.state.operations import BaseStateUpdater
from tupletree.trident.state.sinks.base import Mark, SinkFactory, decide_in_layout

MARKER_SUFFIX = "-tupletree-txids"
TIMEOUT_SECS = 30.0
COMMIT_TRIES = 5


class TridentKafkaError(RuntimeError):
    """A batch could not be written to Kafka; ``transactional_id`` names the producer."""

    def __init__(self, message: str, *, transactional_id: str) -> None:
        super().__init__(message)
        self.transactional_id = transactional_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.transactional_id))


def _rebuild(message: str, transactional_id: str) -> TridentKafkaError:
    return TridentKafkaError(message, transactional_id=transactional_id)


Record = tuple[bytes | None, bytes | None]  # (key, value)


def last_marks(records: Iterable[Record], prefix: str) -> dict[int, Mark]:
    """The last marker of each ``<prefix>-<partition>`` among ``(key, value)`` records in
    log order, as partition -> Mark (its txid and the partition count it was committed
    under; None from before counts were kept). Pure."""
    head = prefix.encode() + b"-"
    marks: dict[int, Mark] = {}
    for k, v in records:
        if k is None or v is None or not k.startswith(head) or not k[len(head) :].isdigit():
            continue
        body = json.loads(v)
        count = body.get("partitions")
        marks[int(k[len(head) :])] = Mark(int(body["txid"]), None if count is None else int(count))
    return marks


def _encode(what: str, field: str, value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(
        f"TridentKafkaState: the {what} field {field!r} holds {type(value).__name__} "
        f"{value!r}; it takes str, bytes or None"
    )


class TridentKafkaState(State):
    """One partition's transactional producer (module docstring)."""

    def __init__(
        self,
        factory: TridentKafkaStateFactory,
        transactional_id: str,
        partition: int,
        partitions: int,
        prefix: str | None = None,
    ) -> None:
        self.factory, self.partition, self.partitions = factory, partition, partitions
        self.transactional_id = transactional_id
        self.prefix = transactional_id.rsplit("-", 1)[0] if prefix is None else prefix
        self.where = (
            f"TridentKafkaState topic {factory.topic!r} at {redact(factory.bootstrap_servers)} "
            f"(transactional.id {transactional_id!r})"
        )
        self._records: list[Record] = []
        self._dead: str | None = None
        self._delivery_error: str | None = None
        # The last commit's outcome is unknown (every try timed out): start over first.
        self._uncertain = False
        self.errors = KafkaErrors()  # the client's logs go to logging, its errors kept
        self.producer = self._new_producer()
        self.marker_partitions = self._ensure_marker_topic(partitions)
        self.marker_partition = partition % self.marker_partitions
        # every partition's last marker, of any layout (sinks/base.py decide_in_layout):
        # an earlier layout's do not change while this one runs
        self.marks = self._read_marks()

    #: Every partition records every txid, with or without records (sinks/base.py).
    commit_empty_batches = True

    @property
    def last(self) -> int | None:
        """This partition's last committed txid (None: nothing yet)."""
        mark = self.marks.get(self.partition)
        return None if mark is None else mark.txid

    # -- start ----------------------------------------------------------------------

    def _new_producer(self) -> Any:
        """This partition's transactional producer, its ``init_transactions`` done: any
        transaction an earlier producer of the transactional.id left is completed (a
        commit under way) or aborted, and that producer fenced."""
        from confluent_kafka import Producer

        producer = Producer(
            {
                **client_config(self.factory.bootstrap_servers, self.errors),
                "transactional.id": self.transactional_id,
                **self.factory.producer_config,
            }
        )
        self._kafka("init_transactions", lambda: producer.init_transactions(TIMEOUT_SECS))
        return producer

    def _kafka(self, what: str, call: Any) -> Any:
        from confluent_kafka import KafkaException

        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0]
            raise TridentKafkaError(
                f"{self.where}: {what} failed: {err.str()}", transactional_id=self.transactional_id
            ) from None

    def _ensure_marker_topic(self, partitions: int) -> int:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = self.factory.marker_topic
        admin = AdminClient(client_config(self.factory.bootstrap_servers, KafkaErrors()))
        new = NewTopic(topic, num_partitions=partitions, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([new])[topic].result(TIMEOUT_SECS)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TridentKafkaError(
                    f"{self.where}: cannot create the marker topic {topic!r}: {exc.args[0].str()}",
                    transactional_id=self.transactional_id,
                ) from None
        meta = self._kafka("metadata", lambda: admin.list_topics(topic, timeout=TIMEOUT_SECS))
        info = meta.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise TridentKafkaError(
                f"{self.where}: the marker topic {topic!r} has no partitions",
                transactional_id=self.transactional_id,
            )
        return len(info.partitions)

    def _read_marks(self) -> dict[int, Mark]:
        """The last committed marker of every ``<prefix>-<partition>``, reading each
        marker partition whole (compaction keeps one marker per transactional.id)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                **client_config(self.factory.bootstrap_servers, KafkaErrors()),
                "group.id": f"{self.transactional_id}-marker-reader",  # never committed
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        topic = self.factory.marker_topic
        records: list[Record] = []
        try:
            for q in range(self.marker_partitions):
                tp = TopicPartition(topic, q)
                low, _high = self._kafka(
                    "reading the markers' offsets",
                    lambda tp=tp: consumer.get_watermark_offsets(tp, timeout=TIMEOUT_SECS),
                )
                consumer.assign([TopicPartition(topic, q, low)])
                deadline = time.monotonic() + TIMEOUT_SECS
                while True:
                    if time.monotonic() > deadline:
                        raise TridentKafkaError(
                            f"{self.where}: no end of marker partition {q} of {topic!r} "
                            f"within {TIMEOUT_SECS} s",
                            transactional_id=self.transactional_id,
                        )
                    msg = consumer.poll(0.5)
                    if msg is None:
                        continue
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            break
                        raise TridentKafkaError(
                            f"{self.where}: reading the markers: {msg.error().str()}",
                            transactional_id=self.transactional_id,
                        )
                    records.append((msg.key(), msg.value()))
        finally:
            consumer.close()
        return last_marks(records, self.prefix)

    # -- batches --------------------------------------------------------------------

    def begin_commit(self, txid: int | None) -> None:
        self._records = []

    def add(self, tuples: Sequence[Any]) -> None:
        f = self.factory
        for t in tuples:
            value = _encode("message", f.message_field, t.get(f.message_field))
            key = None if f.key_field is None else _encode("key", f.key_field, t.get(f.key_field))
            self._records.append((key, value))

    def commit(self, txid: int | None) -> None:
        records, self._records = self._records, []
        if self._dead is not None:
            raise TridentKafkaError(self._dead, transactional_id=self.transactional_id)
        if self._uncertain:
            # As a restarted task: the last commit is settled and read back first.
            self.producer = self._new_producer()
            self.marks = self._read_marks()
            self._uncertain = False
        if txid is None:
            if records:
                self._transaction(txid, records)
            return
        if not decide_in_layout(
            txid,
            self.marks,
            partition=self.partition,
            partitions=self.partitions,
            where=self.where,
        ):
            return
        self._transaction(txid, records)
        self.marks[self.partition] = Mark(txid, self.partitions)

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None and self._delivery_error is None:
            self._delivery_error = err.str()

    def _produce(self, topic: str, value: bytes | None, key: bytes | None, **kw: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, on_delivery=self._on_delivery, **kw)
                return
            except BufferError:  # the client's queue is full: let it send
                self.producer.poll(0.05)

    def _transaction(
        self, txid: int | None, records: list[tuple[bytes | None, bytes | None]]
    ) -> None:
        from confluent_kafka import KafkaException

        p, f = self.producer, self.factory
        self._delivery_error = None
        try:
            p.begin_transaction()
            for key, value in records:
                self._produce(f.topic, value, key)
            if txid is not None:
                marker = json.dumps(
                    {"txid": txid, "partition": self.partition, "partitions": self.partitions}
                ).encode()
                self._produce(
                    f.marker_topic,
                    marker,
                    self.transactional_id.encode(),
                    partition=self.marker_partition,
                )
            for attempt in range(COMMIT_TRIES):
                try:
                    p.commit_transaction(TIMEOUT_SECS)
                    return
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
                    if attempt == COMMIT_TRIES - 1:
                        self._uncertain = True
                        raise TridentKafkaError(
                            f"{self.where}: batch {txid}'s commit got no answer in "
                            f"{COMMIT_TRIES} tries ({exc.args[0].str()}); whether it "
                            "committed is read back before the replay",
                            transactional_id=self.transactional_id,
                        ) from None
        except KafkaException as exc:
            self._failed(txid, exc.args[0])

    def _failed(self, txid: int | None, err: Any) -> None:
        why = err.str() + (f" (delivery: {self._delivery_error})" if self._delivery_error else "")
        if err.fatal():
            self._dead = (
                f"{self.where}: fatal producer error, no more batches from this task: {why}"
                + (" (another task took this partition over)" if "fenced" in why.lower() else "")
            )
            raise TridentKafkaError(self._dead, transactional_id=self.transactional_id)
        try:
            self.producer.abort_transaction(TIMEOUT_SECS)
        except Exception as exc:  # the batch fails either way; say both
            why += f"; the abort failed too: {exc}"
        raise TridentKafkaError(
            f"{self.where}: batch {txid} aborted, to be replayed: {why}",
            transactional_id=self.transactional_id,
        )

    def close(self) -> None:
        self.producer.flush(TIMEOUT_SECS)


class TridentKafkaStateFactory(SinkFactory):
    """Exactly-once output to ``topic`` (module docstring). An append-only sink: exactly
    once behind a transactional spout with no shuffle before it (the planner checks
    ``requires_deterministic_batches``)."""

    store_kind = "kafka"

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str = "127.0.0.1:9092",
        *,
        message_field: str = "message",
        key_field: str | None = None,
        transactional_id_prefix: str | None = None,
        producer_config: dict[str, Any] | None = None,
        marker_topic: str | None = None,
    ) -> None:
        if not isinstance(topic, str) or not topic:
            raise ValueError(
                f"TridentKafkaStateFactory topic must be a non-empty str, got {topic!r}"
            )
        config = dict(producer_config or {})
        if "transactional.id" in config:
            raise ValueError(
                "TridentKafkaStateFactory sets transactional.id per partition itself; give "
                "transactional_id_prefix instead of producer_config['transactional.id']"
            )
        self.topic, self.bootstrap_servers = topic, bootstrap_servers
        self.message_field, self.key_field = message_field, key_field
        self.transactional_id_prefix = transactional_id_prefix
        self.producer_config = config
        self.marker_topic = marker_topic or topic + MARKER_SUFFIX

    def transactional_id(self, conf: dict[str, Any], context: Any, partition_index: int) -> str:
        """``<prefix>-<partition>``; the prefix from ``transactional_id_prefix`` or the
        topology and component of ``context`` (ValueError when neither is known)."""
        prefix = self.transactional_id_prefix
        if prefix is None:
            topology = getattr(context, "topology_name", None) or conf.get("topology.name")
            component = getattr(context, "component_id", None)
            if not topology or not component:
                raise ValueError(
                    f"TridentKafkaStateFactory({self.topic!r}): give transactional_id_prefix "
                    "(no topology and component to name the producers after were given)"
                )
            prefix = f"tupletree-{topology}-{component}"
        return f"{prefix}-{partition_index}"

    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        tid = self.transactional_id(conf, metrics, partition_index)
        prefix = tid[: -len(f"-{partition_index}")]
        return TridentKafkaState(self, tid, partition_index, num_partitions, prefix)


class TridentKafkaStateUpdater(BaseStateUpdater):
    """Hands a batch's tuples to the Kafka state (message and key read by field name)."""

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        if not isinstance(state, TridentKafkaState):
            raise TypeError(
                "TridentKafkaStateUpdater writes to a TridentKafkaState, not "
                f"{type(state).__name__}"
            )
        state.add(tuples)
