"""Fields: the ordered names of a stream's values."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any


class Fields:
    """An ordered, duplicate-free list of field names with O(1) name -> index lookup.

    ``Fields("word", "count")`` and ``Fields(["word", "count"])`` are the same.
    """

    __slots__ = ("_index", "_names")

    def __init__(self, *names: str | Iterable[str]) -> None:
        if len(names) == 1 and not isinstance(names[0], str):
            names = tuple(names[0])  # type: ignore[arg-type]
        flat: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"field names must be strings, got {name!r}")
            flat.append(name)
        index = {name: i for i, name in enumerate(flat)}
        if len(index) != len(flat):
            dupes = sorted({n for n in flat if flat.count(n) > 1})
            raise ValueError(f"duplicate field name(s) {dupes} in {flat}")
        self._names: tuple[str, ...] = tuple(flat)
        self._index = index

    def index(self, name: str) -> int:
        """Position of ``name``; KeyError naming the field and the known ones if absent."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no field {name!r}; fields are {list(self._names)}") from None

    def contains(self, name: str) -> bool:
        return name in self._index

    def select(self, selector: Fields | Sequence[str], values: Sequence[Any]) -> list[Any]:
        """The values of the ``selector`` fields, in the selector's order."""
        return [values[self._index[name]] for name in selector]

    def to_list(self) -> list[str]:
        return list(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, i: int) -> str:
        return self._names[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        if isinstance(other, list | tuple):
            return list(self._names) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields({list(self._names)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Fields, (list(self._names),))
