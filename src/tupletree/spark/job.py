"""The Spark job that runs a topology's workers: one partition, one task, per worker.

Not barrier mode: a barrier stage restarts every task when one fails, and aborts the
job if it is the result stage; here a dead worker's task is retried alone. The job is
submitted from a thread of its own, under a job group, so that ``cancel`` can end it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

TaskFunction = Callable[[int, Iterator[Any]], Iterator[Any]]


class SparkJob:
    """``num_workers`` long-running tasks running ``fn`` (``mapPartitionsWithIndex``).

    ``on_end(error)`` is called on the job's thread once the job ends (``error`` None
    when it ended well)."""

    def __init__(
        self,
        sc: Any,
        job_group: str,
        description: str,
        num_workers: int,
        fn: TaskFunction,
        on_end: Callable[[BaseException | None], None],
    ) -> None:
        self.sc = sc
        self.job_group = job_group
        self.description = description
        self.num_workers = num_workers
        self._fn = fn
        self._on_end = on_end
        self._thread: threading.Thread | None = None

    def start(self, name: str) -> None:
        from pyspark import InheritableThread

        self._thread = InheritableThread(
            target=self._run, name=f"tupletree-job-{name}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        # In PySpark's pinned-thread mode (the default) job-group properties are per
        # thread, so they are set here, on the thread that submits the job.
        error: BaseException | None = None
        try:
            self.sc.setJobGroup(self.job_group, self.description, interruptOnCancel=True)
            rdd = self.sc.parallelize(range(self.num_workers), self.num_workers)
            rdd.mapPartitionsWithIndex(self._fn).collect()
        except BaseException as exc:
            error = exc
        self._on_end(error)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the job's thread; True once it has ended."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def cancel(self) -> None:
        """Ask Spark to cancel the job group (its tasks are interrupted)."""
        self.sc.cancelJobGroup(self.job_group)

    def kill_task(self, task_attempt_id: int, reason: str) -> bool:
        """Have Spark kill one task attempt; Spark then runs the task again. A killed
        task does not count against Spark's task failure limit."""
        return bool(self.sc._jsc.sc().killTaskAttempt(task_attempt_id, True, reason))
