"""The Spark task that runs one worker: ``run_worker_task`` is the partition function of
one of the worker's jobs, ``task_function`` binds it to a launcher, a worker and a job.

It tells the driver the task got a slot before user code runs (and waits out the restart
backoff the driver answers with), reports what ``worker_main`` raised (readably, unlike
Spark's Java-wrapped error) and that it is exiting, each acknowledged (``request``,
``send_once``), as the process may end right after.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from tupletree.distributed.control import Exiting, TaskStarted
from tupletree.distributed.control_client import WorkerMain, error_message, request, send_once

MAX_START_DELAY_SECS = 300.0
"""The longest backoff a task obeys from the driver before starting its worker."""


def run_worker_task(
    worker_main: WorkerMain,
    control_address: str,
    index: int,
    attempt_base: int,
    _rows: Iterator[Any],
) -> Iterator[tuple[int, int, int]]:
    """The Spark partition function: run worker ``index`` for as long as it lives.

    The attempt number is ``attempt_base`` (given by the driver per Spark job of this
    worker) plus Spark's attempt within the job, so it grows by one each time the worker
    starts again. The driver's answer to ``TaskStarted`` says how long to wait first
    (its restart backoff). If worker_main raises, the error goes to the driver first
    (readable, unlike Spark's Java-wrapped one) and then fails the task, so Spark
    retries it. Yields one ``(index, attempt, pid)`` row.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = attempt_base + (ctx.attemptNumber() if ctx is not None else 0)
    # Spark's id of this task attempt: lets the driver kill (restart) it.
    task_attempt_id = ctx.taskAttemptId() if ctx is not None else None
    # Tell the driver this task got a slot and which process runs it, before user code
    # can hang: it lets the driver tell "started but never registered" from "no slot",
    # and wait for this process to be gone on stop.
    reply = None
    with contextlib.suppress(Exception):
        reply = request(
            control_address,
            index,
            attempt,
            TaskStarted(os.getpid(), socket.gethostname(), task_attempt_id),
        )
    if reply is not None and reply.delay > 0:
        time.sleep(min(reply.delay, MAX_START_DELAY_SECS))
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
    worker_main: WorkerMain, control_address: str, index: int, attempt_base: int
) -> Callable[[Iterator[Any]], Iterator[tuple[int, int, int]]]:
    """``run_worker_task`` for one Spark job of worker ``index``, for ``mapPartitions``."""
    return functools.partial(run_worker_task, worker_main, control_address, index, attempt_base)
