"""Driver side: run W workers as W long-running Spark tasks and keep in touch with them.

Storm's roles mapped onto Spark: the driver is Nimbus (it hands out the peer table and
relays commands) and, with Spark's task retry, the Supervisor: a worker whose process
dies fails its task and Spark runs that task again, or, once Spark's retries for it are
spent or its task ended while the topology is alive, the launcher submits the worker a
new job; a hung worker is killed first. Either way it registers anew and the other
workers are told its new address. Why this shape: ``distributed/supervision.py``.

``WorkerLauncher`` is the socket and job shell around ``DriverState``
(``distributed/driver_state.py``), which decides everything from plain values. The
shell's parts:

- ``spark/reservations.py``: the task slots this process's launchers hold;
- ``spark/job.py``: the Spark jobs, one long-running task each, one per worker;
- ``distributed/control_service.py``: the ZeroMQ ROUTER workers talk to;
- ``distributed/processes.py``: waiting, on stop, for local worker processes to end;
- ``spark/errors.py``: the one useful line of a Spark error.

One lock guards the state (``_changed``, a Condition, notified on every change). Every
input goes in under it; of what the state returns, messages are queued under it (so they
leave in the order they were decided) and kills and log lines are carried out after it.
Every wait, here and in SparkCluster, is ``wait`` (``distributed/waiting.py``).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tupletree.distributed import control
from tupletree.distributed.control import Envelope
from tupletree.distributed.control_client import WorkerMain, make_control_address
from tupletree.distributed.control_service import ControlService
from tupletree.distributed.driver_state import DriverState, KillTask, Log, Outcome
from tupletree.distributed.processes import kill_if_here, wait_pids_gone
from tupletree.distributed.registration import Send, WorkerInfo
from tupletree.distributed.supervision import RestartPolicy
from tupletree.distributed.waiting import wait_for
from tupletree.spark import reservations
from tupletree.spark.errors import SparkJobFailed, WorkerStartTimeout, summarize_spark_error
from tupletree.spark.job import SparkJobs
from tupletree.spark.settings import check_no_speculation, control_hosts, reuses_python_workers
from tupletree.spark.slots import describe_slots
from tupletree.spark.worker_task import task_function

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
T = TypeVar("T")


class WorkerLauncher:
    """Start ``num_workers`` workers on Spark, supervise them, and talk to them.

    ``worker_main(worker_index, attempt, control_address)`` must be picklable
    (cloudpickle): it runs in a Spark task and should register through a
    ``ControlClient`` and return when it receives ``Stop``. What the workers say is kept
    in ``state`` (read it with ``read`` or ``wait``); ``errors()`` and ``logs()`` are the
    workers' errors and log lines, one bounded list each.

    Once every worker has registered, a worker that dies or whose task ends is started
    again, forever, paced by ``restart_policy``: each restart is a line in ``errors()``,
    and ``restarts`` counts them. With ``worker_timeout``, a worker whose loop reports
    nothing (``Metrics``, ``Ready``) for that long (``start_timeout`` before its first
    report) is hung: it is killed and started again the same way. Before every worker
    has registered, a worker's job that ends fails ``start`` instead: a worker that
    cannot start is an error at once. ``relaunch`` replaces every worker (a rebalance).
    """

    def __init__(
        self,
        spark: SparkSession | SparkContext,
        worker_main: WorkerMain,
        num_workers: int,
        *,
        name: str = "topology",
        start_timeout: float = 30.0,
        slot_wait: float | None = None,
        bind_host: str | None = None,
        ping_interval: float = 1.0,
        worker_timeout: float | None = None,
        restart_policy: RestartPolicy | None = None,
        active: bool = False,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.sc: SparkContext = getattr(spark, "sparkContext", spark)  # type: ignore[assignment]
        self.name = name
        self.num_workers = num_workers
        self._worker_main = worker_main
        self._start_timeout = start_timeout
        self._slot_wait = start_timeout / 3 if slot_wait is None else slot_wait
        self._bind_host = bind_host
        self.job_group = f"tupletree-{name}-{uuid.uuid4().hex[:8]}"
        self.state = DriverState(
            name,
            num_workers,
            policy=restart_policy,
            worker_timeout=worker_timeout,
            start_timeout=start_timeout,
            active=active,
            # The driver's own error records carry wall-clock times (records/errors.py).
            epoch_offset=time.time() - time.monotonic(),
        )
        self._changed = threading.Condition()
        self._secret = control.new_secret()
        self.service = ControlService(
            name,
            self._secret,
            self._on_envelope,
            self._routes,
            ping_interval=ping_interval,
            on_rejected=lambda text: self._input(lambda s: s.report(text, time.monotonic())),
            on_tick=lambda now: self._input(lambda s: s.tick(now)),
        )
        self._job: SparkJobs | None = None
        self._generation = 0  # of jobs: a relaunch ends one and starts the next
        self._bases: dict[int, int] = {}  # worker -> the first attempt of its current job
        self.job_error: BaseException | None = None  # what ended a job when it gave up
        self._started = False
        self._closed = False
        self._service_open = False
        self.control_address = ""

    # ================================================================= lifecycle

    def start(self) -> dict[int, WorkerInfo]:
        """Launch the jobs and return once every worker registered (and was sent the
        full peer table). Raises at once with the numbers when Spark has too few free
        slots, SparkJobFailed when a job dies first, WorkerStartTimeout after
        ``start_timeout`` seconds; nothing is left running after a failed start."""
        if self._started:
            raise RuntimeError("WorkerLauncher.start() called twice")
        self._started = True
        check_no_speculation(self.sc)
        reservations.reserve(self.sc, self.job_group, self.name, self.num_workers, self._slot_wait)
        try:
            bind_ip, advertised = control_hosts(self.sc, self._bind_host)
            port = self.service.start(bind_ip)
            self._service_open = True
            self.control_address = make_control_address(f"tcp://{advertised}:{port}", self._secret)
            self._launch()
            return self._wait_started()
        except BaseException:
            self.stop(timeout=5.0)
            raise

    def relaunch(
        self, worker_main: WorkerMain, num_workers: int, timeout: float = 10.0
    ) -> dict[int, WorkerInfo]:
        """Stop every worker (as ``stop`` does, within ``timeout``), then start
        ``num_workers`` workers running ``worker_main``, inactive, each from its next
        attempt; return once all registered (or raise as ``start`` does, leaving the
        launcher running for ``stop``). The slots: ``reservations.resize`` first."""
        self._end_jobs(timeout, "rebalance")
        with self._changed:
            self.state.relaunch(num_workers)
            self._worker_main = worker_main
            self.num_workers = num_workers
            self._changed.notify_all()
        self._launch()
        return self._wait_started()

    def stop(self, timeout: float = 10.0, reason: str = "stop requested") -> list[int]:
        """Tell every worker to stop, wait up to ``timeout`` for the Spark jobs to end
        (cancelling the job group if they do not), wait for the workers' processes on
        this host to exit, and close the control service.

        Returns the pids of registered worker processes on this host that are still
        alive (empty when the shutdown was clean). With ``spark.python.worker.reuse``
        on (Spark's default, not ours), a worker whose task ended normally stays alive
        as an idle pooled Python worker; those are not counted.
        """
        if self._closed:
            return []
        self._end_jobs(timeout, reason)
        with self._changed:
            self.state.stopped()
            self._changed.notify_all()
        leftovers = self._wait_local_pids_gone(5.0)
        if leftovers:
            log.warning("%s: worker processes still alive after stop: %s", self.name, leftovers)
        self._closed = True
        if self._service_open:
            self.service.close()
        reservations.release(self.sc, self.job_group)
        return leftovers

    # ================================================================= talking

    def set_active(self, active: bool) -> None:
        """Activate or deactivate every worker, now and as they (re)start; ``active``
        says so from the moment this returns."""
        self._input(lambda s: s.set_active(active))

    # ================================================================= state

    def read(self, view: Callable[[DriverState], T]) -> T:
        """``view(state)`` under the lock."""
        with self._changed:
            return view(self.state)

    def wait(self, check: Callable[[DriverState], T | None], timeout: float | None) -> T | None:
        """The first value of ``check(state)`` that is not None, re-checked on every
        change; None after ``timeout`` seconds. ``check`` may raise to end the wait."""
        return wait_for(self._changed, lambda: check(self.state), timeout)

    @property
    def workers(self) -> dict[int, WorkerInfo]:
        """Snapshot: worker index -> its current registration."""
        return self.read(lambda s: s.workers)

    def errors(self) -> list[str]:
        """The state's errors: the workers' own and their tasks', restarts, an unasked
        job end, refused control frames; oldest first."""
        return self.read(lambda s: s.errors.texts())

    @property
    def running(self) -> bool:
        """True while the workers' Spark jobs run or will be submitted again: from start
        until stop, or until the launcher gave up (``state.gave_up`` says why)."""
        return self.read(lambda s: self._started and not s.done)

    # ================================================================= inputs

    def _input(self, event: Callable[[DriverState], list[Outcome]]) -> None:
        """Feed the state one input (from any thread) and act on its outcomes."""
        with self._changed:
            rest = self._queue(event(self.state))
            self._changed.notify_all()
        self._act(rest)

    def _on_envelope(self, route: bytes, env: Envelope, now: float) -> list[Send]:
        """The control service's handler, on its thread: the messages it sends at once."""
        with self._changed:
            outcomes = self.state.on(route, env, now)
            self._changed.notify_all()
        self._act([o for o in outcomes if not isinstance(o, Send)])
        return [o for o in outcomes if isinstance(o, Send)]

    def _queue(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Under the lock: queue the messages; return the rest, to act on after it."""
        for o in outcomes:
            if isinstance(o, Send) and self._service_open:
                self.service.send(o.route, o.message)
        return [o for o in outcomes if not isinstance(o, Send)]

    def _act(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            if isinstance(o, Log):
                log.log(o.level, "%s: %s", self.name, o.text)
            elif isinstance(o, KillTask):
                self._kill(o)

    def _kill(self, kill: KillTask) -> None:
        """Kill a hung attempt: through Spark (any cluster), or, ``hard`` or without a
        Spark task id, its process when it runs on this host."""
        started, job = kill.task, self._job
        if not kill.hard and started.task_attempt_id is not None and job is not None:
            reason = f"tupletree {self.name}: worker {kill.worker} attempt {kill.attempt} hung"
            try:
                if job.kill_task(started.task_attempt_id, reason):
                    return
            except Exception as exc:
                log.warning("%s: could not kill worker %d's task: %s", self.name, kill.worker, exc)
        kill_if_here(started.host, started.pid)

    def _routes(self) -> list[bytes]:
        return self.read(lambda s: list(s.registry.routes.values()))

    # ================================================================= jobs

    def _launch(self) -> None:
        self._generation += 1
        generation = self._generation
        self._job = SparkJobs(
            self.sc,
            self.job_group,
            self.name,
            self.num_workers,
            self._task_for,
            lambda index, error: self._job_ended(generation, index, error),
        )
        self._job.start()

    def _task_for(self, index: int) -> Any:
        """The task function of worker ``index``'s next job (its attempts go on from
        the last one heard of)."""
        with self._changed:
            base = self._bases[index] = self.state.next_base(index)
            main = self._worker_main
        return task_function(main, self.control_address, index, base)

    def _job_ended(self, generation: int, index: int, error: BaseException | None) -> float | None:
        """Worker ``index``'s job ended: the seconds before it is submitted again, or None."""
        summary = None if error is None else summarize_spark_error(error)
        job = self._job
        spark_gone = job is not None and job.spark_stopped()
        with self._changed:
            if generation != self._generation:
                return None  # a job of the workers a relaunch replaced
            gave_up = self.state.gave_up
            delay, outcomes = self.state.job_ended(
                index, self._bases[index], summary, time.monotonic(), spark_gone
            )
            if gave_up is None and self.state.gave_up is not None:
                self.job_error = error  # the full text, beyond the state's summary
            rest = self._queue(outcomes)
            self._changed.notify_all()
        self._act(rest)
        return delay

    def _end_jobs(self, timeout: float, reason: str) -> None:
        """Stop every worker and wait for its job to end (cancelling after ``timeout``)."""
        with self._changed:
            rest = self._queue(self.state.stop_all(reason))
            unreachable = self.state.registry.unreachable()
        self._act(rest)
        job = self._job
        if job is None:
            return
        job.stopping()
        if unreachable:
            # A worker that never registered cannot be told to stop, so its job cannot
            # end by itself: let the others exit cleanly, then cancel.
            self.wait(lambda s: s.done or s.registry.all_exited() or None, timeout)
        done = self.read(lambda s: s.done)
        if not job.join(timeout if done or not unreachable else 0):
            why = (
                f"workers {unreachable} never registered"
                if unreachable
                else f"workers did not stop within {timeout} s"
            )
            log.info("%s: %s; cancelling Spark job group %s", self.name, why, self.job_group)
            if not job.cancel_until_ended(max(10.0, timeout)):
                log.warning("%s: Spark job still running after cancel", self.name)

    def _wait_started(self) -> dict[int, WorkerInfo]:
        def started(state: DriverState) -> dict[int, WorkerInfo] | None:
            if state.registry.all_registered:
                return state.workers
            if state.done:
                what = f"{self.name}: the Spark job ended before all {self.num_workers} workers"
                raise SparkJobFailed(
                    f"{what} registered{state.failure()}", worker_errors=state.fatal_errors()
                )
            return None

        workers = self.wait(started, self._start_timeout)
        if workers is not None:
            return workers
        missing, parts = self.read(
            lambda s: (s.registry.unreachable(), s.start_report(s.registry.unreachable()))
        )
        parts.append(describe_slots(self.sc))
        raise WorkerStartTimeout(
            f"{self.name}: workers {missing} did not register within "
            f"{self._start_timeout} s: {'; '.join(parts)}",
            missing=missing,
        )

    def _wait_local_pids_gone(self, timeout: float) -> list[int]:
        if reuses_python_workers(self.sc):
            return []  # finished workers idle in Spark's pool by design
        here = socket.gethostname()
        pids = self.read(lambda s: [pid for host, pid in s.registry.seen_pids if host == here])
        return wait_pids_gone(pids, timeout)
