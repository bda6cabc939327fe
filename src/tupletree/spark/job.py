"""The Spark jobs that run a topology's workers: one job of one task per worker, each
submitted again when it ends, for as long as the caller says so.

A job per worker, not one job of W tasks: Spark re-runs a failed task only
``spark.task.maxFailures - 1`` times per job, and a job whose task exhausts them is
aborted with every other task in it; with a job each, a worker that exhausts its retries
(or whose task ends "cleanly") ends its own job only, and ``on_end`` decides whether and
when to submit it again (``tupletree.distributed.supervision`` says why this shape). Not
barrier mode: a barrier stage restarts every task when one fails. The jobs are submitted
from threads of their own, under one job group, so that ``cancel`` ends them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

TaskFunction = Callable[[Iterator[Any]], Iterator[Any]]


class SparkJobs:
    """Worker ``i``'s job runs ``task_for(i)`` (``mapPartitions`` over one partition);
    when it ends, ``on_end(i, error)`` (on that worker's thread; ``error`` None when it
    ended well) returns the seconds to wait before submitting it again, or None to stop.
    ``task_for`` is asked again for each submission (a new attempt base)."""

    def __init__(
        self,
        sc: Any,
        job_group: str,
        name: str,
        num_workers: int,
        task_for: Callable[[int], TaskFunction],
        on_end: Callable[[int, BaseException | None], float | None],
    ) -> None:
        self.sc = sc
        self.job_group = job_group
        self.name = name
        self.num_workers = num_workers
        self._task_for = task_for
        self._on_end = on_end
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self) -> None:
        from pyspark import InheritableThread

        for index in range(self.num_workers):
            thread = InheritableThread(
                target=self._run,
                args=(index,),
                name=f"tupletree-job-{self.name}-w{index}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def _run(self, index: int) -> None:
        while not self._stopping.is_set():
            # In PySpark's pinned-thread mode (the default) job-group properties are per
            # thread, so they are set here, on the thread that submits the job.
            error: BaseException | None = None
            try:
                self.sc.setJobGroup(
                    self.job_group, f"tupletree {self.name}: worker {index}", interruptOnCancel=True
                )
                task = self._task_for(index)
                if self._stopping.is_set():  # stopped while this thread got here
                    return
                self.sc.parallelize([index], 1).mapPartitions(task).collect()
            except BaseException as exc:
                error = exc
            delay = self._on_end(index, error)
            if delay is None or self._stopping.wait(delay):
                return

    def stopping(self) -> None:
        """No job is submitted again from now on (waits before one end at once)."""
        self._stopping.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for every job's thread; True once all have ended."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def cancel(self) -> None:
        """Ask Spark to cancel the job group (its tasks are interrupted)."""
        self.sc.cancelJobGroup(self.job_group)

    def cancel_until_ended(self, timeout: float) -> bool:
        """Cancel the job group until every job's thread has ended, up to ``timeout``
        s; True once they have. Again and again, not once: a thread that had passed its
        check of ``stopping`` submits its job after a single cancel, and that job would
        hold its slot with nobody to stop it (a later submit or rebalance was refused
        for it: CI, stop 41)."""
        deadline = time.monotonic() + timeout
        while True:
            self.cancel()
            if self.join(min(1.0, max(0.0, deadline - time.monotonic()))):
                return True
            if time.monotonic() >= deadline:
                return False

    def spark_stopped(self) -> bool:
        """True once the SparkContext is stopped: no job can run any more."""
        try:
            return self.sc._jsc is None or bool(self.sc._jsc.sc().isStopped())
        except Exception:
            return True

    def kill_task(self, task_attempt_id: int, reason: str) -> bool:
        """Have Spark kill one task attempt; Spark then runs the task again. A killed
        task does not count against Spark's task failure limit."""
        return bool(self.sc._jsc.sc().killTaskAttempt(task_attempt_id, True, reason))
