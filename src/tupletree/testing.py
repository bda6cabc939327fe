"""Test helpers, Storm's way: feed a running topology, track acks, complete a topology.

Components are copied per task (pickle), so helpers that a test must reach while the
topology runs (a FeederSpout's queue, an AckFailTracker's sets, captured emits) keep
their state in a process-wide registry keyed by id; each copy re-attaches to it when
unpickled. That is why these helpers work on LocalCluster (one process) only.
"""

from __future__ import annotations

import itertools
import threading
import uuid
import weakref
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from tupletree.local import LocalCluster
from tupletree.topology.builder import ComponentSpec, Topology, validate_structure
from tupletree.topology.components import DEFAULT_STREAM, BasicBolt, Bolt, Spout

__all__ = [
    "AckFailTracker",
    "FeederSpout",
    "FixedTupleSpout",
    "MockedSources",
    "complete_topology",
    "read_tuples",
]

_registry: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


class _Shared:
    """A registry entry: any shared state, reachable by id from every copy."""

    def __init__(self, **state: Any) -> None:
        self.__dict__.update(state)


def _shared(key: str, **initial: Any) -> _Shared:
    found = _registry.get(key)
    if found is None:
        found = _Shared(**initial)
        _registry[key] = found
    return found


def _lookup(key: str, what: str) -> _Shared:
    found = _registry.get(key)
    if found is None:
        raise RuntimeError(
            f"{what} {key} is not in this process: testing helpers share state in memory "
            "and work on LocalCluster only"
        )
    return found


class AckFailTracker:
    """Records which message ids a spout saw acked and failed.

    ``acked`` and ``failed`` return copies, so a test may read them while the topology
    runs on another thread.
    """

    def __init__(self) -> None:
        self._key = f"tracker-{uuid.uuid4()}"
        self._state = _shared(self._key, lock=threading.Lock(), acked=set(), failed=set())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_tracker_from_registry, (self._key,))

    def ack(self, msg_id: Any) -> None:
        with self._state.lock:
            self._state.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        with self._state.lock:
            self._state.failed.add(msg_id)

    @property
    def acked(self) -> set[Any]:
        with self._state.lock:
            return set(self._state.acked)

    @property
    def failed(self) -> set[Any]:
        with self._state.lock:
            return set(self._state.failed)

    def is_acked(self, msg_id: Any) -> bool:
        return msg_id in self.acked

    def is_failed(self, msg_id: Any) -> bool:
        return msg_id in self.failed


def _tracker_from_registry(key: str) -> AckFailTracker:
    tracker = AckFailTracker.__new__(AckFailTracker)
    tracker._key = key
    tracker._state = _lookup(key, "AckFailTracker")
    return tracker


