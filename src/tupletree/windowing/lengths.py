"""How long a window is and how far it slides: ``Count(n)`` tuples or a ``Duration``.

Storm's two value types (BaseWindowedBolt.Count and .Duration), with Storm's bounds: a
count is a non-negative int, a duration a whole number of milliseconds from 0 to
2**31 - 1 (about 24.8 days; Storm keeps it in a Java int). Both are immutable, compare
by value and pickle, so a bolt holding them is copied to its tasks like any other.
"""

from __future__ import annotations

from typing import Any

# Storm keeps milliseconds in a Java int: longer durations are refused, as there.
MAX_DURATION_MS = 2**31 - 1
# The largest count a window may have (it is held in memory; see the window cap).
MAX_COUNT = 2**31 - 1


def _whole(value: Any, what: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a whole number, got {type(value).__name__} {value!r}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{what} must be from 0 to {maximum}, got {value}")
    return value


class Count:
    """A number of tuples: ``Count(5)`` or ``Count.of(5)``."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        object.__setattr__(self, "value", _whole(value, "Count", MAX_COUNT))

    @classmethod
    def of(cls, value: int) -> Count:
        return cls(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Count is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Count, (self.value,))

    def __eq__(self, other: object) -> bool:
        return type(other) is Count and other.value == self.value

    def __hash__(self) -> int:
        return hash((Count, self.value))

    def __repr__(self) -> str:
        return f"Count({self.value})"


class Duration:
    """A span of time in milliseconds: ``Duration(20_000)``, ``Duration.of(ms)``,
    ``Duration.seconds(n)``, ``.minutes(n)``, ``.hours(n)``, ``.days(n)``."""

    __slots__ = ("value",)

    def __init__(self, value_ms: int) -> None:
        object.__setattr__(self, "value", _whole(value_ms, "Duration (ms)", MAX_DURATION_MS))

    @classmethod
    def of(cls, milliseconds: int) -> Duration:
        return cls(milliseconds)

    @classmethod
    def seconds(cls, n: int) -> Duration:
        return cls(_whole(n, "Duration.seconds", MAX_DURATION_MS // 1000) * 1000)

    @classmethod
    def minutes(cls, n: int) -> Duration:
        return cls(_whole(n, "Duration.minutes", MAX_DURATION_MS // 60_000) * 60_000)

    @classmethod
    def hours(cls, n: int) -> Duration:
        return cls(_whole(n, "Duration.hours", MAX_DURATION_MS // 3_600_000) * 3_600_000)

    @classmethod
    def days(cls, n: int) -> Duration:
        return cls(_whole(n, "Duration.days", MAX_DURATION_MS // 86_400_000) * 86_400_000)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Duration is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Duration, (self.value,))

    def __eq__(self, other: object) -> bool:
        return type(other) is Duration and other.value == self.value

    def __hash__(self) -> int:
        return hash((Duration, self.value))

    def __repr__(self) -> str:
        return f"Duration({self.value})"
