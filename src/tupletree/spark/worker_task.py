"""The Spark task that runs one worker: ``run_worker_task`` is the partition function of
the launcher's job (one partition per worker), ``task_function`` binds it to a launcher.

It tells the driver the task got a slot before user code runs, reports what
``worker_main`` raised (readably, unlike Spark's Java-wrapped error) and that it is
exiting, each by ``send_once`` (acknowledged, as the process may end right after).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any

from tupletree.distributed.control import Exiting, TaskStarted
from tupletree.distributed.control_client import WorkerMain, error_message, send_once


def _task_attempt_id() -> int | None:
    """Spark's id of the running task attempt (lets the driver kill/restart it)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx is not None else None


def run_worker_task(
    worker_main: WorkerMain, control_address: str, index: int, _rows: Iterator[Any]
) -> Iterator[tuple[int, int, int]]:
    """The Spark partition function: run worker ``index`` for as long as it lives.

    The attempt number is Spark's: 0 for the first run, +1 each time Spark re-runs the
    task after the worker died. If worker_main raises, the error goes to the driver
    first (readable, unlike Spark's Java-wrapped one) and then fails the task, so Spark
    retries it. Yields one ``(index, attempt, pid)`` row.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    # Tell the driver this task got a slot and which process runs it, before user code
    # can hang: it lets the driver tell "started but never registered" from "no slot",
    # and wait for this process to be gone on stop.
    with contextlib.suppress(Exception):
        send_once(
            control_address,
            index,
            attempt,
            TaskStarted(os.getpid(), socket.gethostname(), _task_attempt_id()),
        )
    try:
        worker_main(index, attempt, control_address)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            send_once(control_address, index, attempt, error_message(exc, fatal=True))
        raise
    with contextlib.suppress(Exception):
        send_once(control_address, index, attempt, Exiting())
    yield (index, attempt, os.getpid())


def task_function(
    worker_main: WorkerMain, control_address: str
) -> Callable[[int, Iterator[Any]], Iterator[tuple[int, int, int]]]:
    """``run_worker_task`` bound to one launcher, for ``mapPartitionsWithIndex``."""
    return functools.partial(run_worker_task, worker_main, control_address)
