"""The state updaters ``persistent_aggregate`` puts behind its aggregation (Storm's
MapCombinerAggStateUpdater, MapReducerAggStateUpdater, CombinerAggStateUpdater,
ReducerAggStateUpdater): they turn a batch's tuples into one ``multi_update`` (grouped)
or one ``update`` (global) and emit each key's new value on the state's new-values
stream, ``[*group values, new value]`` (grouped) or ``[new value]`` (global).

Tuples are read by field name (``tup.get(name)``). A combiner sees its input field's
value; a reducer sees each tuple projected to its input fields (``values``, ``get``,
indexing), as Storm's ``inputFactory.create(t)``. A key that occurs in several tuples of
a batch is updated once per occurrence, in order, and every map state here composes
those updates (Storm pre-aggregates per key first; both give the same stored value).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tupletree.trident.group_keys import group_key
from tupletree.trident.state.base import MapState, Snapshottable, State
from tupletree.trident.state.operations import (
    BaseStateUpdater,
    CombinerValueUpdater,
    ReducerValueUpdater,
)


class Projected:
    """A tuple seen through some of its fields (what a reducer is given)."""

    __slots__ = ("fields", "values")

    def __init__(self, tup: Any, fields: Sequence[str]) -> None:
        self.fields = list(fields)
        self.values = [tup.get(f) for f in self.fields]

    def get(self, name: str) -> Any:
        try:
            return self.values[self.fields.index(name)]
        except ValueError:
            raise KeyError(f"no field {name!r}; fields are {self.fields}") from None

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)


def _one_input(kind: str, input_fields: Sequence[str]) -> str:
    names = list(input_fields)
    if len(names) != 1:
        raise ValueError(f"{kind} takes a single input field, got {names}")
    return names[0]


def _need(state: State, kind: type, who: str) -> None:
    if not isinstance(state, kind):
        raise TypeError(f"{who} needs a {kind.__name__} state, got {type(state).__name__}")


class MapCombinerAggStateUpdater(BaseStateUpdater):
    def __init__(self, agg: Any, group_fields: Sequence[str], input_fields: Sequence[str]):
        self.agg = agg
        self.group_fields = list(group_fields)
        self.input_field = _one_input("a combiner aggregation", input_fields)

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        _need(state, MapState, "persistent_aggregate (grouped)")
        assert isinstance(state, MapState)
        keys = [tuple(t.get(f) for f in self.group_fields) for t in tuples]
        updaters = [CombinerValueUpdater(self.agg, t.get(self.input_field)) for t in tuples]
        for key, value in zip(keys, state.multi_update(keys, updaters), strict=True):
            collector.emit([*key, value])


class MapReducerAggStateUpdater(BaseStateUpdater):
    def __init__(self, agg: Any, group_fields: Sequence[str], input_fields: Sequence[str]):
        self.agg = agg
        self.group_fields = list(group_fields)
        self.input_fields = list(input_fields)

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        _need(state, MapState, "persistent_aggregate (grouped)")
        assert isinstance(state, MapState)
        grouped: dict[tuple[Any, ...], list[Projected]] = {}
        for t in tuples:
            key = tuple(t.get(f) for f in self.group_fields)
            try:
                got = grouped.setdefault(key, [])
            except TypeError:  # a list in the key
                key = group_key(key, self.group_fields, "persistent_aggregate")
                got = grouped.setdefault(key, [])
            got.append(Projected(t, self.input_fields))
        keys = list(grouped)
        updaters = [ReducerValueUpdater(self.agg, grouped[k]) for k in keys]
        for key, value in zip(keys, state.multi_update(keys, updaters), strict=True):
            collector.emit([*key, value])


class CombinerAggStateUpdater(BaseStateUpdater):
    """Global: the batch's one partial aggregate (after a global partition aggregate)
    combined into the state's single value."""

    def __init__(self, agg: Any, input_fields: Sequence[str] | None = None):
        self.agg = agg
        self.input_field = None if input_fields is None else _one_input("a combiner", input_fields)

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        _need(state, Snapshottable, "persistent_aggregate (global)")
        assert isinstance(state, Snapshottable)
        if len(tuples) != 1:
            raise ValueError(
                f"a global combiner state update takes the batch's one partial aggregate, "
                f"got {len(tuples)} tuples"
            )
        (t,) = tuples
        arg = t.values[0] if self.input_field is None else t.get(self.input_field)
        collector.emit([state.update(CombinerValueUpdater(self.agg, arg))])


class ReducerAggStateUpdater(BaseStateUpdater):
    """Global: every tuple of the batch reduced into the state's single value."""

    def __init__(self, agg: Any, input_fields: Sequence[str] | None = None):
        self.agg = agg
        self.input_fields = None if input_fields is None else list(input_fields)

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        _need(state, Snapshottable, "persistent_aggregate (global)")
        assert isinstance(state, Snapshottable)
        fields = self.input_fields
        args = tuples if fields is None else [Projected(t, fields) for t in tuples]
        collector.emit([state.update(ReducerValueUpdater(self.agg, args))])
