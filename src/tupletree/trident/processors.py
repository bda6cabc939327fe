"""Processors: the operations of one Trident bolt, as Storm's planner/processor/*.

A Trident bolt runs a small graph of processors (Storm's SubtopologyBolt): every
operation between two repartitions. Each processor gets a batch's tuples one by one
(``execute(batch, tup)``), may keep per-batch state in ``batch.states[slot]``
(``start(batch)`` makes it), and is told when the bolt has seen the whole batch
(``finish(batch)``, in topological order, so a processor finishes after everything
upstream of it in the bolt did, and what it emits there still reaches its children
before they finish). What a processor emits goes straight to its children's
``execute`` (depth first, no queue), or, for an ``Output``, to another bolt.

Lifecycle: built by the planner (plain, picklable values and the user's operations),
``prepare(env)`` once per task (``env``: the bolt's runtime, see bolt.py), then
batches. Tuples are TridentTuples of the processor's input layout; a processor's
output layout is ``out_fields``.

Bounds: a processor holds one batch's worth of what it must (a persist or query
buffers the batch's tuples for its partition; an aggregator one value per key), for
the batches the bolt tracks (see bolt.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tupletree.trident.builtin import Count
from tupletree.trident.group_keys import group_key
from tupletree.trident.operation import TridentCollector, TridentOperationContext
from tupletree.trident.state.operations import check_results
from tupletree.trident.tuple import TridentTuple, schema

Send = Callable[[Any, TridentTuple], None]

_MISSING = object()


def _nothing(batch: Any, tup: TridentTuple) -> None:
    pass


def fan_out(receivers: Sequence[Send]) -> Send:
    """One callable that hands a tuple to every receiver (no loop for one)."""
    if not receivers:
        return _nothing
    if len(receivers) == 1:
        return receivers[0]
    rs = tuple(receivers)

    def send(batch: Any, tup: TridentTuple) -> None:
        for r in rs:
            r(batch, tup)

    return send


def _values(values: Any, width: int, who: str) -> list[Any]:
    """``values`` as a list of ``width`` values; ValueError naming ``who`` otherwise."""
    if type(values) is not list:
        if isinstance(values, str | bytes | dict) or not hasattr(values, "__len__"):
            raise ValueError(
                f"{who} emitted {type(values).__name__} {values!r}; emit a list of values, "
                f"one per output field (did you mean [{values!r}]?)"
            )
        values = list(values)
    if len(values) != width:
        raise ValueError(
            f"{who} emitted {len(values)} value(s) {values!r} but declares {width} field(s)"
        )
    return values


class AppendCollector(TridentCollector):
    """An Each's or a query's collector: the input tuple's values plus the emitted ones."""

    __slots__ = ("batch", "make", "parent", "report", "send", "who", "width")

    def __init__(self, make: type[TridentTuple], width: int, who: str, report: Any) -> None:
        self.make, self.width, self.who, self.report = make, width, who, report
        self.send: Send = _nothing
        self.batch: Any = None
        self.parent: Any = None

    def emit(self, values: Any) -> None:
        if type(values) is not list or len(values) != self.width:
            values = _values(values, self.width, self.who)
        self.send(self.batch, self.make(self.parent + values))

    def report_error(self, exc: BaseException) -> None:
        self.report(exc)


class FreshCollector(TridentCollector):
    """An aggregator's or updater's collector: ``prefix`` (a group's key values, or
    nothing) plus the emitted values, a tuple of its own."""

    __slots__ = ("batch", "make", "prefix", "report", "send", "who", "width")

    def __init__(self, make: type[TridentTuple], width: int, who: str, report: Any) -> None:
        self.make, self.width, self.who, self.report = make, width, who, report
        self.send: Send = _nothing
        self.batch: Any = None
        self.prefix: list[Any] = []

    def emit(self, values: Any) -> None:
        if type(values) is not list or len(values) != self.width:
            values = _values(values, self.width, self.who)
        self.send(self.batch, self.make(self.prefix + values if self.prefix else values))

    def report_error(self, exc: BaseException) -> None:
        self.report(exc)


