"""Errors as records: a task's exception and a worker's own events as frozen values,
from where they happen to ``cluster.errors()``, ``error_records()``, REST and the page.

- ``TaskError``: a task's user code raised (or called ``report_error``): its component,
  task, where (``execute``, ``next_tuple``, ``open``...), the exception's type name,
  its message and traceback (both cut: ``runtime/error_log.py``), when (``time``), and,
  on a distributed cluster, the worker and attempt that ran the task.
- ``WorkerEvent``: something that belongs to a worker rather than to a task. ``kind``
  is ``ERROR`` (a frame from a peer it could not read, a worker that died of an
  exception, the driver refusing its input, the Spark job ending unasked) or
  ``RESTART`` (the worker was started again, ``message`` says after what).

A record is built when the error is reported, never per tuple (errors are rare). It is
plain data: it pickles, so a Spark worker sends its records to the driver as they are
(``control.Metrics``), and the driver only stamps the worker and attempt that the
authenticated envelope names (``on_worker``). ``time`` is wall-clock seconds since the
epoch, on the machine that reported it: a moment for people and logs (Storm UI's
``errorTime``), comparable across processes, and never read to decide anything, so it
stays real on a simulated-time cluster.

``render()`` gives the one text ``cluster.errors(name)`` has always shown for it:
``count[task 3] execute: ValueError: bad\\n<traceback>``, prefixed ``worker 1: `` when a
worker ran it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

ERROR = "error"
RESTART = "restart"
EVENT_KINDS = (ERROR, RESTART)


@dataclass(frozen=True)
class TaskError:
    """One exception of a task's user code (or a ``report_error``)."""

    component: str
    task: int
    where: str
    exception: str  # the exception's type name
    message: str
    traceback: str
    time: float  # seconds since the epoch (wall clock) when it was reported
    worker: int | None = None  # the worker that ran the task; None: this process
    attempt: int | None = None  # that worker's attempt (restarts count up)

    @property
    def error(self) -> str:
        """``Type: message``, the first line's end (what Storm UI shows as ``error``)."""
        return f"{self.exception}: {self.message}"

    def render(self) -> str:
        """The text of ``cluster.errors(name)``."""
        who = "" if self.worker is None else f"worker {self.worker}: "
        return (
            f"{who}{self.component}[task {self.task}] {self.where}: {self.error}\n{self.traceback}"
        )

    def on_worker(self, worker: int, attempt: int) -> TaskError:
        """This record as reported by ``worker`` (its ``attempt``): the driver's stamp."""
        return dataclasses.replace(self, worker=worker, attempt=attempt)


@dataclass(frozen=True)
class WorkerEvent:
    """Something of a worker's, not of one of its tasks (``kind``: ERROR, RESTART)."""

    kind: str
    message: str
    time: float  # seconds since the epoch (wall clock)
    worker: int | None = None  # None: this process (LocalCluster), or the driver's own
    attempt: int | None = None  # the attempt it concerns (for RESTART: the one that ended)
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"WorkerEvent kind must be one of {EVENT_KINDS}, got {self.kind!r}")

    def render(self) -> str:
        """The text of ``cluster.errors(name)``: ``worker 1 restarted ...`` for a
        restart, ``worker 1 (attempt 2): <message>`` for an error."""
        if self.worker is None:
            who = ""
        elif self.kind == RESTART:
            who = f"worker {self.worker} "
        elif self.attempt is None:
            who = f"worker {self.worker}: "
        else:
            who = f"worker {self.worker} (attempt {self.attempt}): "
        trace = f"\n{self.traceback}" if self.traceback else ""
        return f"{who}{self.message}{trace}"

    def on_worker(self, worker: int, attempt: int) -> WorkerEvent:
        """This event as reported by ``worker`` (its ``attempt``): the driver's stamp."""
        return dataclasses.replace(self, worker=worker, attempt=attempt)


ErrorRecord = TaskError | WorkerEvent
