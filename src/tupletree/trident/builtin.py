"""Trident's built-in operations (Storm's trident/operation/builtin): ``Count``, ``Sum``,
``MapGet``, ``SnapshotGet``, ``FilterNull``, ``FirstN``, ``Debug``."""

from __future__ import annotations

import datetime
import heapq
import logging
import sys
from decimal import Decimal
from typing import Any

from tupletree.trident.operation import (
    Aggregator,
    Assembly,
    CombinerAggregator,
    Filter,
)
from tupletree.trident.state.operations import BaseQueryFunction, tuple_keys

log = logging.getLogger("tupletree.trident")


class Count(CombinerAggregator):
    """How many tuples (``init`` 1, ``combine`` +, ``zero`` 0)."""

    def init(self, tup: Any) -> int:
        return 1

    def combine(self, val1: int, val2: int) -> int:
        return val1 + val2

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    """The sum of the input field (its first). Storm's widening: a Decimal makes the sum
    a Decimal, a float a float, else an int."""

    def init(self, tup: Any) -> Any:
        return tup[0]

    def combine(self, val1: Any, val2: Any) -> Any:
        if isinstance(val1, Decimal) or isinstance(val2, Decimal):
            return Decimal(str(val1)) + Decimal(str(val2))
        return val1 + val2

    def zero(self) -> Any:
        return 0


class MapGet(BaseQueryFunction):
    """Looks each input tuple up in a map state (its values are the key) and emits the
    value, None where absent."""

    def batch_retrieve(self, state: Any, args: list[Any]) -> list[Any]:
        return state.multi_get(tuple_keys(args))

    def execute(self, tup: Any, result: Any, collector: Any) -> None:
        collector.emit([result])


class SnapshotGet(BaseQueryFunction):
    """The one value of a global aggregation's state, for every input tuple."""

    def batch_retrieve(self, state: Any, args: list[Any]) -> list[Any]:
        value = state.get()
        return [value] * len(args)

    def execute(self, tup: Any, result: Any, collector: Any) -> None:
        collector.emit([result])


class FilterNull(Filter):
    """Keeps tuples none of whose (input) values is None."""

    def is_keep(self, tup: Any) -> bool:
        return all(v is not None for v in tup)


class Debug(Filter):
    """Prints every tuple (Storm's Debug), or logs it at DEBUG with ``use_logger``."""

    def __init__(self, name: str | None = None, use_logger: bool = False) -> None:
        self.prefix = "DEBUG: " if name is None else f"DEBUG({name}): "
        self.use_logger = use_logger

    def is_keep(self, tup: Any) -> bool:
        if self.use_logger:
            log.debug("%s%r", self.prefix, tup)
        else:
            print(f"<{datetime.datetime.now()}> {self.prefix}{tup!r}", file=sys.stdout)
        return True


class _FirstNAgg(Aggregator):
    def __init__(self, n: int) -> None:
        self.n = n

    def init(self, batch_id: Any, collector: Any) -> list[int]:
        return [0]

    def aggregate(self, state: list[int], tup: Any, collector: Any) -> None:
        if state[0] < self.n:
            collector.emit(list(tup))
            state[0] += 1

    def complete(self, state: list[int], collector: Any) -> None:
        pass


class _FirstNSortedAgg(Aggregator):
    def __init__(self, n: int, sort_field: str, reverse: bool) -> None:
        self.n, self.sort_field, self.reverse = n, sort_field, reverse

    def init(self, batch_id: Any, collector: Any) -> list[Any]:
        return []

    def aggregate(self, state: list[Any], tup: Any, collector: Any) -> None:
        state.append(list(tup))
        self._fields = tup.fields

    def complete(self, state: list[Any], collector: Any) -> None:
        if not state:
            return
        i = self._fields.index(self.sort_field)
        pick = heapq.nlargest if self.reverse else heapq.nsmallest
        for values in pick(self.n, state, key=lambda v: v[i]):
            collector.emit(values)


class FirstN(Assembly):
    """The first ``n`` tuples of each batch, or the ``n`` smallest by ``sort_field``
    (largest with ``reverse``): per partition first, then once more globally.
    ``stream.apply_assembly(FirstN(10, "count", reverse=True))``."""

    def __init__(self, n: int, sort_field: str | None = None, reverse: bool = False) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"FirstN needs a count >= 0, got {n!r}")
        self.n, self.sort_field, self.reverse = n, sort_field, reverse

    def _agg(self) -> Aggregator:
        if self.sort_field is None:
            return _FirstNAgg(self.n)
        return _FirstNSortedAgg(self.n, self.sort_field, self.reverse)

    def apply(self, stream: Any) -> Any:
        fields = stream.get_output_fields()
        return (
            stream.partition_aggregate(fields, self._agg(), fields)
            .global_()
            .partition_aggregate(fields, self._agg(), fields)
        )
