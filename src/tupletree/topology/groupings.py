"""Stream groupings as declarative specs: how a stream's tuples are split among the
tasks of a subscribing bolt. The runtime turns each spec into a router
(``tupletree.runtime.routing``); here they are plain, picklable descriptions.
"""

from __future__ import annotations

from typing import Any

SHUFFLE = "shuffle"
FIELDS = "fields"
ALL = "all"
GLOBAL = "global"
NONE = "none"
DIRECT = "direct"
LOCAL_OR_SHUFFLE = "local_or_shuffle"
PARTIAL_KEY = "partial_key"
CUSTOM = "custom"

KINDS = (SHUFFLE, FIELDS, ALL, GLOBAL, NONE, DIRECT, LOCAL_OR_SHUFFLE, PARTIAL_KEY, CUSTOM)


class Grouping:
    """One grouping: its kind, plus the fields (fields, partial_key) or user object (custom)."""

    __slots__ = ("custom", "fields", "kind")

    def __init__(self, kind: str, fields: list[str] | None = None, custom: Any = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown grouping {kind!r}; known: {', '.join(KINDS)}")
        self.kind = kind
        self.fields = fields
        self.custom = custom

    def __repr__(self) -> str:
        extra = f", {self.fields!r}" if self.fields is not None else ""
        return f"Grouping({self.kind!r}{extra})"

    def __getstate__(self) -> tuple[str, list[str] | None, Any]:
        return (self.kind, self.fields, self.custom)

    def __setstate__(self, state: tuple[str, list[str] | None, Any]) -> None:
        self.kind, self.fields, self.custom = state


class CustomStreamGrouping:
    """Base class for ``custom_grouping``: choose target tasks yourself.

    ``prepare`` is called once per emitting task with the sorted target task ids;
    ``choose_tasks`` is called per emit and returns a list of those ids.
    """

    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.target_tasks = target_tasks

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        raise NotImplementedError("a CustomStreamGrouping must implement choose_tasks")
