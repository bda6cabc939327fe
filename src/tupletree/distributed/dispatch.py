"""The driver's one dispatcher: every message a worker sends is handled here, once.

``Dispatcher.dispatch(route, envelope, now)`` takes an authenticated envelope from
the control service and returns the messages to send (``Send`` outcomes, as the
``Registry`` it consults does). Registration and the peer table are the Registry's;
errors and log lines go to one bounded list each, whoever reports them (a worker's
exception, its tasks' errors in a metrics report, a job that ended unasked, refused
control frames); what a cluster does with the rest (metrics, readiness, restarts, the
job's end) it learns through a ``Listener`` whose methods are called after the
dispatcher's lock is released, so a listener may call back into the launcher.

Without a listener every accepted message and event is kept in a bounded inbox
instead (``WorkerLauncher.recv``), which is how the launcher is used on its own.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tupletree.distributed.control import (
    Ack,
    Envelope,
    ErrorReport,
    Exiting,
    Heartbeat,
    JobEnded,
    LogLine,
    Metrics,
    Ready,
    Register,
    TaskStarted,
    WorkerRegistered,
    WorkerRestarting,
)
from tupletree.distributed.registration import Registry, Send
from tupletree.distributed.rejections import Rejections
from tupletree.runtime.error_log import MAX_ERRORS_KEPT  # as a LocalCluster worker keeps

log = logging.getLogger("tupletree")

MAX_LOGS_KEPT = 1000
# Messages a task sends on a short-lived socket of its own (send_once): they come from
# no bound route.
ONE_SHOT = (TaskStarted, ErrorReport, Exiting)


@dataclass(frozen=True)
class WorkerMessage:
    """A message from worker ``worker`` (attempt ``attempt``), or an event of the
    launcher itself (``WorkerRegistered``, ``WorkerRestarting``, ``JobEnded``: worker
    None for the latter)."""

    worker: int | None
    attempt: int | None
    msg: Any

    @property
    def type(self) -> str:
        return type(self.msg).__name__


class Listener(Protocol):
    """What a cluster hears from its workers, each kind through its own method."""

    def worker_registered(self, worker: int, attempt: int, event: WorkerRegistered) -> None: ...

    def ready(self, worker: int, attempt: int) -> None: ...

    def metrics(self, worker: int, attempt: int, report: Metrics) -> None: ...

    def job_ended(self, event: JobEnded) -> None: ...

    def worker_restarting(self, worker: int, attempt: int, event: WorkerRestarting) -> None: ...


class Dispatcher:
    """The driver's state about its workers, and the one place their messages land."""

    def __init__(
        self,
        name: str,
        registry: Registry,
        listener: Listener | None = None,
        inbox_size: int = 10_000,
    ) -> None:
        self.name = name
        self.registry = registry
        self.listener = listener
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.errors: deque[str] = deque(maxlen=MAX_ERRORS_KEPT)
        self.logs: deque[str] = deque(maxlen=MAX_LOGS_KEPT)
        self.fatal: dict[int, str] = {}  # worker -> its last fatal error (one per index)
        self.last_heard: dict[int, float] = {}  # worker -> when its current attempt spoke
        self.dropped = 0  # authenticated messages from a replaced attempt or a wrong route
        self.refused = Rejections("registrations")
        self.job_done = False
        self.job_error: BaseException | None = None
        self.inbox: deque[WorkerMessage] | None = (
            deque(maxlen=inbox_size) if listener is None else None
        )

    # -- from the control service ----------------------------------------------------

    def dispatch(self, route: bytes, env: Envelope, now: float) -> list[Send]:
        """Handle one authenticated envelope from ``route``; the messages to send."""
        msg, index, attempt = env.message, env.worker, env.attempt
        sends: list[Send] = [Send(route, Ack())] if env.want_ack else []
        calls: list[Callable[[], None]] = []
        with self.changed:
            if isinstance(msg, Register):
                outcome = self.registry.register(route, index, attempt, msg, now)
                sends += outcome.sends
                if outcome.refused is not None:
                    # Signed, so a replay at worst: still, one report per interval.
                    report = self.refused.reject(route.hex(), outcome.refused, now)
                    if report is not None:
                        self._error(report)
                        log.warning("%s: %s", self.name, report)
                elif outcome.event is not None:
                    self.last_heard[index] = now
                    calls.append(self._deliver_registered(index, attempt, outcome.event))
                self.changed.notify_all()
            elif not self.registry.accepts(index, attempt, route, isinstance(msg, ONE_SHOT)):
                self.dropped += 1
                return sends
            else:
                self.last_heard[index] = now
                calls += self._handle(index, attempt, msg)
                self.changed.notify_all()
        for call in calls:
            call()
        return sends

    def _handle(self, index: int, attempt: int, msg: Any) -> list[Callable[[], None]]:
        """Under the lock: update state; return the listener calls to make after it."""
        listener = self.listener
        match msg:
            case Heartbeat():
                pass
            case TaskStarted():
                self.registry.task_started(index, attempt, msg)
            case Exiting():
                self.registry.exiting(index)
            case ErrorReport(error=error, traceback=trace, fatal=fatal):
                if fatal:
                    self.fatal[index] = error
                self._error(f"worker {index} (attempt {attempt}): {error}\n{trace}")
            case LogLine(level=level, line=line):
                self.logs.append(f"worker {index} {level}: {line}")
                number = logging.getLevelName(level)
                number = number if isinstance(number, int) else logging.WARNING
                log.log(number, "worker %s: %s", index, line)
            case Metrics(errors=errors):
                for text in errors:
                    self._error(f"worker {index}: {text}")
                if listener is not None:
                    return [lambda: listener.metrics(index, attempt, msg)]
            case Ready():
                if listener is not None:
                    return [lambda: listener.ready(index, attempt)]
        self._record(WorkerMessage(index, attempt, msg))
        return []

    def _deliver_registered(
        self, index: int, attempt: int, event: WorkerRegistered
    ) -> Callable[[], None]:
        listener = self.listener
        if listener is None:
            self._record(WorkerMessage(index, attempt, event))
            return lambda: None
        return lambda: listener.worker_registered(index, attempt, event)

    # -- from the launcher -----------------------------------------------------------

    def job_ended(self, error: BaseException | None, summary: str | None) -> None:
        """The Spark job ended (``error`` None when it ended well)."""
        with self.changed:
            requested = self.registry.stopping
            self.job_done = True
            self.job_error = None if requested else error
            event = JobEnded(None if requested else summary, requested)
            if not requested:
                why = summary or "it ended without being asked to"
                self._error(f"the Spark job running the workers ended: {why}")
            self._record(WorkerMessage(None, None, event))
            self.changed.notify_all()
        if self.listener is not None:
            self.listener.job_ended(event)

    def restarting(self, index: int, attempt: int, event: WorkerRestarting, text: str) -> None:
        """Attempt ``attempt`` of worker ``index`` ended and the worker is started again:
        ``text`` goes with the errors, ``event`` to the listener (or the inbox)."""
        with self.changed:
            self._error(text)
            self._record(WorkerMessage(index, attempt, event))
            self.changed.notify_all()
        if self.listener is not None:
            self.listener.worker_restarting(index, attempt, event)

    def report(self, text: str) -> None:
        """An error of the driver's own about its workers (refused input, ...)."""
        with self.changed:
            self._error(text)
            self.changed.notify_all()

    # -- internals -------------------------------------------------------------------

    def _error(self, text: str) -> None:
        self.errors.append(text)

    def _record(self, message: WorkerMessage) -> None:
        if self.inbox is not None:
            self.inbox.append(message)  # bounded: the oldest goes when it is full
