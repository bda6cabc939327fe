"""The tuples of a persistent window, kept in the state store with at most a given number
in memory (Storm's WindowState with maxEventsInMemory), and the window a persistent
windowed bolt's ``execute`` gets.

``WindowTuples`` stores each input as a copy (values, fields, source: what a
DetachedTuple carries) under a reference, the number it was added as (0, 1, 2, ...).
A tuple's values are pickled once when it is added, as a check: a value that does not
pickle is refused there (UnpicklableTupleError, naming the component, the field and the
value's type; the bolt fails that input alone), not at the next checkpoint's write,
where it failed every checkpoint and the rollback brought it back each time (a poison
tuple that stopped the topology). The bytes are not kept: a sliding window reads each
tuple several times, and unpickling at each read cost ~1 us a read against ~0.9 us for
the check at add (a micro-measurement, stop 42). A value changed after it was added
into one that does not pickle still fails the write.
References are grouped in partitions of ``partition_size``; a partition is one store
value (namespace ``<component>-<task index>-window-tuples``, key the partition number),
pickled. At most ``max_partitions`` partitions are in memory (``partition_size *
max_partitions <= in_memory``); reading a reference whose partition is not loads it,
dropping the partition used longest ago (written first if it holds new tuples).

What makes this safe with checkpoints: a partition is always written whole, from a
copy that holds every tuple it had in the store, so a write never loses a committed
tuple; references only grow, and after a rollback the ones past the committed state are
used again (their tuples written again over the stale ones). The window's index (which
references are in the window, in which order, and the window manager's policies) is the
checkpointed part, in the bolt's window state (persistent.py); partitions are deleted
only below the oldest reference of a *committed* index.

Costs: ``add`` O(1) amortized (a pickle of the values as the check, and a partition
write per ``partition_size`` tuples once the memory is full); reading a window of ``w``
tuples loads up to ``w / partition_size`` partitions (a store read each). Memory: the
cached partitions, at most ``in_memory`` tuples. The index itself (three numbers per
held event) stays in memory, bounded by ``tupletree.window.max.events``.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from tupletree.store import Delete, Put, Store, StoreError
from tupletree.topology.fields import Fields
from tupletree.windowing.window import DetachedTuple

# A tuple in a partition: (values, field names, component, stream, task).
_Entry = tuple[list[Any], tuple[str, ...], str, str, int]
_PROTOCOL = pickle.HIGHEST_PROTOCOL


class UnpicklableTupleError(TypeError):
    """A tuple cannot join a persistent window: one of its values does not pickle.
    ``component``, ``field`` and ``value_type`` name it."""

    def __init__(self, message: str, component: str, field: str, value_type: str) -> None:
        super().__init__(message)
        self.component = component
        self.field = field
        self.value_type = value_type

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.component, self.field, self.value_type))


def partition_size(in_memory: int) -> int:
    """Tuples per partition: a quarter of the memory allowance, 1 to 1000."""
    return max(1, min(1000, in_memory // 4))


class WindowTuples:
    """See the module docstring."""

    def __init__(
        self, store: Store, namespace: str, in_memory: int, component: str | None = None
    ) -> None:
        if isinstance(in_memory, bool) or not isinstance(in_memory, int) or in_memory < 1:
            raise ValueError(f"events in memory must be a positive integer, got {in_memory!r}")
        self.store = store
        self.namespace = namespace
        self.component = namespace if component is None else component
        self.partition_size = partition_size(in_memory)
        self.max_partitions = max(1, in_memory // self.partition_size)
        self.next_ref = 0
        self.low = 0  # the lowest partition that may still be in the store
        self._cache: OrderedDict[int, list[_Entry | None]] = OrderedDict()
        self._dirty: set[int] = set()
        self._fields: dict[tuple[str, ...], Fields] = {}
        self.high_water = 0  # the most partitions held in memory at once

    # -- adding and reading ---------------------------------------------------------------

    def add(self, tup: Any) -> int:
        """Keep a copy of ``tup``; its reference. An UnpicklableTupleError if a value
        does not pickle, a StoreError if making room for it failed (either way nothing
        kept, no reference taken)."""
        values = list(tup.values)
        try:
            pickle.dumps(values, protocol=_PROTOCOL)
        except Exception as exc:
            raise self._unpicklable(tup, exc) from exc
        ref = self.next_ref
        k, i = divmod(ref, self.partition_size)
        part = self._partition(k, fresh=i == 0)
        self.next_ref = ref + 1
        part[i] = (
            values,
            tuple(tup.fields),
            tup.source_component,
            tup.source_stream,
            tup.source_task,
        )
        self._dirty.add(k)
        return ref

    def get(self, ref: int) -> DetachedTuple:
        k, i = divmod(ref, self.partition_size)
        entry = self._partition(k)[i]
        if entry is None:
            raise KeyError(f"window tuple {ref} is not in {self.namespace!r}")
        values, names, component, stream, task = entry
        fields = self._fields.get(names)
        if fields is None:
            fields = self._fields[names] = Fields(list(names))
        return DetachedTuple(values, fields, component, stream, task)

    def iter(self, refs: list[int]) -> Iterator[DetachedTuple]:
        """The tuples of ``refs``, loaded as they are reached."""
        for ref in refs:
            yield self.get(ref)

    def in_memory(self) -> int:
        """Tuples held in memory now (at most partitions x partition size)."""
        return sum(1 for part in self._cache.values() for e in part if e is not None)

    # -- checkpoints ----------------------------------------------------------------------

    def flush(self) -> None:
        """Write every partition that holds tuples the store lacks (one apply)."""
        if self._dirty:
            self._write({k: self._cache[k] for k in sorted(self._dirty)})
            self._dirty.clear()

    def forget_below(self, ref: int) -> None:
        """Delete the partitions holding only references below ``ref`` (the oldest one a
        committed index still holds)."""
        top = ref // self.partition_size
        if top > self.low:
            self.store.apply([Delete(self.namespace, str(k)) for k in range(self.low, top)])
            for k in range(self.low, top):
                self._cache.pop(k, None)
                self._dirty.discard(k)
            self.low = top

    def reset(self, next_ref: int, low: int) -> None:
        """Back to a committed state: references from ``next_ref`` on are free again."""
        self._cache.clear()
        self._dirty.clear()
        self.next_ref = next_ref
        self.low = low

    # -- inside ---------------------------------------------------------------------------

    def _unpicklable(self, tup: Any, exc: Exception) -> UnpicklableTupleError:
        """The error for a tuple whose values do not pickle, naming the first value
        that does not (only on this path: each value pickled alone)."""
        values = list(tup.values)
        names = list(tup.fields)
        index = 0
        for index, value in enumerate(values):  # noqa: B007
            try:
                pickle.dumps(value, protocol=_PROTOCOL)
            except Exception as one:
                exc = one
                break
        value = values[index] if values else None
        field = str(names[index]) if index < len(names) else f"#{index}"
        kind = type(value).__name__
        return UnpicklableTupleError(
            f"windowed bolt {self.component!r}: a tuple from {tup.source_component!r} "
            f"stream {tup.source_stream!r} cannot join the persistent window: field "
            f"{field!r} holds a {type(value).__module__}.{kind} value, which does not "
            f"pickle ({exc}); the tuple is failed (a persistent window keeps its tuples "
            "in the state store, pickled)",
            self.component,
            field,
            kind,
        )

    def _partition(self, k: int, fresh: bool = False) -> list[_Entry | None]:
        cache = self._cache
        part = cache.get(k)
        if part is not None:
            cache.move_to_end(k)
            return part
        if fresh:
            part = [None] * self.partition_size
        else:
            (data,) = self.store.get(self.namespace, [str(k)])
            part = [None] * self.partition_size if data is None else pickle.loads(data)
        while len(cache) >= self.max_partitions:
            # Written before it leaves memory: if the write fails, the partition stays
            # (cached, unsaved) and the next flush writes it; nothing accepted is lost.
            old = next(iter(cache))
            if old in self._dirty:
                self._write({old: cache[old]})
                self._dirty.discard(old)
            del cache[old]
        cache[k] = part
        self.high_water = max(self.high_water, len(cache))
        return part

    def _write(self, parts: dict[int, list[_Entry | None]]) -> None:
        try:
            writes = [
                Put(self.namespace, str(k), pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
                for k, part in parts.items()
            ]
        except Exception as exc:
            raise ValueError(
                f"window tuples in {self.namespace!r} cannot be saved: a value does not "
                f"pickle ({exc})"
            ) from exc
        try:
            self.store.apply(writes)
        except StoreError as exc:
            raise StoreError(
                f"window tuples in {self.namespace!r}, partition(s) {sorted(parts)}, "
                f"cannot be saved: {exc}",
                store=exc.store,
            ) from exc


class UnsupportedOperationError(NotImplementedError):
    """What a persistent window does not offer (Storm's UnsupportedOperationException)."""


class PersistentTupleWindow:
    """What a persistent windowed bolt's ``execute`` gets: ``iter()`` (the window's
    tuples as DetachedTuples, loaded from the store as reached: the bounded way),
    ``get()`` (all of them in a list: the whole window in memory), ``len``, the
    timestamps and the key. ``get_new()`` and ``get_expired()`` are not kept for a
    persistent window (as in Storm) and raise UnsupportedOperationError."""

    __slots__ = ("_end", "_key", "_refs", "_start", "_tuples")

    def __init__(
        self,
        refs: list[int],
        tuples: WindowTuples,
        start_ts: int | None,
        end_ts: int | None,
        key: Any = None,
    ) -> None:
        self._refs = refs
        self._tuples = tuples
        self._start = start_ts
        self._end = end_ts
        self._key = key

    def iter(self) -> Iterator[DetachedTuple]:
        return self._tuples.iter(self._refs)

    def get(self) -> list[DetachedTuple]:
        return list(self.iter())

    def get_new(self) -> list[Any]:
        raise UnsupportedOperationError(
            "a persistent window does not keep its new tuples apart: use iter()"
        )

    def get_expired(self) -> list[Any]:
        raise UnsupportedOperationError(
            "a persistent window does not keep its expired tuples: use iter()"
        )

    def get_start_timestamp(self) -> int | None:
        return self._start

    def get_end_timestamp(self) -> int | None:
        return self._end

    def get_key(self) -> Any:
        return self._key

    def __len__(self) -> int:
        return len(self._refs)

    def __repr__(self) -> str:
        return (
            f"PersistentTupleWindow({len(self._refs)} tuples, start={self._start}, end={self._end})"
        )
