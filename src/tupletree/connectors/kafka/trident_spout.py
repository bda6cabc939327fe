"""Kafka's Trident spouts (storm-kafka-client's KafkaTridentSpoutTransactional and
KafkaTridentSpoutOpaque) on confluent-kafka.

Both are partitioned spouts: the coordinator lists the topic's partitions (the batch's
metadata), each spout task reads its round-robin share of them (``task i`` takes
partitions ``i, i + n, ...``), and a batch takes up to ``max_batch_size`` records of each
partition, from where the partition's previous batch ended. A partition's batch
metadata is Storm's ``{"firstOffset", "lastOffset", "topologyId"}`` (an empty batch:
``lastOffset = firstOffset - 1``), kept in Trident's progress store, not as the group's
committed offsets. Records are read with ``isolation.level=read_committed`` (only what
committed transactions wrote) and emitted as the field ``message`` (UTF-8 text), or
``decode(bytes) -> values`` for ``fields``, as KafkaSpout.

- Transactional: a replayed txid re-reads exactly its range of each partition; a range
  that cannot be read again (the broker is down, retention deleted it) fails the batch
  and the topology waits (stuck, shown where) until it can: Storm's refusal to skip.
- Opaque: a replayed txid reads from where the batch before it ended; a partition that
  cannot be read now is skipped (its metadata stays) and read by a later batch.

Where a partition starts with no metadata: ``first_poll`` as KafkaSpout's:
``uncommitted_earliest`` (the default) and ``uncommitted_latest`` start at the group's
committed offset (else the beginning, or the end); ``earliest`` and ``latest`` start
there, and also restart there when the metadata came from another submission (its
``topologyId`` differs: Storm's rule). KafkaSpout keywords that decide replays
(``processing_guarantee``, ``retry``, ``dead_letter``, ``max_uncommitted_offsets``,
``commit_period_secs``) mean nothing here, where Trident decides, and are refused.

Blocking: a batch reads for at most ``poll_timeout_secs`` (new batches) or
``timeout_secs`` (a transactional re-read), on the bolt's thread, as Storm's emitter does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from tupletree.connectors.errors import ConnectorError
from tupletree.connectors.kafka.assignment import FIRST_POLL_STRATEGIES
from tupletree.connectors.kafka.client import KafkaErrors, check_topic, client_config
from tupletree.redact import redact
from tupletree.topology.fields import Fields
from tupletree.trident.spout import IOpaquePartitionedTridentSpout, IPartitionedTridentSpout

_REFUSED = {
    "processing_guarantee": "at_least_once",
    "retry": None,
    "dead_letter": None,
    "max_uncommitted_offsets": 10_000,
    "commit_period_secs": 5.0,
}


def _utf8(body: bytes) -> list[Any]:
    return [body.decode("utf-8", "replace")]


class _KafkaTridentBase:
    def __init__(
        self,
        topic: str,
        group_id: str,
        bootstrap_servers: str = "127.0.0.1:9092",
        *,
        first_poll: str = "uncommitted_earliest",
        max_batch_size: int = 1000,
        poll_timeout_secs: float = 0.2,
        partition_refresh_secs: float = 2.0,
        consumer_config: dict[str, Any] | None = None,
        timeout_secs: float = 10.0,
        fields: list[str] | None = None,
        decode: Callable[[bytes], list[Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        what = type(self).__name__
        for name, value in (("topic", topic), ("group_id", group_id)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{what} {name} must be a non-empty string, got {value!r}")
        if first_poll not in FIRST_POLL_STRATEGIES:
            raise ValueError(
                f"{what} first_poll must be one of {', '.join(FIRST_POLL_STRATEGIES)}, "
                f"got {first_poll!r}"
            )
        if (
            isinstance(max_batch_size, bool)
            or not isinstance(max_batch_size, int)
            or max_batch_size < 1
        ):
            raise ValueError(
                f"{what} max_batch_size must be a positive integer, got {max_batch_size!r}"
            )
        for key, value in kwargs.items():
            if key not in _REFUSED and key not in ("buffer_size", "reconnect", "check_at_submit"):
                raise TypeError(f"{what} got an unexpected keyword {key!r}")
            if key in _REFUSED and value != _REFUSED[key]:
                raise ValueError(
                    f"{what}: {key} does not apply under Trident, which replays whole "
                    "batches by txid (the spout's kind decides what a replay brings)"
                )
        self.topic = topic
        self.group_id = group_id
        self.bootstrap_servers = bootstrap_servers
        self.first_poll = first_poll
        self.max_batch_size = max_batch_size
        self.poll_timeout_secs = poll_timeout_secs
        self.partition_refresh_secs = partition_refresh_secs
        self.consumer_config = dict(consumer_config or {})
        self.timeout_secs = timeout_secs
        self.fields = list(fields) if fields is not None else ["message"]
        self.decode = decode or _utf8
        # Storm's topologyId: this submission's (a pickled copy keeps it; a new build of
        # the topology makes a new spout, and a new id).
        self.topology_id = uuid.uuid4().hex

    def get_output_fields(self) -> Fields:
        return Fields(self.fields)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Any:
        return _Coordinator(self)

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        return _Emitter(self)

    def connector_error(self, message: str) -> ConnectorError:
        return ConnectorError(
            f"{type(self).__name__}({self.topic!r})", redact(self.bootstrap_servers), message
        )

    def consumer(self, errors: KafkaErrors) -> Any:
        from confluent_kafka import Consumer

        return Consumer(
            {
                **client_config(self.bootstrap_servers, errors, self.group_id),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
                "fetch.queue.backoff.ms": 10,
                "fetch.error.backoff.ms": 10,
                **self.consumer_config,
            }
        )


class KafkaTridentSpoutTransactional(_KafkaTridentBase, IPartitionedTridentSpout):
    """A txid's batch of each partition is a fixed offset range: a replay re-reads it."""


