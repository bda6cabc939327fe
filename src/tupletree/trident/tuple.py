"""TridentTuple: a value list with named fields, what every Trident operation sees.

As Storm's TridentTuple (a ``List<Object>`` with field names), a TridentTuple is a
``list`` of the values: ``tup[0]``, ``len(tup)``, iteration, ``tup.values`` (the tuple
itself), and ``tup.get("word")``, ``tup.select(["a", "b"])``, ``tup.fields``.

Design note: one tuple is made per value emitted between two operations, so its cost
is the cost of Trident's inner loop. Each field layout (schema) gets its own subclass
of TridentTuple, made once per process and cached, whose class attributes map names to
positions; a tuple is then just a list built in C (``Schema(values)``), with no
per-tuple ``__init__`` or field table. Tuples do not cross workers (what crosses is
the plain value list), but they pickle, as a plain class and list, should a user keep
one in state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tupletree.topology.fields import Fields


class TridentTuple(list):  # type: ignore[type-arg]
    __slots__ = ()
    _fields: Fields = Fields([])
    _index: dict[str, int] = {}

    @property
    def values(self) -> list[Any]:
        return self

    @property
    def fields(self) -> Fields:
        return self._fields

    def get(self, field: str) -> Any:
        """The value of ``field``; KeyError naming it and the tuple's fields if absent."""
        try:
            return self[self._index[field]]
        except KeyError:
            raise KeyError(
                f"no field {field!r} in this Trident tuple; its fields are {self._fields.to_list()}"
            ) from None

    def select(self, fields: Iterable[str]) -> list[Any]:
        """The values of ``fields``, in that order."""
        return [self.get(f) for f in fields]

    def get_value_by_field(self, field: str) -> Any:  # Storm's name
        return self.get(field)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self, strict=False))
        return f"TridentTuple({pairs})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (make_tuple, (self._fields.to_list(), list(self)))


_schemas: dict[tuple[str, ...], type[TridentTuple]] = {}


def schema(fields: Fields | Sequence[str]) -> type[TridentTuple]:
    """The TridentTuple class for ``fields`` (one per layout, cached)."""
    names = tuple(fields)
    cls = _schemas.get(names)
    if cls is None:
        f = Fields(list(names))
        cls = type(
            "TridentTuple",
            (TridentTuple,),
            {"__slots__": (), "_fields": f, "_index": {n: i for i, n in enumerate(names)}},
        )
        _schemas[names] = cls
    return cls


def make_tuple(fields: Sequence[str], values: Iterable[Any]) -> TridentTuple:
    """A TridentTuple of ``fields`` holding ``values`` (tests, unpickling)."""
    return schema(fields)(values)
