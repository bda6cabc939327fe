"""What the user writes against a state: ``BaseStateUpdater`` (``partition_persist``)
and ``BaseQueryFunction`` (``state_query``), Storm's StateUpdater and QueryFunction,
and the value updaters ``persistent_aggregate`` hands a map state.

Contract (as Storm's operations): ``prepare(conf, context)`` once per task before any
batch, ``cleanup()`` at shutdown. ``update_state(state, tuples, collector)`` runs in the
batch's commit phase, between ``state.begin_commit(txid)`` and ``state.commit(txid)``,
with every tuple of the batch for this partition; what it emits goes to the state's
``new_values_stream()``. ``batch_retrieve(state, args)`` gets the query's input tuples
of one batch and returns one result per tuple, in order; ``execute(tuple, result,
collector)`` then runs once per tuple. An exception from any of them fails the batch
(replayed with the same txid).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tupletree.trident.group_keys import freeze_lists
from tupletree.trident.state.base import Key, State


class BaseStateUpdater:
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """Called once per task before the first batch."""

    def cleanup(self) -> None:
        """Called once when the task shuts down."""

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define update_state")


class BaseQueryFunction:
    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        """Called once per task before the first batch."""

    def cleanup(self) -> None:
        """Called once when the task shuts down."""

    def batch_retrieve(self, state: State, args: list[Any]) -> list[Any]:
        """One result per tuple of ``args``, in order."""
        raise NotImplementedError(f"{type(self).__name__} must define batch_retrieve")

    def execute(self, tup: Any, result: Any, collector: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute")


def tuple_keys(tuples: Iterable[Any]) -> list[Key]:
    """Each tuple's values as a map key (Storm's MapGet passes its args as the keys),
    a list value as the tuple the grouping stored it under."""
    return [freeze_lists(tuple(t.values)) for t in tuples]


def check_results(query: object, args: Sequence[Any], results: Sequence[Any]) -> None:
    """ValueError naming the query function when it answered a different number of
    results than it was given tuples (the caller pairs them one to one)."""
    if len(results) != len(args):
        raise ValueError(
            f"{type(query).__name__}.batch_retrieve returned {len(results)} results for "
            f"{len(args)} tuples; it must return one result per tuple, in order"
        )


class CombinerValueUpdater:
    """``old -> agg.combine(old, arg)``, or ``arg`` for a key never written (Storm's
    CombinerValueUpdater: what persistent_aggregate with a CombinerAggregator gives the
    map for each key, ``arg`` being the batch's partial aggregate of that key)."""

    __slots__ = ("agg", "arg")

    def __init__(self, agg: Any, arg: Any) -> None:
        self.agg, self.arg = agg, arg

    def __call__(self, stored: Any) -> Any:
        return self.arg if stored is None else self.agg.combine(stored, self.arg)


class ReducerValueUpdater:
    """``old`` (or ``agg.init()`` for a key never written) reduced over ``tuples`` in
    order (Storm's ReducerValueUpdater)."""

    __slots__ = ("agg", "tuples")

    def __init__(self, agg: Any, tuples: Sequence[Any]) -> None:
        self.agg, self.tuples = agg, tuples

    def __call__(self, stored: Any) -> Any:
        value = self.agg.init() if stored is None else stored
        for t in self.tuples:
            value = self.agg.reduce(value, t)
        return value
