"""TridentBolt: every bolt of a compiled Trident topology (Storm's TridentBoltExecutor
around a SubtopologyBolt): batch tracking around a graph of processors.

Streams it reads (keyed by stream name; the coordinator's by component too):

- data: ``[batch id, *values]`` from another Trident bolt, unanchored: the batch is
  tracked, not its tuples;
- ``$coord-<group>`` (direct): ``[batch id, count]``, an upstream task saying it sent
  this task ``count`` tuples of the batch. Needed: one report from every task of each
  upstream bolt, or one from a DRPC spout (only the task that took the request);
- ``$batch`` (all grouping), in a bolt that runs a spout's emitter: the coordinator
  starting ``[attempt, {tx id: metadata}]``; ``$commit`` ([attempt]) in a bolt that
  commits the group's batches or runs a committer spout; ``$success`` for emitters.

Per batch group and batch (keyed by txid; only the highest attempt seen is kept, so a
replay replaces what a stale attempt left), a task tracks a Tally (the counting it
shares with CoordinatedBolt, reliability/tally.py), the processors' per-batch state,
and at most one held tuple. It has the whole batch when: the emitter's ``$batch`` was
run (a spout's bolt), every report is in and the tuple count matches, and, in a bolt
that commits the group, the ``$commit`` arrived. Then, in this order: every processor
of the group finishes (topological order: aggregates emit, states commit), the task
reports to each downstream task how many tuples it sent it (anchored to the tuple that
completed the batch, so the tree stays open until everything downstream finished), and
the held tuple is acked. The held tuple is the first coordination tuple of the batch,
or, in a committing bolt, the ``$commit``: so the coordinator's ``$batch`` tree
completes once every bolt has processed the batch, and its ``$commit`` tree once every
committer committed it.

Failure: an exception from an operation (FailedException, or any other, which is also
reported) fails the batch: the held tuple and every later coordination tuple of that
attempt are failed, so the coordinator replays the batch (and all later ones). More
tuples than reported (a duplicate delivery) fails it too. Batches expire two message
timeouts after they were last heard of (system ticks, 1 s), failing what they hold;
at most ``MAX_TRACKED_BATCHES`` are tracked per task, beyond which new ones are failed.
A task whose prepare raised (a state's database unreachable) fails every tuple after
it with an error naming that cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tupletree.config import Config
from tupletree.errors import FailedException
from tupletree.reliability.protocol import SYSTEM_COMPONENT, SYSTEM_TICK_STREAM
from tupletree.reliability.tally import COMPLETE, OVER, Tally
from tupletree.topology.components import Bolt
from tupletree.trident.attempt import TransactionAttempt
from tupletree.trident.operation import TridentCollector, TridentOperationContext
from tupletree.trident.processors import Processor, fan_out
from tupletree.trident.progress import check_states_shared
from tupletree.trident.tuple import schema

BATCH_FIELD = "__batch"
BATCH_STREAM = "$batch"
COMMIT_STREAM = "$commit"
SUCCESS_STREAM = "$success"
COORD_PREFIX = "$coord-"
METRIC = "trident"
MAX_TRACKED_BATCHES = 10_000

DATA, COORD, BATCH, COMMIT, SUCCESS = "data", "coord", "batch", "commit", "success"


def first_unpicklable(parts: Sequence[tuple[str, Any]], dumps: Any) -> str | None:
    """The name of the first of ``parts`` (name, object) that ``dumps`` refuses."""
    for name, obj in parts:
        try:
            dumps(obj)
        except Exception:
            return name
    return None


def coord_stream(group: str) -> str:
    return COORD_PREFIX + group


def batch_index(bid: Any, n: int) -> int:
    """Which of ``n`` tasks a batch maps to (batch_global, single-emit aggregations,
    DRPC results): its id (a txid or a request id, both ints) modulo ``n``."""
    return int(bid[0]) % n


@dataclass
class InputSpec:
    group: str
    kind: str
    fields: list[str] = field(default_factory=list)  # DATA: the values after the batch id
    entries: list[tuple[int, int]] = field(default_factory=list)  # DATA: (processor, side)


@dataclass
class SpoutSpec:
    """A spout's emitter run in this bolt: ``tx_id`` (new_stream's name), the spout
    adapter (spout/*.py: ``make_emitter``), its output fields and where they go."""

    tx_id: str
    adapter: Any
    fields: list[str]
    entries: list[tuple[int, int]]


@dataclass
class GroupSpec:
    name: str
    commit: bool = False
    coord_sources: dict[str, str] = field(default_factory=dict)  # component -> all|single
    processors: list[int] = field(default_factory=list)  # topological order
    spouts: list[SpoutSpec] = field(default_factory=list)


@dataclass
class BoltPlan:
    name: str
    processors: list[Processor]
    inputs: dict[tuple[str, str], InputSpec]
    groups: dict[str, GroupSpec]
    outputs: dict[str, list[str]]  # data stream -> fields after the batch id
    states: dict[str, Any]  # state id -> StateFactory
    progress: tuple[str, int] = ("", 0)  # (default memory store name, build pid)


class TrackedBatch:
    __slots__ = (
        "attempt",
        "bid",
        "emitted",
        "failed",
        "group",
        "heard",
        "held",
        "received_commit",
        "states",
        "tally",
        "txid",
    )

    def __init__(self, bid: Any, group: _Group, slots: int, now: float) -> None:
        self.bid = bid
        self.attempt = bid[1]
        self.txid = bid[0] if type(bid) is TransactionAttempt else None
        self.group = group
        self.states: list[Any] = [None] * slots
        self.tally = Tally()
        self.held: Any = None
        self.failed = False
        self.received_commit = False
        self.emitted = False  # a spout's bolt: the emitter ran for this attempt
        self.heard = now


class _Group:
    """A batch group's runtime in this task."""

    def __init__(self, spec: GroupSpec, context: Any) -> None:
        self.name = spec.name
        self.commit = spec.commit
        self.needed = sum(
            1 if kind == "single" else len(context.component_tasks(component))
            for component, kind in spec.coord_sources.items()
        )
        self.stream = coord_stream(spec.name)
        self.targets = sorted(
            task
            for component in context.targets(self.stream)
            for task in context.component_tasks(component)
        )
        self.batches: dict[Any, TrackedBatch] = {}
        self.starters: list[Processor] = []
        self.finishers: list[Processor] = []
        self.emitters: list[_Emitter] = []
        self.committer_spouts: list[_Emitter] = []


class _SpoutCollector(TridentCollector):
    """What a spout's emitter emits with: its values become a batch's tuples. An
    exception from the operations downstream is kept in ``error`` (and raised on), so
    it is not taken for the spout's own (a spout that cannot read is "stuck")."""

    __slots__ = ("batch", "error", "make", "report", "send", "who", "width")

    def __init__(self, fields: Sequence[str], who: str, report: Any) -> None:
        self.make = schema(fields)
        self.width = len(fields)
        self.who = who
        self.report = report
        self.send: Any = None
        self.batch: Any = None
        self.error: BaseException | None = None

    def emit(self, values: Any) -> None:
        if type(values) is not list:
            if isinstance(values, str | bytes | dict) or not hasattr(values, "__len__"):
                raise ValueError(
                    f"{self.who} emitted {type(values).__name__} {values!r}; emit a list of "
                    "values, one per output field"
                )
            values = list(values)
        if len(values) != self.width:
            raise ValueError(
                f"{self.who} emitted {len(values)} value(s) {values!r}; its output fields "
                f"are {self.make._fields.to_list()}"
            )
        try:
            self.send(self.batch, self.make(values))
        except Exception as exc:
            self.error = exc
            raise

    def report_error(self, exc: BaseException) -> None:
        self.report(exc)


class _Emitter:
    def __init__(self, spec: SpoutSpec, emitter: Any, collector: _SpoutCollector) -> None:
        self.tx_id = spec.tx_id
        self.emitter = emitter
        self.collector = collector
        self.committer = callable(getattr(emitter, "commit", None))


class BoltEnv:
    """What processors get at prepare: config, context, the bolt's collector, this
    task's states, error reporting and the commit record."""

    def __init__(self, bolt: TridentBolt, conf: dict[str, Any], context: Any, collector: Any):
        self.conf = conf
        self.context = context
        self.collector = collector
        self.states: dict[str, Any] = {}
        self.report = collector.report_error
        self.batch_index = batch_index
        self.committed = bolt._committed


class TridentBolt(Bolt):
    def __init__(self, plan: BoltPlan) -> None:
        self.plan = plan

    def unpicklable_part(self, dumps: Any) -> str | None:
        """The first part of this bolt that ``dumps`` cannot pickle, named for the
        submit error (which otherwise names only the bolt)."""
        plan = self.plan
        parts = [(f"state factory {type(f).__name__}", f) for f in plan.states.values()]
        parts += [(f"spout {s.tx_id!r}", s.adapter) for g in plan.groups.values() for s in g.spouts]
        parts += [(f"operation {p.name!r}", p) for p in plan.processors]
        return first_unpicklable(parts, dumps)

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        """At submit: refuse a state only one host can see (SQLite, memory) when the
        cluster's workers may run on several (``tupletree.cluster.master``)."""
        check_states_shared(conf, component_id, self.plan.states)

    def declare_output_fields(self, declarer: Any) -> None:
        for stream, fields in self.plan.outputs.items():
            declarer.declare_stream(stream, [BATCH_FIELD, *fields])
        for group in self.plan.groups:
            declarer.declare_stream(coord_stream(group), [BATCH_FIELD, "count"], direct=True)

    # -- lifecycle ----------------------------------------------------------------------

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        try:
            self._prepare(conf, context, collector)
        except BaseException as exc:
            # The runtime reports this once and goes on delivering tuples (as Storm
            # does): each then fails naming this cause, not with an AttributeError of a
            # half-prepared bolt that pushes the cause out of the error book.
            cause = f"{type(exc).__name__}: {exc}"[:300]
            self.execute = partial(self._unprepared, cause)  # type: ignore[method-assign]
            raise

    def _unprepared(self, cause: str, tup: Any) -> None:
        if tup.source_component == SYSTEM_COMPONENT:
            self.collector.ack(tup)
            return
        raise RuntimeError(
            f"{self.plan.name}: this task's prepare failed ({cause}); every batch it is "
            "part of fails until the task is restarted"
        )

    def _prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        plan = self.plan
        self.context = context
        self._now = 0.0
        timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30
        self._expire_after = 2 * float(timeout)
        self._last_committed: dict[str, Any] = {}
        self._failed_batches = 0
        self._stuck: dict[str, Any] = {}
        env = BoltEnv(self, conf, context, collector)
        index = context.this_task_index
        count = len(context.this_component_tasks())
        for sid, factory in plan.states.items():
            env.states[sid] = factory.make_state(
                conf, TridentOperationContext(context), index, count
            )
        processors = plan.processors
        slots = 0
        for p in processors:
            if p.stateful:
                p.slot = slots
                slots += 1
            p.prepare(env)
        self._slots = slots
        # Children first (they have the higher indexes): a processor may make its
        # execute a closure when linked, and its parents must get that one.
        for p in reversed(processors):
            raw = bool(p.children) and all(processors[i].accepts_lists for i, _ in p.children)
            p.link([processors[i].receiver(side) for i, side in p.children], raw)
        self._groups = {name: _Group(spec, context) for name, spec in plan.groups.items()}
        progress = None
        for name, spec in plan.groups.items():
            g = self._groups[name]
            g.finishers = [processors[i] for i in spec.processors]
            g.starters = [p for p in g.finishers if p.stateful]
            for sspec in spec.spouts:
                if progress is None:
                    progress = self._open_progress(conf)
                who = f"spout {sspec.tx_id!r}"
                c = _SpoutCollector(sspec.fields, who, collector.report_error)
                c.send = fan_out([processors[i].receiver(side) for i, side in sspec.entries])
                emitter = sspec.adapter.make_emitter(sspec.tx_id, conf, context, progress)
                e = _Emitter(sspec, emitter, c)
                g.emitters.append(e)
                if e.committer:
                    g.committer_spouts.append(e)
        self._progress = progress
        # stream -> spec, or for the coordinator's streams component -> spec
        self._by_stream: dict[str, Any] = {}
        for (component, stream), ispec in plan.inputs.items():
            run = _Input(ispec, self._groups[ispec.group], processors)
            if ispec.kind in (BATCH, COMMIT, SUCCESS):
                self._by_stream.setdefault(stream, {})[component] = run
            else:
                self._by_stream[stream] = run
        context.register_metric(METRIC, self.metric)

    def _open_progress(self, conf: dict[str, Any]) -> Any:
        from tupletree.trident.progress import Progress, memory_store_name, open_progress

        name, pid = self.plan.progress
        store = open_progress(conf, memory_store_name(name, self.context.topology_name), pid)
        tx_ids = [s.tx_id for g in self.plan.groups.values() for s in g.spouts]
        return Progress(store, tx_ids)

    def cleanup(self) -> None:
        for p in self.plan.processors:
            try:
                p.cleanup()
            except Exception as exc:
                self.collector.report_error(exc)
        # getattr: cleanup also runs after a prepare that failed half-way.
        for g in getattr(self, "_groups", {}).values():
            for e in g.emitters:
                close = getattr(e.emitter, "close", None)
                if callable(close):
                    close()
        if getattr(self, "_progress", None) is not None:
            self._progress.store.close()

    # -- input --------------------------------------------------------------------------

    def execute(self, tup: Any) -> None:
        spec = self._by_stream.get(tup.source_stream)
        if type(spec) is dict:
            spec = spec.get(tup.source_component)
        if spec is None:
            if tup.source_component == SYSTEM_COMPONENT and tup.source_stream == SYSTEM_TICK_STREAM:
                self._tick(tup[0])
            self.collector.ack(tup)
            return
        kind = spec.kind
        if kind is DATA:
            values = tup.values
            batch = self._batch(spec.group, values[0])
            if batch is not None and not batch.failed:
                tally = batch.tally
                tally.received += 1
                try:
                    spec.send(batch, spec.make(values[1:]))
                except Exception as exc:
                    self._error(batch, exc)
                else:
                    if batch.held is not None and tally.reports >= spec.group.needed:
                        self._late(batch)  # a tuple behind its report (not FIFO)
            self.collector.ack(tup)
        elif kind is COORD:
            batch = self._batch(spec.group, tup[0])
            if batch is None:
                self.collector.fail(tup)
                return
            batch.tally.report(tup[1])
            batch.heard = self._now
            self._check(batch, tup, COORD)
        elif kind is BATCH:
            self._emit_batch(spec.group, tup)
        elif kind is COMMIT:
            self._commit(spec.group, tup)
        else:  # SUCCESS
            attempt = tup[0]
            for e in spec.group.emitters:
                try:
                    e.emitter.success(attempt)
                except Exception as exc:
                    self.collector.report_error(exc)
            self.collector.ack(tup)

    def _batch(self, g: _Group, bid: Any) -> TrackedBatch | None:
        """The tracked batch ``bid`` belongs to: made if new, replacing a lower attempt;
        None for a stale (lower) attempt or when the table is full."""
        key = bid[0]
        b = g.batches.get(key)
        if b is not None:
            attempt = bid[1]
            if attempt == b.attempt:
                return b
            if attempt < b.attempt:
                return None
            if b.held is not None:
                self.collector.fail(b.held)
            del g.batches[key]
        if sum(len(x.batches) for x in self._groups.values()) >= MAX_TRACKED_BATCHES:
            self.collector.report_error(
                RuntimeError(
                    f"{self.plan.name}: {MAX_TRACKED_BATCHES} batches tracked; refusing batch "
                    f"{bid} of group {g.name} until some finish or expire"
                )
            )
            return None
        b = g.batches[key] = TrackedBatch(bid, g, self._slots, self._now)
        try:
            for p in g.starters:
                p.start(b)
        except Exception as exc:
            self._error(b, exc)
        return b

    def _emit_batch(self, g: _Group, tup: Any) -> None:
        attempt, metas = tup[0], tup[1]
        batch = self._batch(g, attempt)
        if batch is None:
            self.collector.fail(tup)
            return
        if batch.failed:
            self._check(batch, tup, BATCH)
            return
        for e in g.emitters:
            c = e.collector
            c.batch = batch
            c.error = None
            try:
                e.emitter.emit_batch(attempt, metas.get(e.tx_id), c)
            except Exception as exc:
                if c.error is not None:
                    self._error(batch, c.error)
                else:
                    self._error(batch, exc, stuck=e.tx_id)
                break
            if c.error is not None:  # the spout swallowed it
                self._error(batch, c.error)
                break
            self._stuck.pop(e.tx_id, None)
        batch.emitted = True
        self._check(batch, tup, BATCH)

    def _commit(self, g: _Group, tup: Any) -> None:
        attempt = tup[0]
        for e in g.committer_spouts:
            try:
                e.emitter.commit(attempt)
            except Exception as exc:
                if not isinstance(exc, FailedException):
                    self.collector.report_error(exc)
                batch = g.batches.get(attempt[0]) if g.commit else None
                if batch is not None and batch.attempt == attempt[1]:
                    self._fail_batch(batch)
                self.collector.fail(tup)
                return
        if not g.commit:
            self.collector.ack(tup)
            return
        batch = self._batch(g, attempt)
        if batch is None:
            self.collector.fail(tup)
            return
        batch.received_commit = True
        batch.heard = self._now
        self._check(batch, tup, COMMIT)

    # -- completion ---------------------------------------------------------------------

    def _check(self, batch: TrackedBatch, tup: Any, kind: str) -> None:
        collector = self.collector
        if batch.failed:
            collector.fail(tup)
            return
        g = batch.group
        delayed = batch.held is None and (kind is COMMIT if g.commit else True)
        if delayed:
            batch.held = tup
        ready = (batch.received_commit or not g.commit) and (batch.emitted or not g.emitters)
        if ready:
            status = batch.tally.status(g.needed)
            if status == COMPLETE:
                if not self._finish(batch, tup):
                    collector.fail(tup)
                    return
            elif status == OVER:
                self._over(batch)
                collector.fail(tup)
                return
        if not delayed:
            collector.ack(tup)

    def _late(self, batch: TrackedBatch) -> None:
        """Every report was in before this data tuple: complete (or over) now?"""
        g = batch.group
        if (g.commit and not batch.received_commit) or (g.emitters and not batch.emitted):
            return
        status = batch.tally.status(g.needed)
        if status == COMPLETE:
            self._finish(batch, batch.held)
        elif status == OVER:
            self._over(batch)

    def _over(self, batch: TrackedBatch) -> None:
        t = batch.tally
        self.collector.report_error(
            RuntimeError(
                f"{self.plan.name}: batch {batch.bid} of group {batch.group.name}: received "
                f"{t.received} tuples but upstream reported {t.expected}; failing it"
            )
        )
        self._fail_batch(batch)

    def _finish(self, batch: TrackedBatch, anchor: Any) -> bool:
        g = batch.group
        try:
            for p in g.finishers:
                p.finish(batch)
        except Exception as exc:
            self._error(batch, exc)
            return False
        emit_direct = self.collector.emit_direct
        bid = batch.bid
        for task, count in batch.tally.counts_for(g.targets):
            emit_direct(task, [bid, count], anchor, g.stream)
        held, batch.held = batch.held, None
        if held is not None:
            self.collector.ack(held)
        g.batches.pop(bid[0], None)
        return True

    def _error(self, batch: TrackedBatch, exc: BaseException, stuck: str | None = None) -> None:
        if not isinstance(exc, FailedException):
            self.collector.report_error(exc)
        if stuck is not None:
            where = getattr(exc, "partition", None)
            self._stuck[stuck] = {
                "txid": batch.bid[0],
                "attempt": batch.bid[1],
                "partition": where,
                "error": f"{type(exc).__name__}: {exc}"[:300],
                "since": self._stuck.get(stuck, {}).get("since", self.context.now()),
            }
        self._fail_batch(batch)

    def _fail_batch(self, batch: TrackedBatch) -> None:
        if not batch.failed:
            self._failed_batches += 1
        batch.failed = True
        held, batch.held = batch.held, None
        if held is not None:
            self.collector.fail(held)

    def _tick(self, secs: float) -> None:
        self._now += float(secs)
        limit = self._now - self._expire_after
        for g in self._groups.values():
            old = [k for k, b in g.batches.items() if b.heard <= limit]
            for k in old:
                b = g.batches.pop(k)
                if b.held is not None:
                    self.collector.fail(b.held)

    def _committed(self, state_id: str, txid: Any) -> None:
        self._last_committed[state_id] = txid

    def metric(self) -> dict[str, Any]:
        """This task's Trident view (the web view and /metrics read it)."""
        return {
            "kind": "bolt",
            "trackedBatches": sum(len(g.batches) for g in self._groups.values()),
            "failedBatches": self._failed_batches,
            "lastCommittedTxid": dict(self._last_committed),
            "stuck": dict(self._stuck),
        }


class _Input:
    """An input stream's runtime: its group, kind, and for data where tuples go."""

    __slots__ = ("group", "kind", "make", "send")

    def __init__(self, spec: InputSpec, group: _Group, processors: Sequence[Processor]):
        self.group = group
        self.kind = {DATA: DATA, COORD: COORD, BATCH: BATCH, COMMIT: COMMIT}.get(spec.kind, SUCCESS)
        self.make = schema(spec.fields)
        self.send = fan_out([processors[i].receiver(side) for i, side in spec.entries])
