"""The interfaces of Trident's state side, as Storm's (trident/state/*.java).

Lifecycle, as the committer bolt drives it (Storm's PartitionPersistProcessor): for each
batch, strictly in txid order per partition, ``state.begin_commit(txid)``, then the
updater's ``update_state(state, tuples, collector)``, then ``state.commit(txid)``; a
failure anywhere in that (an exception) fails the batch, which is replayed later **with
the same txid**. ``txid`` is None for a stream that comes from DRPC (no batches to
order). A state is used by one task's thread only. Storm skips a batch that brought
this partition no tuples; a state whose ``commit_empty_batches`` is True must be framed
(``begin_commit``/``commit``, without the updater) for those too: an opaque map reverts
there what an earlier attempt of the txid wrote (opaque_map.py).

What a state promises is its ``StateType``, which the planner checks against the
spout's kind (Storm's matrix, docs/trident-state.md): exactly once is
transactional spout x {transactional, opaque} state, or opaque spout x opaque state;
nothing else. A factory or state that does not say is taken at its weakest,
NON_TRANSACTIONAL. ``requires_deterministic_batches`` marks a state that is exactly-once
only if a replayed txid carries the same tuples to the same partition (an append-only
sink): the planner then needs a transactional spout and no shuffle before it.

Keys of a map state are tuples of the grouping's values (a list is taken as the tuple of
its items). Values updaters are plain callables ``old -> new`` (Storm's ValueUpdater;
``old`` is None for a key never written); they must return a new value rather than
change ``old`` in place, because an opaque value keeps the previous one beside it.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

Key = tuple[Any, ...]
ValueUpdater = Callable[[Any], Any]


class StateType(enum.Enum):
    """What a state does with a replayed txid (Storm's StateType)."""

    #: Applies every update it is given: a replay counts twice.
    NON_TRANSACTIONAL = "non-transactional"
    #: Skips a txid it has already applied: exactly once if a replayed txid brings the
    #: same batch (a transactional spout).
    TRANSACTIONAL = "transactional"
    #: Recomputes a replayed txid from the value before it: exactly once even if the
    #: batch of a txid changes (an opaque or transactional spout).
    OPAQUE = "opaque"


class State(ABC):
    """One partition's state. ``begin_commit(txid)`` and ``commit(txid)`` frame each
    batch's updates; ``txid`` is None for DRPC streams."""

    state_type: StateType = StateType.NON_TRANSACTIONAL
    #: True: call begin_commit/commit for a batch with no tuples for this partition too.
    commit_empty_batches: bool = False

    @abstractmethod
    def begin_commit(self, txid: int | None) -> None: ...

    @abstractmethod
    def commit(self, txid: int | None) -> None: ...


class StateFactory(ABC):
    """Makes each partition's state, inside the worker that runs it (a factory is
    pickled to the workers: keep connections out of it until ``make_state``)."""

    #: The type of the states this factory makes.
    state_type: StateType = StateType.NON_TRANSACTIONAL
    #: True for a state that is exactly once only when a replayed txid brings the same
    #: tuples to the same partition (an append-only sink): the planner refuses it
    #: behind an opaque or non-transactional spout, or behind a shuffle.
    requires_deterministic_batches: bool = False
    #: False for a state that only one host can see (memory, SQLite): a cluster whose
    #: workers may run on several hosts refuses it, saying why.
    shared_across_hosts: bool = True

    @abstractmethod
    def make_state(
        self, conf: dict[str, Any], metrics: Any, partition_index: int, num_partitions: int
    ) -> State: ...

    def location(self) -> tuple[Any, ...] | None:
        """Where this factory's states keep their values, as a comparable value (None:
        unknown). Two states of one topology that write to the same place would take
        each other's txids and batch records for their own: the planner refuses it."""
        return None


class MapState(State):
    """A state of keyed values (Storm's MapState; ReadOnlyMapState is ``multi_get``)."""

    @abstractmethod
    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        """The value of each key, in order (None where absent)."""

    @abstractmethod
    def multi_update(
        self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]
    ) -> list[Any]:
        """Apply ``updaters[i]`` to the value of ``keys[i]``; the new values, in order."""

    @abstractmethod
    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any]) -> None:
        """Set each key's value."""


class Snapshottable(State):
    """One value, for global (ungrouped) aggregations (Storm's Snapshottable)."""

    @abstractmethod
    def get(self) -> Any: ...

    @abstractmethod
    def update(self, updater: ValueUpdater) -> Any: ...

    @abstractmethod
    def set(self, value: Any) -> None: ...


@runtime_checkable
class IBackingMap(Protocol):
    """Where a map state keeps its values (Storm's IBackingMap): the only I/O. The maps
    above it call ``multi_get`` at most once and ``multi_put`` at most once per
    ``multi_update``, so a backend does one round trip of each per batch."""

    def multi_get(self, keys: Sequence[Key]) -> list[Any]: ...

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None: ...


def as_keys(keys: Sequence[Sequence[Any]]) -> list[Key]:
    """Each key as a tuple (a key given as a list is the tuple of its items); a str key
    is refused, since its characters would be taken as the key's values."""
    out = []
    for k in keys:
        if isinstance(k, tuple):
            out.append(k)
        elif isinstance(k, str | bytes) or not isinstance(k, Sequence):
            raise TypeError(
                f"a map state key is a tuple of the grouping's values, got {k!r}; "
                f"wrap a single value as ({k!r},)"
            )
        else:
            out.append(tuple(k))
    return out


def check_lengths(what: str, keys: Sequence[Any], others: Sequence[Any]) -> None:
    if len(keys) != len(others):
        raise ValueError(f"{what}: {len(keys)} keys but {len(others)} values or updaters")
