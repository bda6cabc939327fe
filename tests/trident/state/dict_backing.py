"""A backing map in a dict that counts its calls and can be told to fail, for the map
tests (the I/O promise is a count of backing calls)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class WriteFailed(RuntimeError):
    pass


class DictBacking:
    def __init__(self, data: dict | None = None) -> None:
        self.data: dict[tuple, Any] = dict(data or {})
        self.gets = 0
        self.puts = 0
        self.fail_puts = 0  # how many of the next multi_puts raise (writing nothing)

    def multi_get(self, keys: Sequence[tuple]) -> list[Any]:
        self.gets += 1
        return [self.data.get(k) for k in keys]

    def multi_put(self, keys: Sequence[tuple], vals: Sequence[Any]) -> None:
        if self.fail_puts:
            self.fail_puts -= 1
            raise WriteFailed("the database is down")
        self.puts += 1
        self.data.update(zip(keys, vals, strict=True))

    def calls(self) -> tuple[int, int]:
        gets, puts = self.gets, self.puts
        self.gets = self.puts = 0
        return gets, puts

    def user_data(self) -> dict[tuple, Any]:
        """The stored values but the opaque batch records."""
        return {k: v for k, v in self.data.items() if not str(k[0]).startswith("$tupletree")}
