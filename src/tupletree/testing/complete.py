"""complete_topology: run a topology over fixed data to the end and return every emit.

Storm's ``complete-topology``: spouts named in MockedSources are replaced by
FixedTupleSpouts, every component is wrapped to capture what it emits, the topology runs
until every fixed tuple is acked or failed, and is killed. Captures and settlements go
through SharedLists (``testing/shared.py``), so it runs the same on LocalCluster (in
simulated time it advances the clock instead of sleeping) and on SparkCluster.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from tupletree.cluster import Cluster
from tupletree.testing.feeder import AckFailTracker, checked_row
from tupletree.testing.shared import SharedList
from tupletree.topology.builder import ComponentSpec, Topology, validate_structure
from tupletree.topology.components import (
    DEFAULT_STREAM,
    BasicBolt,
    BatchBolt,
    Bolt,
    Spout,
    declared_streams,
)

__all__ = ["FixedTupleSpout", "MockedSources", "Results", "complete_topology", "read_tuples"]


class FixedTupleSpout(Spout):
    """Emits a fixed list of tuples once, each with its index as message id, its tasks
    splitting the list between them (Storm's FixedTupleSpout). Records each ack and fail
    in ``settled`` (an AckFailTracker), so ``complete_topology`` knows when every tuple
    is settled, and how. ``other_streams`` (``{stream: (fields, direct)}``) are declared
    too, as the spout it stands in for declares them, so what subscribes to them still
    validates (Storm's mock replaces the spout object, not its declared streams)."""

    def __init__(
        self,
        tuples: list[list[Any]],
        fields: list[str],
        settled: AckFailTracker,
        other_streams: Mapping[str, tuple[list[str], bool]] | None = None,
    ) -> None:
        self.tuples = [list(t) for t in tuples]
        self.fields = fields
        self.settled = settled
        self.other_streams = dict(other_streams or {})

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)
        for stream, (fields, direct) in self.other_streams.items():
            declarer.declare_stream(stream, fields, direct=direct)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        tasks = context.this_component_tasks()
        start = tasks.index(context.task_id)
        self._todo = deque(range(start, len(self.tuples), len(tasks)))
        self._collector = collector

    def next_tuple(self) -> None:
        if self._todo:
            i = self._todo.popleft()
            self._collector.emit(self.tuples[i], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.settled.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.settled.fail(msg_id)


class MockedSources:
    """Replacement data for spouts in ``complete_topology``: ``{spout_id: [values, ...]}``."""

    def __init__(self, sources: Mapping[str, Iterable[Iterable[Any]]] | None = None) -> None:
        self.sources = {
            cid: [checked_row(v, f"MockedSources: {cid!r} row {i}") for i, v in enumerate(vals)]
            for cid, vals in (sources or {}).items()
        }


class _Capture:
    """Records one component's emits into the completing topology's shared list."""

    def __init__(self, emitted: SharedList, component: str) -> None:
        self.emitted = emitted
        self.component = component

    def record(self, stream: str, values: Any) -> None:
        self.emitted.append((self.component, stream, list(values)))


class _CapturingCollector:
    """Wraps any collector: records each emit, then passes it on unchanged."""

    # Where ``stream`` sits among emit's extra positional args: OutputCollector.emit
    # (values, anchors, stream) and SpoutOutputCollector.emit (values, msg_id, stream).
    _stream_arg = 1

    def __init__(self, inner: Any, capture: _Capture) -> None:
        self._inner = inner
        self._capture = capture

    def _record(self, values: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        i = self._stream_arg
        stream = kwargs.get("stream", args[i] if len(args) > i else DEFAULT_STREAM)
        self._capture.record(stream, values)

    # Each emit is recorded once the runtime took it: an emit it refused (EmitError,
    # caught by the component) sent nothing, and raises the runtime's own error.
    def emit(self, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        targets = self._inner.emit(values, *args, **kwargs)
        self._record(values, args, kwargs)
        return targets

    def emit_direct(self, task: int, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        targets = self._inner.emit_direct(task, values, *args, **kwargs)
        self._record(values, args, kwargs)
        return targets

    def emit_batch(self, rows: Any, *args: Any, **kwargs: Any) -> list[int]:
        """A spout's batch (one tree): each row recorded as the tuple it is."""
        if (
            type(rows) is not list
            and not isinstance(rows, str | bytes | Mapping | AbstractSet)
            and isinstance(rows, Iterable)
        ):
            rows = list(rows)  # an iterator is read once: by the runtime and by us
        targets = self._inner.emit_batch(rows, *args, **kwargs)
        for values in rows:
            self._record(values, args, kwargs)
        return targets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CapturingBasicCollector(_CapturingCollector):
    # BasicOutputCollector.emit(values, stream=...): the stream is the first extra arg.
    _stream_arg = 0


class _Wrapping:
    """What every capturing component shares: the wrapped one and its declarations."""

    def __init__(self, inner: Any, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    # What the runtime looks up on a component besides its lifecycle methods: the
    # wrapped one's, so it is checked and described as it would be on a cluster.
    def check_config(self, conf: dict[str, Any], component: str) -> None:
        check = getattr(self.inner, "check_config", None)
        if check is not None:
            check(conf, component)

    def unpicklable_part(self, dumps: Any) -> str:
        culprit = getattr(self.inner, "unpicklable_part", None)
        part = culprit(dumps) if callable(culprit) else None
        return f"wrapped {type(self.inner).__name__}" + (f", its {part}" if part else "")


class _CapturingSpout(_Wrapping, Spout):
    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.inner.open(conf, context, _CapturingCollector(collector, self.capture))

    def next_tuple(self) -> None:
        self.inner.next_tuple()

    def ack(self, msg_id: Any) -> None:
        self.inner.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.inner.fail(msg_id)

    def reset_timeout(self, msg_id: Any) -> None:
        self.inner.reset_timeout(msg_id)

    def activate(self) -> None:
        self.inner.activate()

    def deactivate(self) -> None:
        self.inner.deactivate()

    def close(self) -> None:
        self.inner.close()


class _CapturingBolt(_Wrapping, Bolt):
    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.inner.prepare(conf, context, _CapturingCollector(collector, self.capture))

    def execute(self, tup: Any) -> None:
        self.inner.execute(tup)

    def cleanup(self) -> None:
        self.inner.cleanup()


class _CapturingBasicBolt(_Wrapping, BasicBolt):
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self._wrapped: dict[int, _CapturingBasicCollector] = {}
        self.inner.prepare(conf, context)

    def execute(self, tup: Any, collector: Any) -> None:
        wrapped = self._wrapped.get(id(collector))
        if wrapped is None:
            wrapped = self._wrapped[id(collector)] = _CapturingBasicCollector(
                collector, self.capture
            )
        self.inner.execute(tup, wrapped)

    def cleanup(self) -> None:
        self.inner.cleanup()


class _CapturingBatchCollector(_CapturingCollector):
    # BatchCollector.emit(values, row, stream): the stream is the second extra arg.
    _stream_arg = 1


class _CapturingBatchBolt(_Wrapping, BatchBolt):
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self._wrapped: dict[int, _CapturingBatchCollector] = {}
        self.inner.prepare(conf, context)

    def execute_batch(self, batch: Any, collector: Any) -> None:
        wrapped = self._wrapped.get(id(collector))
        if wrapped is None:
            wrapped = self._wrapped[id(collector)] = _CapturingBatchCollector(
                collector, self.capture
            )
        self.inner.execute_batch(batch, wrapped)

    def cleanup(self) -> None:
        self.inner.cleanup()


def _capturing(obj: Any, capture: _Capture) -> Any:
    if isinstance(obj, Spout):
        return _CapturingSpout(obj, capture)
    if isinstance(obj, BatchBolt):
        return _CapturingBatchBolt(obj, capture)
    if isinstance(obj, BasicBolt):
        return _CapturingBasicBolt(obj, capture)
    return _CapturingBolt(obj, capture)


def _stand_in(
    spec: ComponentSpec, rows: list[list[Any]], fields: list[str], settled: AckFailTracker
) -> Any:
    """The FixedTupleSpout that replaces the mocked spout ``spec``, declaring the spout's
    other streams too. A spout the topology's plan wrapped (a stateful topology's data
    spouts) wraps its stand-in the same way, so the plan's wiring still holds; the streams
    that wrapper declares itself are left to it."""
    wrap_like = getattr(spec.obj, "wrap_like", None)

    def build(others: dict[str, tuple[list[str], bool]]) -> Any:
        spout = FixedTupleSpout(rows, fields, settled, others)
        return spout if wrap_like is None else wrap_like(spout)

    own = declared_streams(spec.id, build({}))
    return build(
        {
            stream: (declared.fields.to_list(), declared.direct)
            for stream, declared in spec.streams.items()
            if stream not in own
        }
    )


_names = itertools.count(1)


class Results(dict[str, dict[str, list[list[Any]]]]):
    """What ``complete_topology`` captured: ``{component: {stream: [values, ...]}}``.

    ``acked`` and ``failed`` say, per mocked spout, which of its tuples (indices into its
    mocked list) had their tree acked and which failed or timed out: a run that "completed"
    by failing every tuple is told apart from one that processed them. ``streams`` holds
    each component's declared streams (when ``components`` maps ids to ComponentSpecs),
    so ``read_tuples`` can refuse a stream name the component does not declare.
    """

    def __init__(self, components: Iterable[str]) -> None:
        super().__init__((cid, {}) for cid in components)
        self.acked: dict[str, set[int]] = {}
        self.failed: dict[str, set[int]] = {}
        self.streams: dict[str, list[str]] = {}
        if isinstance(components, Mapping):
            for cid, spec in components.items():
                declared = getattr(spec, "streams", None)
                if declared is not None:
                    self.streams[cid] = sorted(declared)


def complete_topology(
    cluster: Cluster,
    topology: Topology,
    mocked_sources: MockedSources | None = None,
    conf: dict[str, Any] | None = None,
    timeout_secs: float = 60.0,
) -> Results:
    """Run ``topology`` until every mocked spout tuple is acked or failed, capturing every
    emit of every component; kill it and return the captures (``Results``).

    Spouts named in ``mocked_sources`` are replaced by FixedTupleSpouts declaring the
    same fields. On a simulated-time cluster time is advanced instead of slept; in both
    cases the run gives up after ``timeout_secs`` (of cluster time) with TimeoutError.
    """
    mocked = (mocked_sources or MockedSources()).sources
    unknown = sorted(set(mocked) - {s.id for s in topology.spouts})
    if unknown:
        raise ValueError(
            f"mocked sources {unknown} are not spouts of this topology; "
            f"its spouts are {sorted(s.id for s in topology.spouts)}"
        )
    emitted = SharedList("emitted")
    settled: dict[str, AckFailTracker] = {}
    specs = []
    for cid, spec in topology.components.items():
        obj = spec.obj
        if cid in mocked:
            default = spec.streams.get(DEFAULT_STREAM)
            if default is None:
                raise ValueError(f"mocked spout {cid!r} declares no default stream")
            fields = default.fields.to_list()
            for i, row in enumerate(mocked[cid]):
                checked_row(row, f"MockedSources: {cid!r} row {i}", fields)
            settled[cid] = AckFailTracker()
            obj = _stand_in(spec, mocked[cid], fields, settled[cid])
        new = ComponentSpec(
            cid, _capturing(obj, _Capture(emitted, cid)), spec.kind, spec.parallelism, spec.tasks
        )
        new.conf = dict(spec.conf)
        new.inputs = list(spec.inputs)
        specs.append(new)
    wrapped = validate_structure(specs, allow_system=True)
    expected = {cid: len(rows) for cid, rows in mocked.items()}

    def done() -> bool:
        return all(_settled_count(settled[cid]) >= n for cid, n in expected.items())

    name = f"complete-topology-{next(_names)}"
    cluster.submit_topology(name, conf, wrapped)
    try:
        if cluster.simulate_time:
            waited = 0.0
            cluster.wait_idle()
            while not done():
                if waited >= timeout_secs:
                    raise TimeoutError(_not_done(name, settled, expected, timeout_secs))
                cluster.advance_time(1)
                waited += 1
        else:
            deadline = time.monotonic() + timeout_secs
            while not (cluster.wait_idle(timeout=1.0) and done()):
                if time.monotonic() > deadline:
                    raise TimeoutError(_not_done(name, settled, expected, timeout_secs))
    finally:
        cluster.kill_topology(name)
    results = Results(topology.components)
    for component, stream, values in emitted.items():
        results[component].setdefault(stream, []).append(values)
    for cid, tracker in settled.items():
        results.acked[cid] = tracker.acked
        results.failed[cid] = tracker.failed
    return results


def _settled_count(tracker: AckFailTracker) -> int:
    return len(tracker.acked | tracker.failed)


def _not_done(
    name: str, settled: dict[str, AckFailTracker], expected: dict[str, int], secs: float
) -> str:
    done = sum(_settled_count(t) for t in settled.values())
    return (
        f"complete_topology: {name}: only {done} of {sum(expected.values())} mocked tuples "
        f"were acked or failed within {secs} s"
    )


def read_tuples(results: Results, component: str, stream: str = DEFAULT_STREAM) -> list[list[Any]]:
    """The value lists ``component`` emitted on ``stream`` during ``complete_topology``
    (``[]`` for a declared stream it did not emit on); KeyError for a component or a
    stream the topology does not have, naming the ones it has."""
    if component not in results:
        raise KeyError(f"no component {component!r} in results; components: {sorted(results)}")
    captured = results[component]
    declared = getattr(results, "streams", {}).get(component)
    if declared is not None and stream not in declared and stream not in captured:
        raise KeyError(
            f"component {component!r} declares no stream {stream!r}; its streams: {declared}"
        )
    return list(captured.get(stream, []))
