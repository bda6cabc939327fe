"""Trident's operations, as Storm's (trident/operation/*.java) in snake_case.

    class Split(BaseFunction):
        def execute(self, tup, collector):
            for word in tup.get("sentence").split():
                collector.emit([word])

- ``BaseFunction.execute(tup, collector)``: emit zero or more value lists, one value per
  function field; each output tuple is the input tuple's fields plus them.
- ``BaseFilter.is_keep(tup)``: keep the tuple or drop it.
- ``CombinerAggregator``: ``init(tup)`` (a tuple's value), ``combine(a, b)``, ``zero()``
  (the value of nothing). Trident combines within each partition before it
  repartitions (one tuple per key and partition crosses the network, not every tuple).
- ``ReducerAggregator``: ``init()``, ``reduce(curr, tup)``.
- ``Aggregator``: ``init(batch_id, collector)`` -> a state, ``aggregate(state, tup,
  collector)``, ``complete(state, collector)``; it may emit anywhere.
- ``MapFunction.execute(tup)`` -> one value list; ``FlatMapFunction.execute(tup)`` ->
  value lists; ``Consumer.accept(tup)``.
- Every operation may define ``prepare(conf, context)`` (``context`` is a
  TridentOperationContext: ``num_partitions()``, ``get_partition_index()``,
  ``register_metric``) and ``cleanup()``.

Where Storm takes a Function, Filter or MapFunction, a plain callable does too
(``function_for`` and friends): ``each(Fields("a"), fn, Fields("b"))`` calls ``fn(tup)``
and emits each value list it returns or yields; ``filter(fn)`` and ``each(fields,
fn)`` keep a tuple when ``fn(tup)`` is true; ``map(fn)`` emits ``fn(tup)``;
``flat_map(fn)`` each list of ``fn(tup)``; ``peek(fn)`` calls it. Lambdas and closures
are fine: they travel to the workers by value (cloudpickle).

Errors: ``FailedException`` (or any exception) from an operation fails the batch, which
is replayed with the same txid; other exceptions are also reported as errors.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from typing import Any


class TridentCollector:
    """What an operation emits with: ``emit(values)``, ``flush()``, ``report_error``."""

    def emit(self, values: Any) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        pass

    def report_error(self, exc: BaseException) -> None:
        raise NotImplementedError


class Operation:
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """Called once per task before the first batch."""

    def cleanup(self) -> None:
        """Called once when the task shuts down."""


BaseOperation = Operation


class Function(Operation):
    def execute(self, tup: Any, collector: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute(tup, collector)")


BaseFunction = Function


class Filter(Operation):
    def is_keep(self, tup: Any) -> bool:
        raise NotImplementedError(f"{type(self).__name__} must define is_keep(tup)")


BaseFilter = Filter


class MapFunction(Operation):
    def execute(self, tup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define execute(tup)")


class FlatMapFunction(Operation):
    def execute(self, tup: Any) -> Iterable[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define execute(tup)")


class Consumer(Operation):
    def accept(self, tup: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define accept(tup)")


class CombinerAggregator(Operation):
    def init(self, tup: Any) -> Any:
        raise NotImplementedError

    def combine(self, val1: Any, val2: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        raise NotImplementedError


class ReducerAggregator(Operation):
    def init(self) -> Any:
        raise NotImplementedError

    def reduce(self, curr: Any, tup: Any) -> Any:
        raise NotImplementedError


class Aggregator(Operation):
    def init(self, batch_id: Any, collector: Any) -> Any:
        raise NotImplementedError

    def aggregate(self, state: Any, tup: Any, collector: Any) -> None:
        raise NotImplementedError

    def complete(self, state: Any, collector: Any) -> None:
        raise NotImplementedError


BaseAggregator = Aggregator


class Assembly:
    """Several operations as one (``stream.apply_assembly(FirstN(3, "count"))``)."""

    def apply(self, stream: Any) -> Any:
        raise NotImplementedError


class TridentOperationContext:
    """What ``prepare`` gets: the task's place among the operation's partitions, the
    topology context, and metric registration."""

    def __init__(self, topology_context: Any) -> None:
        self.topology_context = topology_context

    def num_partitions(self) -> int:
        return len(self.topology_context.this_component_tasks())

    def get_partition_index(self) -> int:
        return int(self.topology_context.this_task_index)

    def register_metric(self, name: str, fn: Any) -> None:
        self.topology_context.register_metric(name, fn)

    def __getattr__(self, name: str) -> Any:
        # The rest of the TopologyContext (topology_name, component_id, task_id, now...):
        # a state factory names its resources after them (make_state's ``metrics``).
        if name == "topology_context":
            raise AttributeError(name)
        return getattr(self.topology_context, name)


# -- plain callables ----------------------------------------------------------------


class _ByValue:
    """Holds a user callable; pickles it with cloudpickle (lambdas, closures, functions
    of a script), which Python's pickle cannot do, so each task gets its copy."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"expected a callable, got {type(fn).__name__} {fn!r}")
        self.fn = fn

    def __reduce__(self) -> tuple[Any, ...]:
        from pyspark import cloudpickle  # pyspark's bundled copy: no JVM is started

        return (_restore, (type(self), cloudpickle.dumps(self.fn)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self.fn, '__qualname__', self.fn)!r})"