class KafkaTridentSpoutOpaque(_KafkaTridentBase, IOpaquePartitionedTridentSpout):
    """A replay reads from where the batch before it ended; an unreadable partition is
    skipped for the batch."""


class _Coordinator:
    """Lists the topic's partitions (the batch metadata), again every
    ``partition_refresh_secs``."""

    def __init__(self, spout: _KafkaTridentBase) -> None:
        self.spout = spout
        self.errors = KafkaErrors()
        self.client: Any = None
        self.partitions: list[int] = []
        self.listed_at = -1e18

    def get_partitions_for_batch(self) -> list[int]:
        now = time.monotonic()
        if now - self.listed_at >= self.spout.partition_refresh_secs or not self.partitions:
            if self.client is None:
                self.client = self.spout.consumer(self.errors)
            sp = self.spout
            self.partitions = check_topic(
                self.client, sp.topic, sp.timeout_secs, self.errors, sp.connector_error
            )
            self.listed_at = now
        return list(self.partitions)

    def is_ready(self, txid: int) -> bool:
        return True

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class _Emitter:
    def __init__(self, spout: _KafkaTridentBase) -> None:
        self.spout = spout
        self.errors = KafkaErrors()
        self.consumer = spout.consumer(self.errors)
        self.mine: list[int] = []
        self.group_starts: dict[int, int] = {}

    def get_ordered_partitions(self, all_partition_info: Any) -> list[int]:
        return sorted(int(p) for p in all_partition_info or [])

    def get_partitions_for_task(
        self, task_index: int, num_tasks: int, ordered: list[int]
    ) -> list[int]:
        return list(ordered[task_index::num_tasks])

    def refresh_partitions(self, partition_responsibilities: list[int]) -> None:
        self.mine = list(partition_responsibilities)

    # -- reading ------------------------------------------------------------------------

    def _first_offset(self, p: int, last: Any) -> int:
        """Where partition ``p``'s next batch starts: after ``last`` (its previous
        batch's metadata), or per ``first_poll``."""
        sp = self.spout
        fresh = last is None or (
            sp.first_poll in ("earliest", "latest") and last.get("topologyId") != sp.topology_id
        )
        if not fresh:
            return int(last["lastOffset"]) + 1
        from confluent_kafka import TopicPartition

        tp = TopicPartition(sp.topic, p)
        if sp.first_poll.startswith("uncommitted"):
            (committed,) = self.consumer.committed([tp], timeout=sp.timeout_secs)
            if committed.offset >= 0:
                return int(committed.offset)
        low, high = self.consumer.get_watermark_offsets(tp, sp.timeout_secs, cached=False)
        return int(high if sp.first_poll.endswith("latest") else low)

    def _read(
        self, starts: dict[int, int], limits: dict[int, int | None], timeout: float
    ) -> dict[int, list[Any]]:
        """Records of each partition from ``starts[p]``: up to ``max_batch_size``, or
        through offset ``limits[p]`` (a re-read), within ``timeout`` seconds."""
        from confluent_kafka import KafkaError, TopicPartition

        sp = self.spout
        got: dict[int, list[Any]] = {p: [] for p in starts}
        if not starts:
            return got
        self.consumer.assign([TopicPartition(sp.topic, p, o) for p, o in starts.items()])
        done: set[int] = {p for p, lim in limits.items() if lim is not None and lim < starts[p]}
        deadline = time.monotonic() + timeout
        while len(done) < len(starts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msgs = self.consumer.consume(sp.max_batch_size, min(left, 0.1))
            if not msgs and all(limits[p] is None for p in starts if p not in done):
                break  # nothing more now: a new batch takes what there is
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        self.errors.record(err)
                    continue
                p = m.partition()
                if p in done or p not in got or m.offset() < starts[p]:
                    continue
                limit = limits[p]
                if limit is not None and m.offset() > limit:
                    done.add(p)
                    continue
                got[p].append(m)
                if (limit is not None and m.offset() >= limit) or (
                    limit is None and len(got[p]) >= sp.max_batch_size
                ):
                    done.add(p)
        self.consumer.unassign()
        self.errors.raise_fatal(sp.connector_error)
        return got

    def _emit(self, collector: Any, records: list[Any]) -> None:
        decode = self.spout.decode
        for m in records:
            collector.emit(decode(m.value() or b""))

    def _meta(self, first: int, records: list[Any]) -> dict[str, Any]:
        last = records[-1].offset() if records else first - 1
        return {"firstOffset": first, "lastOffset": last, "topologyId": self.spout.topology_id}

    def emit_batch_new(
        self, tx: Any, collector: Any, partitions: Any, last_partition_meta: Any
    ) -> dict[int, Any]:
        starts: dict[int, int] = {}
        skipped: dict[int, Any] = {}
        for p in sorted(partitions):
            try:
                starts[p] = self._first_offset(p, last_partition_meta.get(p))
            except Exception as exc:  # this partition cannot be read now
                if isinstance(self.spout, IPartitionedTridentSpout):
                    raise self.spout.connector_error(f"partition {p}: {exc}") from exc
                skipped[p] = last_partition_meta.get(p)
        got = self._read(starts, dict.fromkeys(starts), self.spout.poll_timeout_secs)
        metas: dict[int, Any] = {}
        for p in sorted(starts):
            self._emit(collector, got[p])
            metas[p] = self._meta(starts[p], got[p])
        for p, meta in skipped.items():
            if meta is not None:
                metas[p] = meta
        return metas

    def re_emit_partition_batch(self, tx: Any, collector: Any, partition: Any, meta: Any) -> None:
        if meta is None:
            return
        first, last = int(meta["firstOffset"]), int(meta["lastOffset"])
        if last < first:
            return  # an empty batch
        got = self._read({partition: first}, {partition: last}, self.spout.timeout_secs)[partition]
        if not got or got[-1].offset() != last:
            raise self.spout.connector_error(
                f"partition {partition}: could not read offsets {first}..{last} again within "
                f"{self.spout.timeout_secs} s (got {len(got)} records; {self.errors.last()})"
            )
        self._emit(collector, got)

    def close(self) -> None:
        self.consumer.close()
