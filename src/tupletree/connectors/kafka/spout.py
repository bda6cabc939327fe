"""KafkaSpout: storm-kafka-client's spout on confluent-kafka.

- Partitions: each task takes its round-robin share of the topic's partitions
  (``assignment.partitions_for_task``) with manual assignment, and looks again every
  ``partition_refresh_secs``; it never joins a consumer-group rebalance. ``group_id``
  names where offsets are committed.
- Start: ``first_poll`` (``assignment.start_offset``): ``uncommitted_earliest`` (the
  default), ``uncommitted_latest``, ``earliest`` or ``latest``. A commit carries this
  run's id as its metadata, so the strategy does not rewind a partition this run
  already committed (a restarted worker resumes); a broker that drops commit metadata
  (tansu does) loses only that, within a task's life the task remembers.
- ``processing_guarantee``: ``at_least_once`` (the default): records are emitted with
  their ``(partition, offset)`` as msg id; per partition a ``PartitionOffsets`` commits
  the contiguous acked prefix every ``commit_period_secs``, on ``deactivate`` and on
  ``close``; a failed record is replayed by the spout after the RetryPolicy's backoff
  and nothing past it is committed until it is acked (or dead-lettered: written to the
  ``dead_letter`` topic, confirmed, then counted as acked); a partition holding
  ``max_uncommitted_offsets`` emitted-but-uncommitted records is paused (a partition
  half that full commits its acked prefix at once, not at the next period, so a busy
  partition does not pause and a paused one resumes as soon as it can).
  ``at_most_once``: the offsets of what was polled are committed before it is
  emitted, untracked. ``none``: emitted untracked, positions committed on the timer.
- Kafka has no per-message lease, so no message timeout check applies; ``reset_timeout``
  does nothing at the broker.

All broker I/O (consumer, commits, the dead-letter producer) happens on the spout's
I/O thread (BrokerSpout); a reconnect starts a new consumer at the committed offsets,
and what the old one delivered is dropped (``settles_survive_reconnect`` is False).

In a stateful topology's aligned checkpoint mode (tupletree.state.aligned) the spout
rewinds: ``position()`` is, per partition of this task, the offset after the last
record it emitted (as ``{"<partition>": offset}``); ``rewind(position)`` drops what it
fetched and holds and starts a new consumer there (None: at the committed offsets, as
at a start); ``committed(position)`` commits those offsets to Kafka (on the I/O
thread). A reconnect in that mode drops what the old consumer had fetched, so the spout
can no longer vouch for its position: ``lost_position()`` says so, and the next
checkpoint is refused, which rewinds every spout to the last committed one.
"""

from __future__ import annotations

import uuid
from typing import Any

from tupletree.connectors.kafka.assignment import (
    BEGINNING,
    FIRST_POLL_STRATEGIES,
    PROCESSING_GUARANTEES,
    partitions_for_task,
    start_offset,
)
from tupletree.connectors.kafka.client import (
    KafkaErrors,
    check_topic,
    client_config,
    produce_all,
)
from tupletree.connectors.kafka.offsets import PartitionOffsets
from tupletree.connectors.mailbox import close_quietly
from tupletree.connectors.spout import ACK, DEAD, RETRY, BrokerSpout, Delivery
from tupletree.redact import redact