def _restore(cls: type, blob: bytes) -> Any:
    return cls(pickle.loads(blob))


class CallableFunction(_ByValue, Function):
    """``fn(tup)`` returns (or yields) the value lists to emit, or None."""

    def execute(self, tup: Any, collector: Any) -> None:
        out = self.fn(tup)
        if out is not None:
            for values in out:
                collector.emit(values)


class CallableFilter(_ByValue, Filter):
    def is_keep(self, tup: Any) -> bool:
        return bool(self.fn(tup))


class CallableMap(_ByValue, MapFunction):
    def execute(self, tup: Any) -> Any:
        return self.fn(tup)


class CallableFlatMap(_ByValue, FlatMapFunction):
    def execute(self, tup: Any) -> Iterable[Any]:
        out = self.fn(tup)
        return () if out is None else out


class CallableConsumer(_ByValue, Consumer):
    def accept(self, tup: Any) -> None:
        self.fn(tup)


def _as(op: Any, kind: type, wrapper: type, what: str, methods: tuple[str, ...]) -> Any:
    if isinstance(op, kind):
        return op
    if all(callable(getattr(op, m, None)) for m in methods) and not isinstance(op, type):
        return op  # duck-typed: an object with the methods
    if callable(op) and not isinstance(op, type):
        return wrapper(op)
    raise TypeError(
        f"{what} must be a {kind.__name__}, an object with {', '.join(methods)}, or a plain "
        f"callable; got {op!r}"
        + (" (a class: did you mean an instance, with ()?)" if isinstance(op, type) else "")
    )


def function_for(op: Any) -> Any:
    return _as(op, Function, CallableFunction, "a function", ("execute",))


def filter_for(op: Any) -> Any:
    return _as(op, Filter, CallableFilter, "a filter", ("is_keep",))


def map_for(op: Any) -> Any:
    return _as(op, MapFunction, CallableMap, "a map function", ("execute",))


def flat_map_for(op: Any) -> Any:
    return _as(op, FlatMapFunction, CallableFlatMap, "a flat-map function", ("execute",))


def consumer_for(op: Any) -> Any:
    return _as(op, Consumer, CallableConsumer, "a consumer", ("accept",))


def is_filter(op: Any) -> bool:
    """A Filter (or an object with ``is_keep``) rather than a Function."""
    return isinstance(op, Filter) or (
        not isinstance(op, Function) and callable(getattr(op, "is_keep", None))
    )


COMBINER, REDUCER, AGGREGATOR = "combiner", "reducer", "aggregator"


def refuse_class(obj: Any, what: str) -> None:
    """TypeError for a class given where an instance is wanted (``Count`` for
    ``Count()``): its methods are there, unbound, and would fail only in the workers."""
    if isinstance(obj, type):
        raise TypeError(
            f"{what} must be an instance, got the class {obj.__qualname__}: "
            f"did you mean {obj.__qualname__}()?"
        )


def aggregator_kind(agg: Any) -> str:
    """Which of the three aggregator contracts ``agg`` follows (by class, else by its
    methods); TypeError naming what it lacks."""
    refuse_class(agg, "an aggregator")
    if isinstance(agg, CombinerAggregator):
        return COMBINER
    if isinstance(agg, ReducerAggregator):
        return REDUCER
    if isinstance(agg, Aggregator):
        return AGGREGATOR
    has = {
        m
        for m in ("init", "combine", "zero", "reduce", "aggregate", "complete")
        if callable(getattr(agg, m, None))
    }
    if {"init", "combine", "zero"} <= has:
        return COMBINER
    if {"init", "reduce"} <= has:
        return REDUCER
    if {"init", "aggregate", "complete"} <= has:
        return AGGREGATOR
    raise TypeError(
        f"{agg!r} is not an aggregator: give a CombinerAggregator (init, combine, zero), "
        f"a ReducerAggregator (init, reduce) or an Aggregator (init, aggregate, complete)"
    )
