"""Stream, GroupedStream and TridentState: the fluent API (Storm's Stream.java,
fluent/GroupedStream.java, TridentState.java) in snake_case.

Every method adds a node to the topology's graph and returns a new Stream (the graph is
compiled by ``TridentTopology.build``). Where Storm overloads a method on a leading
``Fields`` (the input fields), the Python method takes it as an optional first argument:
``each(Fields("sentence"), Split(), Fields("word"))`` or ``each(Split(),
Fields("word"))`` (input: every field). Operations see only their input fields.

Aggregations as Storm plans them: a CombinerAggregator is combined within each
partition first and only the partial results cross the network (once per key and
partition per batch); the others repartition every tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.topology.fields import Fields
from tupletree.topology.groupings import CustomStreamGrouping
from tupletree.trident.graph import OP, PARTITION, Node
from tupletree.trident.operation import (
    AGGREGATOR,
    COMBINER,
    REDUCER,
    aggregator_kind,
    consumer_for,
    filter_for,
    flat_map_for,
    function_for,
    is_filter,
    map_for,
    refuse_class,
)
from tupletree.trident.processors import (
    AggregatorAggregate,
    CombinerAggregate,
    Each,
    FilterEach,
    MapEach,
    PartitionPersist,
    Peek,
    Project,
    ReducerAggregate,
    StateQuery,
)
from tupletree.trident.state.aggregate_updaters import (
    CombinerAggStateUpdater,
    MapCombinerAggStateUpdater,
    MapReducerAggStateUpdater,
    ReducerAggStateUpdater,
)


def as_fields(value: Any, what: str) -> list[str]:
    """Field names from a Fields, a list of names or one name; TypeError naming
    ``what`` otherwise."""
    if isinstance(value, Fields):
        return value.to_list()
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(Fields(list(value)))
    raise TypeError(f"{what} must be Fields (or a list of field names), got {value!r}")


def check_factory(factory: Any, what: str) -> None:
    """TypeError naming ``what`` unless ``factory`` is a StateFactory instance."""
    refuse_class(factory, f"{what}'s state factory")
    if not callable(getattr(factory, "make_state", None)):
        raise TypeError(f"{what} needs a StateFactory (an object with make_state), got {factory!r}")


def _leading(args: Sequence[Any]) -> tuple[list[str] | None, list[Any]]:
    """(input fields, rest) when the first argument is a Fields, else (None, args)."""
    if args and isinstance(args[0], Fields | list | tuple) and not callable(args[0]):
        return as_fields(args[0], "the input fields"), list(args[1:])
    return None, list(args)


class Stream:
    def __init__(self, topology: Any, node: Node) -> None:
        self._topology = topology
        self._node = node

    # -- plumbing -----------------------------------------------------------------------

    def get_output_fields(self) -> Fields:
        return Fields(self._node.fields)

    def _inputs(self, inputs: list[str] | None, what: str) -> list[str]:
        have = self._node.fields
        if inputs is None:
            return list(have)
        missing = [f for f in inputs if f not in have]
        if missing:
            raise ValueError(f"{what}: no field(s) {missing} in the stream; its fields are {have}")
        return inputs

    def _new_fields(self, fields: list[str], what: str) -> None:
        clash = [f for f in fields if f in self._node.fields]
        if clash:
            raise ValueError(
                f"{what}: output field(s) {clash} are already in the stream {self._node.fields}; "
                "choose other names (or project() first)"
            )

    def _op(self, label: str, fields: list[str], make: Any, **kwargs: Any) -> Stream:
        node = self._topology._add(OP, fields, [self._node], label=label, make=make, **kwargs)
        return Stream(self._topology, node)

    def _partition(self, grouping: str, fields: Sequence[str] = (), custom: Any = None) -> Stream:
        node = self._topology._add(
            PARTITION,
            self._node.fields,
            [self._node],
            grouping=grouping,
            grouping_fields=fields,
            label=grouping,
        )
        node.custom = custom
        return Stream(self._topology, node)

    def name(self, name: str) -> Stream:
        """Name this stream's operation (it shows in the bolt's id: ``b-1-counts``)."""
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise ValueError(
                f"a stream name must be a non-empty str not starting with '__', got {name!r}"
            )
        self._node.name = name
        return self

    def parallelism_hint(self, hint: int) -> Stream:
        """The parallelism of the bolt this operation runs in: a bolt gets the largest
        hint among its operations (1 if none); on a partition, the hint goes to the bolt
        after it; on a spout, to the spout's bolt."""
        if isinstance(hint, bool) or not isinstance(hint, int) or hint < 1:
            raise ValueError(f"parallelism_hint must be a positive integer, got {hint!r}")
        self._node.parallelism = hint
        return self

    def to_stream(self) -> Stream:
        return self

    def apply_assembly(self, assembly: Any) -> Stream:
        return assembly.apply(self)

    # -- each and friends --------------------------------------------------------------

    def each(self, *args: Any) -> Stream:
        """``each([input_fields,] function, function_fields)`` appends the function's
        output; ``each([input_fields,] filter)`` keeps or drops tuples."""
        inputs, rest = _leading(args)
        if len(rest) == 1:
            return self._filter(inputs, rest[0])
        if len(rest) != 2:
            raise TypeError(
                "each takes ([input_fields,] function, function_fields) or "
                f"([input_fields,] filter), got {len(args)} arguments"
            )
        op, out = rest
        if is_filter(op):
            raise TypeError(f"each: {op!r} is a Filter; call each([input_fields,] filter)")
        function = function_for(op)
        ins = self._inputs(inputs, "each")
        out_fields = as_fields(out, "each's function fields")
        self._new_fields(out_fields, "each")
        label = f"each {type(getattr(function, 'fn', function)).__name__}"
        have = self._node.fields
        return self._op(
            label,
            [*have, *out_fields],
            lambda in_fields, name: Each(name, in_fields[0], ins, function, out_fields),
        )

    def filter(self, *args: Any) -> Stream:
        inputs, rest = _leading(args)
        if len(rest) != 1:
            raise TypeError("filter takes ([input_fields,] filter)")
        return self._filter(inputs, rest[0])

    def _filter(self, inputs: list[str] | None, op: Any) -> Stream:
        flt = filter_for(op)
        ins = self._inputs(inputs, "filter")
        return self._op(
            f"filter {type(getattr(flt, 'fn', flt)).__name__}",
            list(self._node.fields),
            lambda in_fields, name: FilterEach(name, in_fields[0], ins, flt),
        )

    def map(self, function: Any, output_fields: Any = None) -> Stream:
        fn = map_for(function)
        out = (
            self._node.fields if output_fields is None else as_fields(output_fields, "map's fields")
        )
        return self._op(
            "map", list(out), lambda in_fields, name: MapEach(name, in_fields[0], fn, out, False)
        )

    def flat_map(self, function: Any, output_fields: Any = None) -> Stream:
        fn = flat_map_for(function)
        out = (
            self._node.fields
            if output_fields is None
            else as_fields(output_fields, "flat_map's fields")
        )
        return self._op(
            "flat_map",
            list(out),
            lambda in_fields, name: MapEach(name, in_fields[0], fn, out, True),
        )

    def peek(self, consumer: Any) -> Stream:
        c = consumer_for(consumer)
        return self._op(
            "peek", list(self._node.fields), lambda in_fields, name: Peek(name, in_fields[0], c)
        )

    def project(self, fields: Any) -> Stream:
        keep = self._inputs(as_fields(fields, "project's fields"), "project")
        return self._op("project", keep, lambda in_fields, name: Project(name, in_fields[0], keep))

    # -- repartitioning ----------------------------------------------------------------

    def partition_by(self, fields: Any) -> Stream:
        by = self._inputs(as_fields(fields, "partition_by's fields"), "partition_by")
        if not by:
            raise ValueError("partition_by needs at least one field")
        return self._partition("fields", by)

    def shuffle(self) -> Stream:
        return self._partition("shuffle")

    def local_or_shuffle(self) -> Stream:
        return self._partition("local_or_shuffle")

    def global_(self) -> Stream:
        return self._partition("global")

    def batch_global(self) -> Stream:
        return self._partition("batch_global")

    def broadcast(self) -> Stream:
        return self._partition("broadcast")

    def identity_partition(self) -> Stream:
        return self._partition("identity")

    def partition(self, grouping: CustomStreamGrouping) -> Stream:
        if not callable(getattr(grouping, "choose_tasks", None)):
            raise TypeError(f"partition takes a CustomStreamGrouping, got {grouping!r}")
        return self._partition("custom", custom=grouping)

    def group_by(self, fields: Any) -> GroupedStream:
        by = self._inputs(as_fields(fields, "group_by's fields"), "group_by")
        if not by:
            raise ValueError("group_by needs at least one field")
        return GroupedStream(self, by)

    # -- aggregation -------------------------------------------------------------------

    def _agg_node(
        self,
        kind: str,
        agg: Any,
        ins: list[str],
        group: list[str],
        out: list[str],
        mode: str = "init",
        single_emit: str | None = None,
    ) -> Stream:
        fields = [*group, *out]
        if kind == COMBINER:
            make = lambda in_fields, name: CombinerAggregate(  # noqa: E731
                name, in_fields[0], group, ins, agg, out, single_emit=single_emit, mode=mode
            )
        elif kind == REDUCER:
            make = lambda in_fields, name: ReducerAggregate(  # noqa: E731
                name, in_fields[0], group, ins, agg, out, single_emit=single_emit
            )
        else:
            make = lambda in_fields, name: AggregatorAggregate(  # noqa: E731
                name, in_fields[0], group, ins, agg, out, single_emit=single_emit
            )
        label = f"{'combine' if mode == 'combine' else 'aggregate'} {type(agg).__name__}"
        return self._op(label, fields, make)

    def _agg_args(self, args: Sequence[Any], what: str) -> tuple[list[str], Any, str, list[str]]:
        inputs, rest = _leading(args)
        if len(rest) != 2:
            raise TypeError(f"{what} takes ([input_fields,] aggregator, function_fields)")
        agg, out = rest
        kind = aggregator_kind(agg)
        ins = self._inputs(inputs, what)
        out_fields = as_fields(out, f"{what}'s function fields")
        if kind == COMBINER and len(out_fields) != 1:
            raise ValueError(f"{what}: a CombinerAggregator makes one field, got {out_fields}")
        if kind == REDUCER and len(out_fields) != 1:
            raise ValueError(f"{what}: a ReducerAggregator makes one field, got {out_fields}")
        return ins, agg, kind, out_fields

    def partition_aggregate(self, *args: Any) -> Stream:
        """The aggregate of each partition's part of each batch (no repartition)."""
        ins, agg, kind, out = self._agg_args(args, "partition_aggregate")
        return self._agg_node(kind, agg, ins, [], out)

    def aggregate(self, *args: Any) -> Stream:
        """The aggregate of each whole batch: one tuple per batch."""
        ins, agg, kind, out = self._agg_args(args, "aggregate")
        if kind == COMBINER:
            partial = self._agg_node(kind, agg, ins, [], out)
            return partial.batch_global()._agg_node(
                kind, agg, out, [], out, mode="combine", single_emit="batch"
            )
        return self.batch_global()._agg_node(kind, agg, ins, [], out, single_emit="batch")

    def persistent_aggregate(self, factory: Any, *args: Any) -> TridentState:
        """The aggregate of every batch so far, kept in ``factory``'s state (one value:
        the state must be Snapshottable, as MemoryMapState is)."""
        check_factory(factory, "persistent_aggregate")
        ins, agg, kind, out = self._agg_args(args, "persistent_aggregate")
        if kind == COMBINER:
            partial = self._agg_node(kind, agg, ins, [], out)
            combined = partial.global_()._agg_node(
                kind, agg, out, [], out, mode="combine", single_emit="first"
            )
            return combined.partition_persist(factory, out, CombinerAggStateUpdater(agg, out), out)
        if kind == REDUCER:
            return self.global_().partition_persist(
                factory, ins, ReducerAggStateUpdater(agg, ins), out
            )
        raise TypeError(
            "persistent_aggregate takes a CombinerAggregator or a ReducerAggregator "
            f"(as Storm), got the Aggregator {agg!r}"
        )

    # -- state -------------------------------------------------------------------------

    def partition_persist(self, factory: Any, *args: Any) -> TridentState:
        """``partition_persist(state_factory, [input_fields,] updater[, function_fields])``:
        each partition's part of each batch handed to the updater in the commit phase."""
        check_factory(factory, "partition_persist")
        inputs, rest = _leading(args)
        if len(rest) not in (1, 2):
            raise TypeError(
                "partition_persist takes "
                "(state_factory, [input_fields,] updater[, function_fields])"
            )
        updater = rest[0]
        refuse_class(updater, "partition_persist's updater")
        if not callable(getattr(updater, "update_state", None)):
            raise TypeError(
                f"partition_persist: {updater!r} has no update_state(state, tuples, collector)"
            )
        out = as_fields(rest[1], "partition_persist's function fields") if len(rest) == 2 else []
        ins = self._inputs(inputs, "partition_persist")
        state_id = self._topology._state_id()
        node = self._topology._add(
            OP,
            out,
            [self._node],
            label=f"persist {type(updater).__name__}",
            make=lambda in_fields, name: PartitionPersist(
                name, in_fields[0], ins, state_id, updater, out
            ),
            state_id=state_id,
            factory=factory,
            committer=True,
        )
        return TridentState(self._topology, node)

    def state_query(self, state: TridentState, *args: Any) -> Stream:
        """``state_query(state, [input_fields,] query_function, function_fields)``: runs
        in the state's bolt; group_by the state's key first for a map state."""
        if not isinstance(state, TridentState):
            raise TypeError(f"state_query takes a TridentState first, got {state!r}")
        if state._topology is not self._topology:
            raise ValueError("state_query: the state belongs to another TridentTopology")
        inputs, rest = _leading(args)
        if len(rest) != 2:
            raise TypeError(
                "state_query takes (state, [input_fields,] query_function, function_fields)"
            )
        fn, out = rest
        refuse_class(fn, "state_query's query function")
        if not callable(getattr(fn, "batch_retrieve", None)):
            raise TypeError(
                f"state_query: {fn!r} is not a query function (batch_retrieve, execute)"
            )
        ins = self._inputs(inputs, "state_query")
        out_fields = as_fields(out, "state_query's function fields")
        self._new_fields(out_fields, "state_query")
        state_id = state._node.state_id
        return self._op(
            f"query {type(fn).__name__}",
            [*self._node.fields, *out_fields],
            lambda in_fields, name: StateQuery(name, in_fields[0], ins, state_id, fn, out_fields),
            state_id=state_id,
            colocate_with=state._node,
        )

    def __repr__(self) -> str:
        return f"Stream({self._node!r})"