class KafkaSpout(BrokerSpout):
    settles_survive_reconnect = False

    def __init__(
        self,
        topic: str,
        group_id: str,
        bootstrap_servers: str = "127.0.0.1:9092",
        *,
        first_poll: str = "uncommitted_earliest",
        processing_guarantee: str = "at_least_once",
        max_uncommitted_offsets: int = 10_000,
        commit_period_secs: float = 5.0,
        partition_refresh_secs: float = 2.0,
        consumer_config: dict[str, Any] | None = None,
        timeout_secs: float = 10.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value in (("topic", topic), ("group_id", group_id)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"KafkaSpout {name} must be a non-empty string, got {value!r}")
        if first_poll not in FIRST_POLL_STRATEGIES:
            raise ValueError(
                f"KafkaSpout first_poll must be one of {', '.join(FIRST_POLL_STRATEGIES)}, "
                f"got {first_poll!r}"
            )
        if processing_guarantee not in PROCESSING_GUARANTEES:
            raise ValueError(
                "KafkaSpout processing_guarantee must be one of "
                f"{', '.join(PROCESSING_GUARANTEES)}, got {processing_guarantee!r}"
            )
        if not isinstance(max_uncommitted_offsets, int) or max_uncommitted_offsets < 1:
            raise ValueError(
                "KafkaSpout max_uncommitted_offsets must be a positive integer, got "
                f"{max_uncommitted_offsets!r}"
            )
        self.topic = topic
        self.group_id = group_id
        self.bootstrap_servers = bootstrap_servers
        self.first_poll = first_poll
        self.processing_guarantee = processing_guarantee
        self.tracked = processing_guarantee == "at_least_once"
        self.max_uncommitted_offsets = max_uncommitted_offsets
        self.commit_period_secs = commit_period_secs
        self.partition_refresh_secs = partition_refresh_secs
        self.consumer_config = dict(consumer_config or {})
        self.timeout_secs = timeout_secs
        self.run_id = ""
        # Partitions this task has started reading in its life (I/O thread only).
        self.started: set[int] = set()
        self._commit_now = False
        # The aligned mode (module docstring). A rewind: the worker's thread sets
        # ``_start_at`` and bumps ``_rewind_seq``; the I/O thread starts a consumer
        # there and sets ``_rewind_done`` to that number; until then nothing is emitted.
        self._start_at: dict[int, int] | None = None
        self._rewind_seq = 0
        self._rewind_serving = 0
        self._rewind_done = 0
        self._positions: dict[int, int] = {}
        self._to_commit: dict[int, int] | None = None
        self._lost = False

    def address(self) -> str:
        return redact(self.bootstrap_servers)

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        # Set before the topology's components are copied to their tasks: every task
        # of this submission (and a restarted one) carries the same id.
        self.run_id = uuid.uuid4().hex
        super().check_config(conf, component)

    def connect(self, epoch: int) -> _Session:
        return _Session(self, epoch)

    def probe(self) -> None:
        """At submit: the broker answers, and has the topic and the dead-letter topic."""
        from confluent_kafka import Consumer

        errors = KafkaErrors()
        consumer = Consumer(client_config(self.bootstrap_servers, errors, self.group_id))

        try:
            for topic in (self.topic, self.dead_letter):
                if topic is not None:
                    check_topic(consumer, topic, self.timeout_secs, errors, self.connector_error)
        finally:
            consumer.close()

    def deactivate(self) -> None:
        self._commit_now = True
        if hasattr(self, "_kick"):
            self._kick.set()

    # -- the aligned checkpoint mode (module docstring) -----------------------------------

    def next_tuple(self) -> None:
        if self._rewind_done != self._rewind_seq:
            return  # the consumer is being moved to a rewound position
        super().next_tuple()

    def _emit(self, d: Delivery) -> None:
        super()._emit(d)
        p, offset = d.key
        self._positions[p] = offset + 1

    def position(self) -> dict[str, int]:
        return {str(p): o for p, o in sorted(self._positions.items())}

    def rewind(self, position: dict[str, int] | None) -> None:
        start = None if position is None else {int(p): int(o) for p, o in position.items()}
        self._inbound.clear()
        self._held.clear()
        self._trees.clear()
        self._retries.clear()
        self._positions = dict(start or {})
        self._start_at = start
        self._lost = False
        self._rewind_seq += 1
        self._kick.set()

    def committed(self, position: dict[str, int]) -> None:
        self._to_commit = {int(p): int(o) for p, o in position.items()}
        self._kick.set()

    def lost_position(self) -> bool:
        return self._lost

    def _io_turn(self, session: Any) -> Any:
        """Before each turn of the I/O thread: a rewind asked for ends the session (the
        next starts at the position); offsets to commit for a checkpoint are committed."""
        if session is not None and self._rewind_seq != self._rewind_done:
            close_quietly(session)
            session = None
        if session is None:
            # The next consumer starts where the worker's thread last asked (read
            # before it connects: a rewind asked meanwhile is served by the one after).
            self._rewind_serving = self._rewind_seq
            return None
        commit, self._to_commit = self._to_commit, None
        if commit:
            session.commit_checkpoint(commit)
        return session

    def _session_started(self, session: Any, reconnect: bool) -> None:
        serving = self._rewind_serving
        if serving != self._rewind_done:
            self._rewind_done = serving  # the new consumer starts at the rewound position
        elif reconnect and serving:
            self._lost = True  # aligned: what the old consumer fetched is gone


class _Session:
    def __init__(self, spout: KafkaSpout, epoch: int) -> None:
        from confluent_kafka import Consumer

        self.spout = spout
        self.epoch = epoch
        self.errors = KafkaErrors()
        conf = {
            **client_config(spout.bootstrap_servers, self.errors, spout.group_id),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "latest" if spout.first_poll.endswith("latest") else "earliest",
            # A resumed or rewound partition waits for its first fetch at most this long
            # (librdkafka's 500 ms default stalls the spout after each pause).
            "fetch.wait.max.ms": 50,
            "fetch.queue.backoff.ms": 10,
            "fetch.error.backoff.ms": 10,
            **spout.consumer_config,
        }
        self.consumer = Consumer(conf)
        self.producer: Any = None
        try:
            self.partitions = check_topic(
                self.consumer, spout.topic, spout.timeout_secs, self.errors, spout.connector_error
            )
        except BaseException:
            self.consumer.close()
            raise
        self.offsets: dict[int, PartitionOffsets] = {}
        self.assigned: list[int] = []
        self.paused: set[int] = set()
        self.resume_at: dict[int, int] = {}  # paused partition -> where it goes on
        now = spout.context.now()  # the cluster's clock: simulated time drives the timers
        self.next_refresh = now
        self.next_commit = now + spout.commit_period_secs
        self._refresh(now, list_again=False)

    # -- assignment ---------------------------------------------------------------------

    def _refresh(self, now: float, list_again: bool = True) -> None:
        from confluent_kafka import TopicPartition

        sp = self.spout
        self.next_refresh = now + sp.partition_refresh_secs
        if list_again:  # partitions added to the topic are picked up
            self.partitions = check_topic(
                self.consumer, sp.topic, sp.timeout_secs, self.errors, sp.connector_error
            )
        ctx = sp.context
        mine = partitions_for_task(
            self.partitions, ctx.this_task_index, len(ctx.this_component_tasks())
        )
        if mine == self.assigned:
            return
        gone = [p for p in self.assigned if p not in mine]
        if gone:
            self._commit(only=gone)
            self.consumer.incremental_unassign([TopicPartition(sp.topic, p) for p in gone])
            for p in gone:
                self.offsets.pop(p, None)
                self.paused.discard(p)
                self.resume_at.pop(p, None)
        new = [p for p in mine if p not in self.assigned]
        if new:
            committed = self.consumer.committed(
                [TopicPartition(sp.topic, p) for p in new], timeout=sp.timeout_secs
            )
            starts = []
            for tp in committed:
                ours = tp.metadata == sp.run_id and bool(sp.run_id)
                resume = tp.offset if tp.offset >= 0 else None
                start = start_offset(sp.first_poll, resume, ours or tp.partition in sp.started)
                if sp._start_at is not None and tp.partition in sp._start_at:
                    start = sp._start_at[tp.partition]  # the aligned mode's rewind
                if start < 0:  # the beginning or the end, as an offset
                    low, high = self.consumer.get_watermark_offsets(
                        TopicPartition(sp.topic, tp.partition), sp.timeout_secs, cached=False
                    )
                    start = low if start == BEGINNING else high
                starts.append(TopicPartition(sp.topic, tp.partition, start))
                sp.started.add(tp.partition)
                if sp.tracked:
                    self.offsets[tp.partition] = PartitionOffsets(start, sp.max_uncommitted_offsets)
            self.consumer.incremental_assign(starts)
        self.assigned = mine
        sp.io_counts["assigned"] = len(mine)

    # -- fetching -----------------------------------------------------------------------

    def _timers(self) -> None:
        now = self.spout.context.now()
        sp = self.spout
        if sp._commit_now or now >= self.next_commit or self._half_full_and_committable():
            sp._commit_now = False
            self.next_commit = now + sp.commit_period_secs
            self._commit()
        if now >= self.next_refresh:
            self._refresh(now)

    def _half_full_and_committable(self) -> bool:
        """A partition holding half its max_uncommitted_offsets whose acked prefix can
        be committed now: committing it early keeps a busy partition from pausing (and
        a paused one resumes at once, not at the next commit period). Cheap: the walk
        stops at the first record not acked."""
        return any(
            2 * m.uncommitted >= m.max_uncommitted and m.next_commit() is not None
            for m in self.offsets.values()
        )

    def keepalive(self) -> None:
        """The spout is held back (its buffer full): commit what completed meanwhile,
        on the commit period as always. (No group membership to keep: partitions are
        assigned by hand, so max.poll.interval.ms does not apply.)"""
        self.errors.raise_fatal(self.spout.connector_error)
        self._timers()

    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]:
        self.errors.raise_fatal(self.spout.connector_error)
        self._timers()
        self._pause_full_partitions()
        sp = self.spout
        msgs = self.consumer.consume(max_messages, timeout)
        sp.io_counts["reconnects"] += self.errors.take_reconnects()
        out: list[Delivery] = []
        last: dict[int, int] = {}
        rewind: dict[int, int] = {}  # partition -> first record not taken (it was full)
        for msg in msgs:
            err = msg.error()
            if err is not None:
                self.errors.record(err)
                continue
            p = msg.partition()
            offset = msg.offset()
            if p not in self.assigned or p in rewind:
                continue
            if sp.tracked:
                m = self.offsets[p]
                if offset <= m.last_emitted:
                    continue  # fetched again (after a rewind): already ours
                if m.paused:
                    rewind[p] = offset
                    continue
                m.emit(offset)
            last[p] = offset
            out.append(Delivery((p, offset), msg.value() or b"", self.epoch))
        if rewind:
            self._rewind(rewind)
        if last and sp.processing_guarantee == "at_most_once":
            self._commit_positions({p: o + 1 for p, o in last.items()})
        self.errors.post_to(sp._errors.post, self.spout.connector_error)
        return out

    def _rewind(self, rewind: dict[int, int]) -> None:
        """Pause these partitions, to be read again from these offsets once resumed: the
        records were polled in one batch past the partition's max_uncommitted_offsets."""
        from confluent_kafka import TopicPartition

        topic = self.spout.topic
        self.consumer.pause([TopicPartition(topic, p) for p in rewind])
        self.paused.update(rewind)
        self.resume_at.update(rewind)

    def _pause_full_partitions(self) -> None:
        """Pause the partitions that reached max_uncommitted_offsets, resume the others.
        A resumed partition is sought to where it stopped: librdkafka purged what it had
        fetched for it when paused, and a plain resume waits out a fetch backoff."""
        from confluent_kafka import TopicPartition

        full = {p for p, m in self.offsets.items() if m.paused}
        if full == self.paused:
            return
        topic = self.spout.topic
        stop = full - self.paused
        go = self.paused - full
        if stop:
            self.consumer.pause([TopicPartition(topic, p) for p in stop])
            for p in stop:
                self.resume_at.setdefault(p, self.offsets[p].last_emitted + 1)
        if go:
            for p in go:
                at = self.resume_at.pop(p, None)
                if at is not None:
                    self.consumer.seek(TopicPartition(topic, p, at))
            self.consumer.resume([TopicPartition(topic, p) for p in go])
        self.paused = full

    # -- settling and committing --------------------------------------------------------

    def settle(self, actions: list[tuple[str, Delivery]]) -> None:
        dead = []
        for action, d in actions:
            p, offset = d.key
            m = self.offsets.get(p)
            if action == ACK:
                if m is not None:
                    m.ack(offset)
            elif action == RETRY:
                if m is not None:
                    m.fail(offset)
            elif action == DEAD:
                dead.append(d)
        if dead:
            self._dead_letter(dead)
        self._timers()

    def _dead_letter(self, dead: list[Delivery]) -> None:
        sp = self.spout
        if sp.dead_letter is not None:
            if self.producer is None:
                from confluent_kafka import Producer

                self.producer = Producer(client_config(sp.bootstrap_servers, self.errors))
            refusals = produce_all(
                self.producer, sp.dead_letter, [d.body for d in dead], sp.timeout_secs
            )
            for d, why in zip(dead, refusals, strict=True):
                if why is not None:
                    # Not written: this session ends, and the next one reads the record
                    # again from the committed offset.
                    raise self.spout.connector_error(
                        f"record {d.key} could not be written to the dead letter topic "
                        f"{sp.dead_letter!r}: {why}"
                    )
        for d in dead:
            m = self.offsets.get(d.key[0])
            if m is not None:
                m.ack(d.key[1])

    def _commit(self, only: list[int] | None = None) -> None:
        sp = self.spout
        if sp.processing_guarantee == "none":
            self._commit_positions(None)
            return
        if not sp.tracked:
            return
        ready = {}
        for p, m in self.offsets.items():
            if only is not None and p not in only:
                continue
            nxt = m.next_commit()
            if nxt is not None:
                ready[p] = nxt
        if ready:
            for p, offset in self._commit_offsets(ready).items():
                self.offsets[p].committed(offset)

    def commit_checkpoint(self, offsets: dict[int, int]) -> None:
        """The aligned mode: a checkpoint holding everything before ``offsets`` is
        committed; commit them (the partitions still this task's)."""
        mine = {p: o for p, o in offsets.items() if p in self.assigned}
        if mine:
            self._commit_offsets(mine)

    def _commit_positions(self, positions: dict[int, int] | None) -> None:
        from confluent_kafka import TopicPartition

        if positions is None:
            tps = self.consumer.position(
                [TopicPartition(self.spout.topic, p) for p in self.assigned]
            )
            positions = {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        if positions:
            self._commit_offsets(positions)

    def _commit_offsets(self, offsets: dict[int, int]) -> dict[int, int]:
        """Commit synchronously; returns the offsets Kafka confirmed."""
        from confluent_kafka import KafkaException, TopicPartition

        sp = self.spout
        tps = [TopicPartition(sp.topic, p, o, metadata=sp.run_id) for p, o in offsets.items()]
        try:
            result = self.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            raise self.spout.connector_error(f"committing offsets {offsets} failed: {exc}") from exc
        return {tp.partition: tp.offset for tp in result or tps if tp.error is None}

    def close(self) -> None:
        # BrokerSpout settled what was still queued; commit it before leaving.
        sp = self.spout
        try:
            self._commit()
        finally:
            if self.producer is not None:
                self.producer.flush(sp.timeout_secs)
            self.consumer.close()