class Processor:
    """Base: input layout(s) ``in_fields`` (one per input side), output ``out_fields``,
    ``children``: (processor index, side) pairs in the bolt, ``name`` for messages."""

    stateful = False  # True: start() makes per-batch state in batch.states[slot]
    slot = -1
    # True when execute reads its input by position only and never hands it to user
    # code: a parent may then pass the plain value list, without making a TridentTuple.
    accepts_lists = False

    def __init__(self, name: str, in_fields: Sequence[Sequence[str]], out_fields: Sequence[str]):
        self.name = name
        self.in_fields = [list(f) for f in in_fields]
        self.out_fields = list(out_fields)
        self.children: list[tuple[int, int]] = []
        self.send: Send = _nothing

    def prepare(self, env: Any) -> None:
        self.out_cls = schema(self.out_fields)

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        """Wire the children's receivers (``raw``: every child accepts plain lists).
        The bolt links children before parents, so a processor may replace its
        ``execute`` by a faster closure here and its parents get that one."""
        self.send = fan_out(receivers)

    def receiver(self, side: int) -> Send:
        return self.execute

    def start(self, batch: Any) -> None:
        pass

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        raise NotImplementedError

    def finish(self, batch: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass

    def projector(self, wanted: Sequence[str], side: int = 0) -> Callable[[Any], Any] | None:
        """None if ``wanted`` is the whole input layout (pass tuples as they are), else
        a function making the projected tuple. KeyError naming a missing field."""
        have = self.in_fields[side]
        wanted = list(wanted)
        if wanted == have:
            return None
        missing = [f for f in wanted if f not in have]
        if missing:
            raise KeyError(f"{self.name}: no field(s) {missing} in the stream's fields {have}")
        idx = [have.index(f) for f in wanted]
        cls = schema(wanted)
        if not idx:
            empty = cls()
            return lambda tup: empty
        if len(idx) == 1:
            (i,) = idx
            return lambda tup: cls((tup[i],))
        return lambda tup: cls([tup[i] for i in idx])


def _op_prepare(op: Any, env: Any) -> None:
    prepare = getattr(op, "prepare", None)
    if callable(prepare):
        prepare(env.conf, TridentOperationContext(env.context))


def _op_cleanup(op: Any) -> None:
    cleanup = getattr(op, "cleanup", None)
    if callable(cleanup):
        cleanup()


class ClosureCollector(TridentCollector):
    """A collector whose ``emit`` is a closure its processor made (an attribute: no
    bound method per call, and the closure's state in locals, not attributes)."""

    __slots__ = ("emit", "report_error")


class Each(Processor):
    """A Function: each input tuple plus what the function emits for it.

    Hot path (every value emitted between two operations passes here): ``execute`` and
    the collector's ``emit`` are closures sharing the current batch and input tuple
    (nonlocal variables), made in ``link``."""

    def __init__(
        self,
        name: str,
        in_fields: Any,
        inputs: Sequence[str],
        function: Any,
        function_fields: Sequence[str],
    ) -> None:
        super().__init__(name, [in_fields], [*in_fields, *function_fields])
        self.function, self.inputs, self.width = function, list(inputs), len(function_fields)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.project = self.projector(self.inputs)
        self.report = env.report
        _op_prepare(self.function, env)

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        super().link(receivers, raw)
        send, make, width = self.send, self.out_cls, self.width
        who = f"function {type(self.function).__name__} in {self.name}"
        call, project = self.function.execute, self.project
        batch: Any = None
        parent: Any = None

        if raw:

            def emit(values: Any) -> None:
                if type(values) is not list or len(values) != width:
                    values = _values(values, width, who)
                send(batch, parent + values)

        else:

            def emit(values: Any) -> None:
                if type(values) is not list or len(values) != width:
                    values = _values(values, width, who)
                send(batch, make(parent + values))

        collector = ClosureCollector()
        collector.emit = emit
        collector.report_error = self.report

        if project is None:

            def execute(b: Any, tup: Any) -> None:
                nonlocal batch, parent
                batch = b
                parent = tup
                call(tup, collector)

        else:

            def execute(b: Any, tup: Any) -> None:
                nonlocal batch, parent
                batch = b
                parent = tup
                call(project(tup), collector)

        self.collector = collector
        self.execute = execute  # type: ignore[method-assign]

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        raise RuntimeError(f"{self.name}: executed before it was linked")

    def cleanup(self) -> None:
        _op_cleanup(self.function)


class FilterEach(Processor):
    def __init__(self, name: str, in_fields: Any, inputs: Sequence[str], flt: Any) -> None:
        super().__init__(name, [in_fields], in_fields)
        self.filter, self.inputs = flt, list(inputs)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.project = self.projector(self.inputs)
        self.keep = self.filter.is_keep
        _op_prepare(self.filter, env)

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        project = self.project
        if self.keep(tup if project is None else project(tup)):
            self.send(batch, tup)

    def cleanup(self) -> None:
        _op_cleanup(self.filter)


class MapEach(Processor):
    """map (one value list per tuple) or flat_map (any number): the output replaces the
    tuple's fields with ``out_fields``."""

    def __init__(
        self, name: str, in_fields: Any, fn: Any, out_fields: Sequence[str], flat: bool
    ) -> None:
        super().__init__(name, [in_fields], out_fields)
        self.fn, self.flat = fn, flat

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.call = self.fn.execute
        self.width = len(self.out_fields)
        self.who = f"{'flat_map' if self.flat else 'map'} {type(self.fn).__name__} in {self.name}"
        _op_prepare(self.fn, env)

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        out = self.call(tup)
        make, width = self.out_cls, self.width
        if not self.flat:
            self.send(batch, make(_values(out, width, self.who)))
            return
        for values in out:
            self.send(batch, make(_values(values, width, self.who)))

    def cleanup(self) -> None:
        _op_cleanup(self.fn)


class Peek(Processor):
    def __init__(self, name: str, in_fields: Any, consumer: Any) -> None:
        super().__init__(name, [in_fields], in_fields)
        self.consumer = consumer

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        _op_prepare(self.consumer, env)

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        self.consumer.accept(tup)
        self.send(batch, tup)

    def cleanup(self) -> None:
        _op_cleanup(self.consumer)


class Project(Processor):
    def __init__(self, name: str, in_fields: Any, keep: Sequence[str]) -> None:
        super().__init__(name, [in_fields], keep)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        project = self.projector(self.out_fields)
        self.project = project if project is not None else (lambda tup: tup)

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        self.send(batch, self.project(tup))


class Merge(Processor):
    """Several parents into one stream (``topology.merge``): tuples pass by position
    into the merged layout."""

    def __init__(self, name: str, in_fields: Sequence[Sequence[str]], out_fields: Sequence[str]):
        super().__init__(name, in_fields, out_fields)

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        self.send(batch, self.out_cls(tup))


# -- aggregation -------------------------------------------------------------------


class _Aggregation(Processor):
    """Shared by the three kinds: optional grouping by ``group_fields`` (output: group
    values then function fields), and ``single_emit`` for batch-global aggregations
    (every task of the bolt finishes every batch; a task that got none of its tuples
    emits only if it is the one the batch maps to, so one result comes out: Storm's
    SingleEmitAggregator)."""

    stateful = True

    def __init__(
        self,
        name: str,
        in_fields: Any,
        group_fields: Sequence[str],
        inputs: Sequence[str],
        agg: Any,
        function_fields: Sequence[str],
        single_emit: str | None = None,
    ) -> None:
        super().__init__(name, [in_fields], [*group_fields, *function_fields])
        self.group_fields, self.inputs, self.agg = list(group_fields), list(inputs), agg
        self.width = len(function_fields)
        self.single_emit = single_emit  # None, "batch" (batch_global) or "first" (global)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.project = self.projector(self.inputs)
        have = self.in_fields[0]
        missing = [f for f in self.group_fields if f not in have]
        if missing:
            raise KeyError(f"{self.name}: no group field(s) {missing} in {have}")
        self.key_idx = [have.index(f) for f in self.group_fields]
        self.index = env.context.this_task_index
        self.tasks = len(env.context.this_component_tasks())
        self.batch_index = env.batch_index
        self.collector = FreshCollector(
            self.out_cls,
            self.width,
            f"aggregator {type(self.agg).__name__} in {self.name}",
            env.report,
        )
        _op_prepare(self.agg, env)

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        super().link(receivers, raw)
        self.collector.send = self.send

    def key(self, tup: TridentTuple) -> Any:
        idx = self.key_idx
        if len(idx) == 1:
            return tup[idx[0]]
        return tuple([tup[i] for i in idx])

    def hashable(self, key: Any) -> Any:
        """The key a dict refused (a list in it), as it is grouped (trident/group_keys.py)."""
        return group_key(key, self.group_fields, self.name)

    def key_values(self, key: Any) -> list[Any]:
        return [key] if len(self.key_idx) == 1 else list(key)

    def designated(self, batch: Any) -> bool:
        """Whether this task answers for a batch it got nothing of."""
        if self.single_emit is None:
            return True
        if self.single_emit == "first":
            return self.index == 0
        return self.batch_index(batch.bid, self.tasks) == self.index

    def cleanup(self) -> None:
        _op_cleanup(self.agg)


class CombinerAggregate(_Aggregation):
    """A CombinerAggregator over a partition: ``init`` each tuple (``mode="init"``) or
    take its value as a partial aggregate already (``mode="combine"``: the input field
    ``inputs[0]``, after a pre-aggregation upstream), ``combine`` per group.

    Hot path (the pre-aggregation sees every tuple): ``execute`` is a closure made in
    ``link``, specialised for the builtin Count on one group field (a dict increment)."""

    def __init__(self, *args: Any, mode: str = "init", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mode = mode

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.count = type(self.agg) is Count and self.mode == "init"  # the fast path
        if self.mode == "combine":
            self.value_idx = self.in_fields[0].index(self.inputs[0])
        # Reads by position and hands user code only projections it makes itself.
        self.accepts_lists = self.count or self.mode == "combine" or self.project is not None

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        super().link(receivers, raw)
        slot, agg, key_idx = self.slot, self.agg, self.key_idx
        missing = _MISSING
        if self.count:

            def value_of(tup: Any) -> Any:
                return 1
        elif self.mode == "init":
            init, project = agg.init, self.project
            if project is None:
                value_of = init
            else:

                def value_of(tup: Any) -> Any:
                    return init(project(tup))
        else:
            vi = self.value_idx

            def value_of(tup: Any) -> Any:
                return tup[vi]

        combine = agg.combine
        hashable = self.hashable

        if self.count and len(key_idx) == 1:
            (k,) = key_idx

            def execute(batch: Any, tup: Any) -> None:
                st = batch.states[slot]
                key = tup[k]
                try:
                    st[key] = st.get(key, 0) + 1
                except TypeError:
                    key = hashable(key)
                    st[key] = st.get(key, 0) + 1

        elif len(key_idx) == 1:
            (k,) = key_idx

            def execute(batch: Any, tup: Any) -> None:
                value = value_of(tup)
                st = batch.states[slot]
                key = tup[k]
                try:
                    old = st.get(key, missing)
                except TypeError:
                    key = hashable(key)
                    old = st.get(key, missing)
                st[key] = value if old is missing else combine(old, value)

        elif key_idx:

            def execute(batch: Any, tup: Any) -> None:
                value = value_of(tup)
                st = batch.states[slot]
                key = tuple([tup[i] for i in key_idx])
                try:
                    old = st.get(key, missing)
                except TypeError:
                    key = hashable(key)
                    old = st.get(key, missing)
                st[key] = value if old is missing else combine(old, value)

        else:

            def execute(batch: Any, tup: Any) -> None:
                value = value_of(tup)
                st = batch.states[slot]
                old = st[0]
                st[0] = value if old is missing else combine(old, value)

        self.execute = execute  # type: ignore[method-assign]

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = {} if self.key_idx else [_MISSING]

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        raise RuntimeError(f"{self.name}: executed before it was linked")

    def finish(self, batch: Any) -> None:
        st = batch.states[self.slot]
        make, send = self.out_cls, self.send
        if self.key_idx:
            single = len(self.key_idx) == 1
            for key, value in st.items():
                send(batch, make([key, value] if single else [*key, value]))
            return
        value = st[0]
        if value is _MISSING:
            if not self.designated(batch):
                return
            value = self.agg.zero()
        send(batch, make([value]))


class ReducerAggregate(_Aggregation):
    def start(self, batch: Any) -> None:
        batch.states[self.slot] = {} if self.key_idx else [_MISSING]

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        agg, project = self.agg, self.project
        arg = tup if project is None else project(tup)
        st = batch.states[self.slot]
        if self.key_idx:
            key = self.key(tup)
            try:
                cur = st.get(key, _MISSING)
            except TypeError:  # a list in the key
                key = self.hashable(key)
                cur = st.get(key, _MISSING)
            st[key] = agg.reduce(agg.init() if cur is _MISSING else cur, arg)
        else:
            cur = st[0]
            st[0] = agg.reduce(agg.init() if cur is _MISSING else cur, arg)

    def finish(self, batch: Any) -> None:
        st = batch.states[self.slot]
        make, send = self.out_cls, self.send
        if self.key_idx:
            for key, value in st.items():
                send(batch, make([*self.key_values(key), value]))
            return
        value = st[0]
        if value is _MISSING:
            if not self.designated(batch):
                return
            value = self.agg.init()
        send(batch, make([value]))


class AggregatorAggregate(_Aggregation):
    """A general Aggregator: ``init(batch_id, collector)`` per group (lazily, at its
    first tuple), ``aggregate`` per tuple, ``complete`` at the end of the batch; what it
    emits gets the group's values in front."""

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = {}

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        st = batch.states[self.slot]
        key = self.key(tup) if self.key_idx else None
        try:
            state = st.get(key, _MISSING)
        except TypeError:  # a list in the key
            key = self.hashable(key)
            state = st.get(key, _MISSING)
        c = self.collector
        c.batch = batch
        c.prefix = self.key_values(key) if self.key_idx else []
        if state is _MISSING:
            state = st[key] = self.agg.init(batch.bid, c)
        project = self.project
        self.agg.aggregate(state, tup if project is None else project(tup), c)

    def finish(self, batch: Any) -> None:
        st = batch.states[self.slot]
        c = self.collector
        c.batch = batch
        if not st and not self.key_idx:
            if not self.designated(batch):
                return
            c.prefix = []
            st[None] = self.agg.init(batch.bid, c)
        for key, state in st.items():
            c.prefix = self.key_values(key) if self.key_idx else []
            self.agg.complete(state, c)


# -- state --------------------------------------------------------------------------


class PartitionPersist(Processor):
    """partition_persist: the batch's tuples for this partition, handed to the updater
    in the commit phase between ``state.begin_commit(txid)`` and ``state.commit(txid)``
    (Storm's PartitionPersistProcessor). An empty batch is skipped unless the state
    asks to be framed for those too (``commit_empty_batches``). Emits go to the state's
    new values stream."""

    stateful = True

    def __init__(
        self,
        name: str,
        in_fields: Any,
        inputs: Sequence[str],
        state_id: str,
        updater: Any,
        function_fields: Sequence[str],
    ) -> None:
        super().__init__(name, [in_fields], function_fields)
        self.inputs, self.state_id, self.updater = list(inputs), state_id, updater

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.project = self.projector(self.inputs)
        self.state = env.states[self.state_id]
        self.env = env
        self.collector = FreshCollector(
            self.out_cls,
            len(self.out_fields),
            f"state updater {type(self.updater).__name__} in {self.name}",
            env.report,
        )
        _op_prepare(self.updater, env)

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        super().link(receivers, raw)
        self.collector.send = self.send

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = []

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        project = self.project
        batch.states[self.slot].append(tup if project is None else project(tup))

    def finish(self, batch: Any) -> None:
        tuples = batch.states[self.slot]
        state = self.state
        if not tuples and not getattr(state, "commit_empty_batches", False):
            return
        txid = batch.txid
        c = self.collector
        c.batch = batch
        state.begin_commit(txid)
        if tuples:
            self.updater.update_state(state, tuples, c)
        state.commit(txid)
        self.env.committed(self.state_id, txid)

    def cleanup(self) -> None:
        _op_cleanup(self.updater)


class StateQuery(Processor):
    """state_query: the batch's tuples, looked up in one ``batch_retrieve``, then
    ``execute(tuple, result, collector)`` per tuple; output: input fields plus the
    function fields (Storm's StateQueryProcessor)."""

    stateful = True

    def __init__(
        self,
        name: str,
        in_fields: Any,
        inputs: Sequence[str],
        state_id: str,
        function: Any,
        function_fields: Sequence[str],
    ) -> None:
        super().__init__(name, [in_fields], [*in_fields, *function_fields])
        self.inputs, self.state_id, self.function = list(inputs), state_id, function
        self.width = len(function_fields)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.project = self.projector(self.inputs)
        self.state = env.states[self.state_id]
        self.collector = AppendCollector(
            self.out_cls,
            self.width,
            f"query function {type(self.function).__name__} in {self.name}",
            env.report,
        )
        _op_prepare(self.function, env)

    def link(self, receivers: Sequence[Send], raw: bool = False) -> None:
        super().link(receivers, raw)
        self.collector.send = self.send

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = []

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        batch.states[self.slot].append(tup)

    def finish(self, batch: Any) -> None:
        tuples = batch.states[self.slot]
        if not tuples:
            return
        project = self.project
        args = tuples if project is None else [project(t) for t in tuples]
        results = self.function.batch_retrieve(self.state, args)
        check_results(self.function, args, results)
        c = self.collector
        c.batch = batch
        execute = self.function.execute
        for tup, arg, result in zip(tuples, args, results, strict=True):
            c.parent = tup
            execute(arg, result, c)

    def cleanup(self) -> None:
        _op_cleanup(self.function)


class Join(Processor):
    """join: per batch, each side's tuples by their join key; at the end of the batch
    every combination per key (inner), or with a side's fields None where it has no
    tuple for a key (that side OUTER). Output: the join key, then each side's other
    fields in order (Storm's JoinerMultiReducer)."""

    stateful = True

    def __init__(
        self,
        name: str,
        in_fields: Sequence[Sequence[str]],
        join_fields: Sequence[Sequence[str]],
        outer: Sequence[bool],
        out_fields: Sequence[str],
    ) -> None:
        super().__init__(name, in_fields, out_fields)
        self.join_fields = [list(j) for j in join_fields]
        self.outer = list(outer)

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.key_idx = [
            [f.index(j) for j in js] for f, js in zip(self.in_fields, self.join_fields, strict=True)
        ]
        self.rest_idx = [
            [i for i in range(len(f)) if i not in keys]
            for f, keys in zip(self.in_fields, self.key_idx, strict=True)
        ]

    def receiver(self, side: int) -> Send:
        def execute(batch: Any, tup: TridentTuple) -> None:
            sides = batch.states[self.slot]
            key = tuple([tup[i] for i in self.key_idx[side]])
            try:
                got = sides[side].setdefault(key, [])
            except TypeError:
                key = group_key(key, self.join_fields[side], self.name)
                got = sides[side].setdefault(key, [])
            got.append([tup[i] for i in self.rest_idx[side]])

        return execute

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = [{} for _ in self.in_fields]

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        self.receiver(0)(batch, tup)

    def finish(self, batch: Any) -> None:
        sides = batch.states[self.slot]
        keys: dict[Any, None] = {}
        for side in sides:
            keys.update(dict.fromkeys(side))
        make, send = self.out_cls, self.send
        for key in keys:
            rows: list[list[Any]] = [list(key)]
            for i, side in enumerate(sides):
                got = side.get(key)
                if got is None:
                    if not self.outer[i]:
                        rows = []
                        break
                    got = [[None] * len(self.rest_idx[i])]
                rows = [r + g for r in rows for g in got]
            for r in rows:
                send(batch, make(r))


# -- leaving the bolt ------------------------------------------------------------------


class Output(Processor):
    """Emits to another bolt on ``stream``: ``[batch id, *values]``, unanchored (the
    batch, not each tuple, is tracked), counting what went to each task."""

    accepts_lists = True

    def __init__(self, name: str, in_fields: Any, stream: str) -> None:
        super().__init__(name, [in_fields], in_fields)
        self.stream = stream

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        self.emit = env.collector.emit

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        values = [batch.bid]
        values += tup
        targets = self.emit(values, None, self.stream)
        sent = batch.tally.sent
        for t in targets:
            sent[t] = sent.get(t, 0) + 1


class ReturnResults(Processor):
    """The end of a DRPC stream: the batch's (request's) result tuples, sent to the
    DRPC server as Storm's JSON text, a list of each tuple's values, by the task the
    request's batch maps to (every task finishes every batch)."""

    stateful = True

    def __init__(self, name: str, in_fields: Any) -> None:
        super().__init__(name, [in_fields], [])

    def prepare(self, env: Any) -> None:
        super().prepare(env)
        from tupletree.drpc.bolts import ResultDelivery
        from tupletree.drpc.invocations import DRPC_INVOCATIONS_TOKEN

        self.delivery = ResultDelivery(env.context.conf.get(DRPC_INVOCATIONS_TOKEN))
        self.index = env.context.this_task_index
        self.tasks = len(env.context.this_component_tasks())
        self.batch_index = env.batch_index
        self.report = env.report

    def start(self, batch: Any) -> None:
        batch.states[self.slot] = []

    def execute(self, batch: Any, tup: TridentTuple) -> None:
        batch.states[self.slot].append(list(tup))

    def finish(self, batch: Any) -> None:
        for exc in self.delivery.errors():
            self.report(exc)
        rows = batch.states[self.slot]
        if not rows and self.batch_index(batch.bid, self.tasks) != self.index:
            return
        self.delivery.deliver(batch.bid.return_info, json.dumps(rows, default=str))

    def cleanup(self) -> None:
        self.delivery.close()
