"""FeederSpout and AckFailTracker: feed a running topology by hand, see what it settled.

Both keep their state in SharedLists (``testing/shared.py``), so they work the same on
LocalCluster and on SparkCluster, whose spout copies run in other processes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tupletree.testing.shared import SharedList
from tupletree.topology.components import DEFAULT_STREAM, Spout

__all__ = ["AckFailTracker", "FeederSpout"]

# A copy in another process asks the test's process for a fed tuple over a socket; when
# the queue was empty it waits this long before asking again, so an idle worker does not
# spin on the test process. In the test's own process the queue is read directly.
REMOTE_POLL_SECS = 0.005


class AckFailTracker:
    """Records which message ids a spout saw acked and failed.

    ``acked`` and ``failed`` return copies (sets), so a test may read them while the
    topology runs on another thread or in other processes.
    """

    def __init__(self) -> None:
        self._acked = SharedList("acked")
        self._failed = SharedList("failed")

    def ack(self, msg_id: Any) -> None:
        self._acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self._failed.append(msg_id)

    @property
    def acked(self) -> set[Any]:
        return set(self._acked.items())

    @property
    def failed(self) -> set[Any]:
        return set(self._failed.items())

    def is_acked(self, msg_id: Any) -> bool:
        return msg_id in self.acked

    def is_failed(self, msg_id: Any) -> bool:
        return msg_id in self.failed


def checked_row(values: Any, where: str, fields: list[str] | None = None) -> list[Any]:
    """``values`` as a list, or ValueError naming ``where``: a string, bytes, dict or set
    is not a row (``list("a b")`` would be its characters), and a row must have one value
    per field when ``fields`` are known. Checked when the test gives the row, rather than
    as an emit error inside the worker, after which the test would wait for nothing."""
    if isinstance(values, str | bytes):
        raise ValueError(
            f"{where} is the string {values!r}; a row is a list of values, one per field "
            f"(did you mean [{values!r}]?)"
        )
    if isinstance(values, Mapping | set | frozenset) or not isinstance(values, Iterable):
        raise ValueError(
            f"{where} must be a list of values, one per field, got {type(values).__name__} "
            f"{values!r}"
        )
    row = list(values)
    if fields is not None and len(row) != len(fields):
        raise ValueError(f"{where} has {len(row)} values {row!r}, but the fields are {fields!r}")
    return row


# Wake-up callbacks of the FeederSpout copies running in this process, by queue key:
# feed() wakes their workers so a fed tuple does not wait for an idle sleep to end.
_wakeups: dict[str, list[Callable[[], None]]] = {}


class FeederSpout(Spout):
    """A spout a test feeds by hand: ``feed(values, msg_id=None)`` from any thread, and
    ``feed_batch(rows, msg_id=None)`` for rows emitted as one tree
    (``collector.emit_batch``).

    Each ``next_tuple`` emits one fed tuple or batch (in feed order, shared by all its
    tasks); acks and fails go to ``tracker``.
    """

    def __init__(
        self,
        fields: Iterable[str],
        tracker: AckFailTracker | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        self.fields = [fields] if isinstance(fields, str) else list(fields)
        self.tracker = tracker
        self.stream = stream
        self.queue = SharedList("feeder")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(self.stream, self.fields)

    def feed(self, values: list[Any], msg_id: Any = None) -> None:
        """Queue a tuple; ``msg_id=None`` emits it untracked."""
        self._queue((checked_row(values, "FeederSpout.feed: the tuple", self.fields), msg_id))

    def feed_batch(self, rows: list[list[Any]], msg_id: Any = None) -> None:
        """Queue rows to be emitted as one tree (one ack or fail for all of them);
        ``msg_id=None`` emits them untracked."""
        checked = [
            checked_row(values, f"FeederSpout.feed_batch: row {i}", self.fields)
            for i, values in enumerate(rows)
        ]
        self._queue((checked, msg_id, "batch"))

    def _queue(self, item: tuple[Any, ...]) -> None:
        self.queue.append(item)
        for wakeup in list(_wakeups.get(self.queue.key, ())):
            wakeup()

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._next_poll = 0.0
        self._wakeup = context.wakeup
        _wakeups.setdefault(self.queue.key, []).append(self._wakeup)

    def close(self) -> None:
        wakeup = getattr(self, "_wakeup", None)  # absent if open() never ran
        if wakeup is not None:
            _forget(self.queue.key, wakeup)

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now < self._next_poll:
            return
        found, item = self.queue.pop_first()
        if not found:
            if self.queue.is_remote:
                self._next_poll = now + REMOTE_POLL_SECS
            return
        if len(item) == 3:
            self.collector.emit_batch(item[0], msg_id=item[1], stream=self.stream)
        else:
            values, msg_id = item
            self.collector.emit(values, msg_id=msg_id, stream=self.stream)

    def ack(self, msg_id: Any) -> None:
        if self.tracker is not None:
            self.tracker.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        if self.tracker is not None:
            self.tracker.fail(msg_id)


def _forget(key: str, wakeup: Callable[[], None]) -> None:
    waiting = _wakeups.get(key)
    if waiting is not None and wakeup in waiting:
        waiting.remove(wakeup)
        if not waiting:
            del _wakeups[key]
