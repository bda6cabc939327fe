"""ErrorBook: the error records a topology keeps, in bounded lists kept apart by kind.

A bolt that raises on every tuple reports thousands of errors a second; a worker that
restarts reports one line a minute. Kept in one list, the flood would push the restarts
out. So each kind has a list of its own: task errors (``TaskError``, the newest
``task_limit``), and per ``WorkerEvent`` kind (``ERROR``, ``RESTART``) the newest
``event_limit``. Memory is bounded by ``task_limit + len(EVENT_KINDS) * event_limit``
records, each of at most ``MAX_ERROR_CHARS`` characters of text (runtime/error_log.py).

Every record gets a sequence number as it is added, so the lists merge back into the
order they were reported in (``records``, ``texts``), and ``since(mark)`` gives what was
added after a mark that ``added`` returned earlier (a worker's report to its driver),
as far as the lists still hold it.

No clock, no I/O, no lock: one thread adds (a worker's, or the driver's under its own
lock); another may read, since each read first copies every list (``list(deque)`` is
atomic under the GIL).
"""

from __future__ import annotations

import heapq
from collections import deque

from tupletree.records.errors import EVENT_KINDS, ErrorRecord, TaskError, WorkerEvent
from tupletree.runtime.error_log import MAX_ERRORS_KEPT

MAX_EVENTS_KEPT = 1000


class ErrorBook:
    """``add(record)``; ``task_errors()``, ``events()``, ``records()``, ``texts()``,
    ``since(mark)``; ``added`` (ever added)."""

    def __init__(
        self, task_limit: int = MAX_ERRORS_KEPT, event_limit: int = MAX_EVENTS_KEPT
    ) -> None:
        if task_limit < 1 or event_limit < 1:
            raise ValueError(f"limits must be >= 1, got {task_limit} and {event_limit}")
        self._tasks: deque[tuple[int, TaskError]] = deque(maxlen=task_limit)
        self._events: dict[str, deque[tuple[int, WorkerEvent]]] = {
            kind: deque(maxlen=event_limit) for kind in EVENT_KINDS
        }
        self.added = 0

    def add(self, record: ErrorRecord) -> None:
        if isinstance(record, TaskError):
            self._tasks.append((self.added, record))
        elif isinstance(record, WorkerEvent):
            self._events[record.kind].append((self.added, record))
        else:
            raise TypeError(f"not an error record: {type(record).__name__}")
        self.added += 1

    def task_errors(self) -> list[TaskError]:
        """The task errors kept, oldest first."""
        return [record for _, record in list(self._tasks)]

    def events(self) -> list[WorkerEvent]:
        """The worker events kept (every kind), oldest first."""
        return [r for _, r in self._merged(include_tasks=False) if isinstance(r, WorkerEvent)]

    def records(self) -> list[ErrorRecord]:
        """Everything kept, in the order it was added."""
        return [record for _, record in self._merged()]

    def texts(self) -> list[str]:
        """``render()`` of everything kept, in the order it was added
        (``cluster.errors(name)``)."""
        return [record.render() for record in self.records()]

    def since(self, mark: int) -> list[ErrorRecord]:
        """What was added after ``added`` was ``mark``, in order (less what the lists
        no longer hold)."""
        if mark >= self.added:
            return []
        return [record for seq, record in self._merged() if seq >= mark]

    def _merged(self, include_tasks: bool = True) -> list[tuple[int, ErrorRecord]]:
        lists: list[list[tuple[int, ErrorRecord]]] = [list(d) for d in self._events.values()]
        if include_tasks:
            lists.append(list(self._tasks))
        return list(heapq.merge(*lists, key=lambda entry: entry[0]))