class GroupedStream:
    """A stream grouped by ``group_fields``: aggregations are per group."""

    def __init__(self, stream: Stream, group_fields: list[str]) -> None:
        self._stream = stream
        self.group_fields = list(group_fields)

    def get_output_fields(self) -> Fields:
        return self._stream.get_output_fields()

    def get_group_fields(self) -> Fields:
        return Fields(self.group_fields)

    def to_stream(self) -> Stream:
        return self._stream

    def name(self, name: str) -> GroupedStream:
        self._stream.name(name)
        return self

    def parallelism_hint(self, hint: int) -> GroupedStream:
        self._stream.parallelism_hint(hint)
        return self

    def each(self, *args: Any) -> GroupedStream:
        return GroupedStream(self._stream.each(*args), self.group_fields)

    def _args(self, args: Sequence[Any], what: str) -> tuple[list[str], Any, str, list[str]]:
        ins, agg, kind, out = self._stream._agg_args(args, what)
        self._stream._new_fields(out, what)
        if args and isinstance(args[0], Fields | list | tuple):
            return ins, agg, kind, out
        # Storm: without input fields, an aggregator of a grouped stream sees the
        # fields that are not the grouping's.
        return [f for f in ins if f not in self.group_fields], agg, kind, out

    def partition_aggregate(self, *args: Any) -> Stream:
        ins, agg, kind, out = self._args(args, "partition_aggregate")
        return self._stream._agg_node(kind, agg, ins, self.group_fields, out)

    def aggregate(self, *args: Any) -> Stream:
        ins, agg, kind, out = self._args(args, "aggregate")
        g = self.group_fields
        if kind == COMBINER:
            partial = self._stream._agg_node(kind, agg, ins, g, out)
            return partial.partition_by(g)._agg_node(kind, agg, out, g, out, mode="combine")
        return self._stream.partition_by(g)._agg_node(kind, agg, ins, g, out)

    def persistent_aggregate(self, factory: Any, *args: Any) -> TridentState:
        """Per group, the aggregate of every batch so far, in ``factory``'s map state
        (keys: the group's values). Its new values stream: group fields + the result."""
        check_factory(factory, "persistent_aggregate")
        ins, agg, kind, out = self._args(args, "persistent_aggregate")
        g = self.group_fields
        if kind == COMBINER:
            partial = self._stream._agg_node(kind, agg, ins, g, out)
            combined = partial.partition_by(g)._agg_node(kind, agg, out, g, out, mode="combine")
            return combined.partition_persist(
                factory, [*g, *out], MapCombinerAggStateUpdater(agg, g, out), [*g, *out]
            )
        if kind == REDUCER:
            return self._stream.partition_by(g).partition_persist(
                factory, [*g, *ins], MapReducerAggStateUpdater(agg, g, ins), [*g, *out]
            )
        raise TypeError(
            "persistent_aggregate takes a CombinerAggregator or a ReducerAggregator "
            f"(as Storm), got the Aggregator {agg!r}"
        )

    def state_query(self, state: TridentState, *args: Any) -> Stream:
        return self._stream.partition_by(self.group_fields).state_query(state, *args)

    def __repr__(self) -> str:
        return f"GroupedStream({self._stream!r}, by={self.group_fields})"


class TridentState:
    """What partition_persist, persistent_aggregate and new_static_state return: query
    it with ``state_query``; ``new_values_stream()`` is what its updater emitted."""

    def __init__(self, topology: Any, node: Node) -> None:
        self._topology = topology
        self._node = node

    def new_values_stream(self) -> Stream:
        return Stream(self._topology, self._node)

    def parallelism_hint(self, hint: int) -> TridentState:
        Stream(self._topology, self._node).parallelism_hint(hint)
        return self

    def name(self, name: str) -> TridentState:
        Stream(self._topology, self._node).name(name)
        return self

    def __repr__(self) -> str:
        return f"TridentState({self._node.state_id})"


__all__ = ["AGGREGATOR", "GroupedStream", "Stream", "TridentState", "as_fields"]