class FeederSpout(Spout):
    """A spout a test feeds by hand: ``feed(values, msg_id=None)`` from any thread.

    Each ``next_tuple`` emits one fed tuple (in feed order, shared by all its tasks);
    acks and fails go to ``tracker``.
    """

    def __init__(
        self,
        fields: Iterable[str],
        tracker: AckFailTracker | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        self.fields = list(fields)
        self.tracker = tracker
        self.stream = stream
        self._key = f"feeder-{uuid.uuid4()}"
        # Hold the registry entry itself (the registry only keeps weak references).
        self._shared = _shared(self._key, items=deque(), wakeups=[])
        self._queue = self._shared.items

    def __getstate__(self) -> dict[str, Any]:
        return {
            "fields": self.fields,
            "tracker": self.tracker,
            "stream": self.stream,
            "_key": self._key,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._shared = _lookup(self._key, "FeederSpout")
        self._queue = self._shared.items

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(self.stream, self.fields)

    def feed(self, values: list[Any], msg_id: Any = None) -> None:
        """Queue a tuple; ``msg_id=None`` emits it untracked."""
        self._queue.append((list(values), msg_id))
        for wakeup in list(self._shared.wakeups):
            wakeup()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._wakeup = context.wakeup
        self._shared.wakeups.append(self._wakeup)

    def close(self) -> None:
        wakeup = getattr(self, "_wakeup", None)  # absent if open() never ran
        if wakeup in self._shared.wakeups:
            self._shared.wakeups.remove(wakeup)

    def next_tuple(self) -> None:
        try:
            values, msg_id = self._queue.popleft()
        except IndexError:
            return
        self.collector.emit(values, msg_id=msg_id, stream=self.stream)

    def ack(self, msg_id: Any) -> None:
        if self.tracker is not None:
            self.tracker.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        if self.tracker is not None:
            self.tracker.fail(msg_id)


class FixedTupleSpout(Spout):
    """Emits a fixed list of tuples once, each with a message id, its tasks splitting
    the list between them (Storm's FixedTupleSpout). Counts acks and fails so
    ``complete_topology`` knows when every tuple is settled."""

    def __init__(self, tuples: list[list[Any]], fields: list[str], key: str) -> None:
        self.tuples = [list(t) for t in tuples]
        self.fields = fields
        self.key = key

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        tasks = context.this_component_tasks()
        start = tasks.index(context.task_id)
        self._todo = deque(range(start, len(self.tuples), len(tasks)))
        self._collector = collector
        self._state = _lookup(self.key, "FixedTupleSpout")

    def next_tuple(self) -> None:
        if self._todo:
            i = self._todo.popleft()
            self._collector.emit(self.tuples[i], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        with self._state.lock:
            self._state.settled += 1

    fail = ack


class MockedSources:
    """Replacement data for spouts in ``complete_topology``: ``{spout_id: [values, ...]}``."""

    def __init__(self, sources: Mapping[str, Iterable[Iterable[Any]]] | None = None) -> None:
        self.sources = {cid: [list(v) for v in vals] for cid, vals in (sources or {}).items()}


class _Capture:
    """Records emits into the shared capture store of a completing topology."""

    def __init__(self, key: str, component: str) -> None:
        self.key = key
        self.component = component

    def attach(self) -> None:
        self._store = _lookup(self.key, "capture").emitted

    def record(self, stream: str, values: Any) -> None:
        self._store.append((self.component, stream, list(values)))


class _CapturingCollector:
    """Wraps any collector: records each emit, then passes it on unchanged."""

    def __init__(self, inner: Any, capture: _Capture) -> None:
        self._inner = inner
        self._capture = capture

    def emit(self, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        stream = kwargs.get("stream", args[1] if len(args) > 1 else DEFAULT_STREAM)
        self._capture.record(stream, values)
        return self._inner.emit(values, *args, **kwargs)

    def emit_direct(self, task: int, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        stream = kwargs.get("stream", args[1] if len(args) > 1 else DEFAULT_STREAM)
        self._capture.record(stream, values)
        return self._inner.emit_direct(task, values, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _CapturingBasicCollector(_CapturingCollector):
    # BasicOutputCollector.emit(values, stream=...): the stream is the first extra arg.
    def emit(self, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        stream = kwargs.get("stream", args[0] if args else DEFAULT_STREAM)
        self._capture.record(stream, values)
        return self._inner.emit(values, *args, **kwargs)

    def emit_direct(self, task: int, values: Any, *args: Any, **kwargs: Any) -> list[int]:
        stream = kwargs.get("stream", args[0] if args else DEFAULT_STREAM)
        self._capture.record(stream, values)
        return self._inner.emit_direct(task, values, *args, **kwargs)


class _CapturingSpout(Spout):
    def __init__(self, inner: Spout, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.capture.attach()
        self.inner.open(conf, context, _CapturingCollector(collector, self.capture))

    def next_tuple(self) -> None:
        self.inner.next_tuple()

    def ack(self, msg_id: Any) -> None:
        self.inner.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.inner.fail(msg_id)

    def activate(self) -> None:
        self.inner.activate()

    def deactivate(self) -> None:
        self.inner.deactivate()

    def close(self) -> None:
        self.inner.close()


class _CapturingBolt(Bolt):
    def __init__(self, inner: Bolt, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.capture.attach()
        self.inner.prepare(conf, context, _CapturingCollector(collector, self.capture))

    def execute(self, tup: Any) -> None:
        self.inner.execute(tup)

    def cleanup(self) -> None:
        self.inner.cleanup()


class _CapturingBasicBolt(BasicBolt):
    def __init__(self, inner: BasicBolt, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.capture.attach()
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


def _capturing(obj: Any, capture: _Capture) -> Any:
    if isinstance(obj, Spout):
        return _CapturingSpout(obj, capture)
    if isinstance(obj, BasicBolt):
        return _CapturingBasicBolt(obj, capture)
    return _CapturingBolt(obj, capture)


_names = itertools.count(1)

Results = dict[str, dict[str, list[list[Any]]]]


def complete_topology(
    cluster: LocalCluster,
    topology: Topology,
    mocked_sources: MockedSources | None = None,
    conf: dict[str, Any] | None = None,
    timeout_secs: float = 60.0,
) -> Results:
    """Run ``topology`` until every mocked spout tuple is acked or failed, capturing every
    emit of every component; kill it and return ``{component: {stream: [values...]}}``.

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
    key = f"complete-{uuid.uuid4()}"
    store = _shared(key, emitted=[])
    specs = []
    fixed_keys = []
    for cid, spec in topology.components.items():
        obj = spec.obj
        if cid in mocked:
            default = spec.streams.get(DEFAULT_STREAM)
            if default is None:
                raise ValueError(f"mocked spout {cid!r} declares no default stream")
            fkey = f"{key}-{cid}"
            fixed_keys.append((_shared(fkey, lock=threading.Lock(), settled=0), len(mocked[cid])))
            obj = FixedTupleSpout(mocked[cid], default.fields.to_list(), fkey)
        new = ComponentSpec(
            cid, _capturing(obj, _Capture(key, cid)), spec.kind, spec.parallelism, spec.tasks
        )
        new.conf = dict(spec.conf)
        new.inputs = list(spec.inputs)
        specs.append(new)
    wrapped = validate_structure(specs, allow_system=True)

    def done() -> bool:
        return all(state.settled >= n for state, n in fixed_keys)

    name = f"complete-topology-{next(_names)}"
    cluster.submit_topology(name, conf, wrapped)
    try:
        if cluster.simulate_time:
            waited = 0.0
            cluster.wait_idle()
            while not done():
                if waited >= timeout_secs:
                    raise TimeoutError(_not_done(name, fixed_keys, timeout_secs))
                cluster.advance_time(1)
                waited += 1
        else:
            import time

            deadline = time.monotonic() + timeout_secs
            while not (cluster.wait_idle(timeout=1.0) and done()):
                if time.monotonic() > deadline:
                    raise TimeoutError(_not_done(name, fixed_keys, timeout_secs))
    finally:
        cluster.kill_topology(name)
    results: Results = {cid: {} for cid in topology.components}
    for component, stream, values in store.emitted:
        results[component].setdefault(stream, []).append(values)
    return results


def _not_done(name: str, fixed: list[tuple[_Shared, int]], secs: float) -> str:
    settled = sum(s.settled for s, _ in fixed)
    total = sum(n for _, n in fixed)
    return (
        f"complete_topology: {name}: only {settled} of {total} mocked tuples were acked or "
        f"failed within {secs} s"
    )


def read_tuples(results: Results, component: str, stream: str = DEFAULT_STREAM) -> list[list[Any]]:
    """The value lists ``component`` emitted on ``stream`` during ``complete_topology``."""
    if component not in results:
        raise KeyError(f"no component {component!r} in results; components: {sorted(results)}")
    return list(results[component].get(stream, []))
