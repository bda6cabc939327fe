"""What a windowed bolt's ``execute`` gets: ``TupleWindow``; and what a late tuple is
sent as: ``DetachedTuple``.

``TupleWindow`` is Storm's TupleWindowImpl: ``get()`` (every tuple in the window, in
arrival order), ``get_new()`` (those not in the previous window), ``get_expired()``
(those that left since the previous window: already acked, for reading only),
``get_start_timestamp()`` (``end - length`` for a duration window, a session's oldest
timestamp, else None) and ``get_end_timestamp()`` (the window's reference time, ms:
its end for time windows, the triggering event's time for count windows). tupletree
adds ``get_key()`` (a session window's key; None otherwise), ``iter()`` (Storm's
``getIter``, here over ``get()``) and ``len(window)``.

``DetachedTuple`` is a late tuple's copy that can travel anywhere (Storm's
DetachedTuple): its values, fields and source, no tracking (it is not in a tuple tree,
so it cannot be acked or anchored to; the late stream's tuple that carries it is
anchored to the original). It pickles as plain data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tupletree.topology.fields import Fields


class TupleWindow:
    __slots__ = ("_end", "_expired", "_key", "_new", "_start", "_tuples")

    def __init__(
        self,
        tuples: list[Any],
        new: list[Any],
        expired: list[Any],
        start_ts: int | None,
        end_ts: int | None,
        key: Any = None,
    ) -> None:
        self._tuples = tuples
        self._new = new
        self._expired = expired
        self._start = start_ts
        self._end = end_ts
        self._key = key

    def get(self) -> list[Any]:
        return self._tuples

    def get_new(self) -> list[Any]:
        return self._new

    def get_expired(self) -> list[Any]:
        return self._expired

    def get_start_timestamp(self) -> int | None:
        return self._start

    def get_end_timestamp(self) -> int | None:
        return self._end

    def get_key(self) -> Any:
        return self._key

    def iter(self) -> Iterator[Any]:
        return iter(self._tuples)

    def __len__(self) -> int:
        return len(self._tuples)

    def __repr__(self) -> str:
        return (
            f"TupleWindow({len(self._tuples)} tuples, {len(self._new)} new, "
            f"{len(self._expired)} expired, start={self._start}, end={self._end})"
        )


class DetachedTuple:
    """A copy of a tuple's values, fields and source, outside any tuple tree."""

    __slots__ = ("fields", "source_component", "source_stream", "source_task", "values")

    def __init__(
        self,
        values: list[Any],
        fields: Fields,
        source_component: str,
        source_stream: str,
        source_task: int,
    ) -> None:
        self.values = values
        self.fields = fields
        self.source_component = source_component
        self.source_stream = source_stream
        self.source_task = source_task

    @classmethod
    def of(cls, tup: Any) -> DetachedTuple:
        return cls(
            list(tup.values), tup.fields, tup.source_component, tup.source_stream, tup.source_task
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            DetachedTuple,
            (
                self.values,
                self.fields,
                self.source_component,
                self.source_stream,
                self.source_task,
            ),
        )

    def get(self, field: str) -> Any:
        return self.values[self.fields.index(field)]

    def select(self, fields: Fields | list[str]) -> list[Any]:
        return self.fields.select(fields, self.values)

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DetachedTuple):
            return NotImplemented
        return (
            self.values == other.values
            and self.source_component == other.source_component
            and self.source_stream == other.source_stream
            and self.source_task == other.source_task
        )

    def __hash__(self) -> int:
        return hash((self.source_component, self.source_stream, self.source_task))

    def __repr__(self) -> str:
        return (
            f"DetachedTuple({self.values!r}, source={self.source_component}:"
            f"{self.source_task}, stream={self.source_stream!r})"
        )
