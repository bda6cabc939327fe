"""Components for the windowing tests: a windowed bolt that journals every window, a
sink for late tuples, and a tracker that journals acks and fails in the same order.

Journals (tests/registry.py) reach SparkCluster's worker processes, so the same
components serve every cluster; a Spark test registers this module for pickling by
value (executors cannot import tests/)."""

from __future__ import annotations

from typing import Any

from tupletree import Bolt
from tupletree.testing import FeederSpout
from tupletree.windowing import WindowedBolt

from ..registry import entries, new_journal, record


class Collect(WindowedBolt):
    """Journals each window as a dict (ids of get/get_new/get_expired, start, end, key)
    and emits the ids, anchored to the window. Raises, the first time only, for a window
    holding any id in ``poison``."""

    outputs = ["ids"]

    def __init__(self, journal: Any, poison: tuple[Any, ...] = ()) -> None:
        self.journal = journal
        self.poison = set(poison)

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.raised = False

    def execute(self, window: Any) -> None:
        ids = [t[0] for t in window.get()]
        record(
            self.journal,
            {
                "ids": ids,
                "new": [t[0] for t in window.get_new()],
                "expired": [t[0] for t in window.get_expired()],
                "start": window.get_start_timestamp(),
                "end": window.get_end_timestamp(),
                "key": window.get_key(),
            },
        )
        if not self.raised and self.poison & set(ids):
            self.raised = True
            raise ValueError(f"poisoned window {ids}")
        self.collector.emit([ids])


class LateSink(Bolt):
    """Journals each late tuple's values and acks it (or fails it: ``fail=True``)."""

    outputs: list[str] = []

    def __init__(self, journal: Any, fail: bool = False) -> None:
        self.journal = journal
        self.fail = fail

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        late = tup.get("late_tuple")
        record(self.journal, {"late": list(late.values), "type": type(late).__name__})
        if self.fail:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


class JournalTracker:
    """A FeederSpout tracker journaling ("ack", id) / ("fail", id) as they happen."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal

    def ack(self, msg_id: Any) -> None:
        record(self.journal, ("ack", msg_id))

    def fail(self, msg_id: Any) -> None:
        record(self.journal, ("fail", msg_id))


def windows(journal: Any) -> list[dict[str, Any]]:
    return [e for e in entries(journal) if isinstance(e, dict) and "ids" in e]


def settled(journal: Any, what: str) -> list[Any]:
    return [e[1] for e in entries(journal) if isinstance(e, tuple) and e[0] == what]


def feeder(journal: Any, fields: list[str]) -> FeederSpout:
    return FeederSpout(fields, tracker=JournalTracker(journal))  # type: ignore[arg-type]


__all__ = ["Collect", "JournalTracker", "LateSink", "feeder", "new_journal", "settled", "windows"]
