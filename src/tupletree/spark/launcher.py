"""Driver side: run W workers as W long-running Spark tasks and keep in touch with them.

Storm's roles mapped onto Spark: the driver is Nimbus (this launcher hands out the
assignment and the peer table and relays commands) and, with Spark's task retry, the
Supervisor: a worker whose process dies fails its task and Spark runs that task again,
or, once Spark's retries for it are spent or its task ended while the topology is alive,
the launcher submits the worker a new job; a hung worker is killed first. Either way it
registers anew and we tell the other workers its new address. Why this shape, and the
decisions (backoff, crash loops, hangs): ``spark/supervision.py``.

``WorkerLauncher`` composes one piece per concern:

- ``spark/reservations.py``: the task slots this process's launchers hold;
- ``spark/job.py``: the Spark jobs, one long-running task each, one per worker;
- ``spark/supervision.py``: restarts, backoff, crash loops and hangs (``Supervisor``);
- ``distributed/control_service.py``: the ZeroMQ ROUTER workers talk to;
- ``distributed/dispatch.py`` with ``distributed/registration.py``: what each message
  from a worker does (registration and the peer table are a pure state machine);
- ``distributed/processes.py``: waiting, on stop, for local worker processes to end;
- ``spark/errors.py``: the one useful line of a Spark error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tupletree.distributed import control
from tupletree.distributed.control import (
    Ack,
    Envelope,
    ErrorReport,
    Exiting,
    Metrics,
    Ready,
    Register,
    TaskStarted,
    ToWorker,
    WorkerRestarting,
)
from tupletree.distributed.control_client import WorkerMain, make_control_address
from tupletree.distributed.control_service import ControlService
from tupletree.distributed.dispatch import Dispatcher, Listener, WorkerMessage
from tupletree.distributed.processes import pid_alive, wait_pids_gone
from tupletree.distributed.registration import Registry, Send, WorkerInfo
from tupletree.spark import reservations
from tupletree.spark.errors import (
    SparkJobFailed,
    SparkLaunchError,
    WorkerStartTimeout,
    summarize_spark_error,
)
from tupletree.spark.job import SparkJobs
from tupletree.spark.slots import is_local_master, slot_info
from tupletree.spark.supervision import Kill, Restart, RestartPolicy, Supervisor
from tupletree.spark.worker_task import task_function

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = ["WorkerInfo", "WorkerLauncher", "WorkerMessage", "pid_alive", "wait_pids_gone"]

log = logging.getLogger(__name__)


class WorkerLauncher:
    """Start ``num_workers`` workers on Spark, supervise them, and talk to them.

    ``worker_main(worker_index, attempt, control_address)`` must be picklable
    (cloudpickle): it runs in a Spark task and should register through a
    ``ControlClient`` and return when it receives ``Stop``.

    ``assignments[i]`` (anything picklable) is given to worker ``i`` in its welcome.
    What workers say reaches ``listener`` (called on the launcher's control or job
    thread: keep it quick) or, without one, a bounded inbox read with ``recv``.
    ``errors()`` and ``logs()`` are the workers' errors and log lines, one bounded list
    each.

    Once every worker has registered, a worker that dies or whose task ends is started
    again, forever, paced by ``restart_policy``: each restart is a line in ``errors()``
    and a ``WorkerRestarting`` event, and ``restarts`` counts them. With
    ``worker_timeout``, a worker whose loop reports nothing (``Metrics``, ``Ready``) for
    that long (``start_timeout`` before its first report) is hung: it is killed and
    started again the same way. Before every worker has registered, a worker's job that
    ends fails ``start`` instead: a worker that cannot start is an error at once.
    """

    def __init__(
        self,
        spark: SparkSession | SparkContext,
        worker_main: WorkerMain,
        num_workers: int,
        *,
        name: str = "topology",
        assignments: Mapping[int, Any] | None = None,
        start_timeout: float = 30.0,
        slot_wait: float | None = None,
        bind_host: str | None = None,
        ping_interval: float = 1.0,
        listener: Listener | None = None,
        inbox_size: int = 10_000,
        worker_timeout: float | None = None,
        restart_policy: RestartPolicy | None = None,
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

        self._secret = control.new_secret()
        self.dispatcher = Dispatcher(
            name, Registry(num_workers, dict(assignments or {})), listener, inbox_size
        )
        self._registry = self.dispatcher.registry
        self._changed = self.dispatcher.changed
        self._supervisor = Supervisor(
            num_workers,
            restart_policy,
            worker_timeout=worker_timeout,
            start_timeout=start_timeout,
        )
        self.service = ControlService(
            name,
            self._secret,
            self._handle,
            self._routes,
            ping_interval=ping_interval,
            on_rejected=self.dispatcher.report,
            on_tick=self._check_hung,
        )
        self._job: SparkJobs | None = None
        self._bases: dict[int, int] = {}  # worker -> the first attempt of its current job
        self._gave_up = False  # the dispatcher was told the jobs ended for good
        self._started = False
        self._closed = False
        self._service_open = False
        self.control_address = ""

    # ================================================================= lifecycle

    def start(self) -> dict[int, WorkerInfo]:
        """Launch the job and return once every worker registered (and was sent the full
        peer table). Raises at once with the numbers when Spark has too few free slots,
        SparkJobFailed when the job dies first, WorkerStartTimeout after
        ``start_timeout`` seconds; nothing is left running after a failed start."""
        if self._started:
            raise RuntimeError("WorkerLauncher.start() called twice")
        self._started = True
        self._check_spark_settings()
        reservations.reserve(self.sc, self.job_group, self.name, self.num_workers, self._slot_wait)
        try:
            self._open_control_service()
            self._job = SparkJobs(
                self.sc,
                self.job_group,
                self.name,
                self.num_workers,
                self._task_for,
                self._job_ended,
            )
            self._job.start()
            return self._wait_started()
        except BaseException:
            self.stop(timeout=5.0)
            raise

    def stop(self, timeout: float = 10.0, reason: str = "stop requested") -> list[int]:
        """Tell every worker to stop, wait up to ``timeout`` for the Spark job to end
        (cancelling the job group if it does not), wait for the workers' processes on
        this host to exit, and close the control service.

        Returns the pids of registered worker processes on this host that are still
        alive (empty when the shutdown was clean). With ``spark.python.worker.reuse``
        on (Spark's default, not ours), a worker whose task ended normally stays alive
        as an idle pooled Python worker; those are not counted.
        """
        if self._closed:
            return []
        with self._changed:
            sends = self._registry.stop_all(reason)
            unreachable = self._registry.unreachable()
        self._send_all(sends)
        job = self._job
        if job is not None:
            job.stopping()
            if unreachable:
                # A worker that never registered cannot be told to stop, so the job
                # cannot end by itself: let the others exit cleanly, then cancel.
                self._wait_exited(timeout)
            with self._changed:
                done = self.dispatcher.job_done
            if not job.join(timeout if done or not unreachable else 0):
                why = (
                    f"workers {unreachable} never registered"
                    if unreachable
                    else f"workers did not stop within {timeout} s"
                )
                log.info("%s: %s; cancelling Spark job group %s", self.name, why, self.job_group)
                job.cancel()
                if not job.join(max(10.0, timeout)):
                    log.warning("%s: Spark job still running after cancel", self.name)
            with self._changed:
                final = not self._gave_up
                self._gave_up = True
            if final:  # a job waiting out a backoff ends without a last on_end
                self.dispatcher.job_ended(None, None)
        leftovers = self._wait_local_pids_gone(5.0)
        if leftovers:
            log.warning("%s: worker processes still alive after stop: %s", self.name, leftovers)
        self._closed = True
        if self._service_open:
            self.service.close()
        reservations.release(self.sc, self.job_group)
        return leftovers

    def __enter__(self) -> WorkerLauncher:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ================================================================= talking

    def send(self, worker: int, msg: ToWorker) -> bool:
        """Send ``msg`` to the current attempt of ``worker``; False if it has not
        registered (zmq drops a message to a worker whose process has died)."""
        with self._changed:
            route = self._registry.routes.get(worker)
        if route is None:
            return False
        self.service.send(route, msg)
        return True

    def broadcast(self, msg: ToWorker, exclude: int | None = None) -> None:
        """Send ``msg`` to every registered worker (but ``exclude``)."""
        with self._changed:
            routes = [r for i, r in self._registry.routes.items() if i != exclude]
        for route in routes:
            self.service.send(route, msg)

    def recv(self, timeout: float | None = None) -> WorkerMessage | None:
        """The oldest unread worker message or launcher event, or None after
        ``timeout`` seconds. Only without a listener."""
        inbox = self.dispatcher.inbox
        if inbox is None:
            raise RuntimeError("this launcher delivers to its listener; recv is unused")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not inbox:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)
            return inbox.popleft()

    def restart_worker(self, worker: int, reason: str = "restart requested") -> bool:
        """Have Spark kill the worker's task attempt; Spark then runs the task again.

        Works on any cluster (no pid needed), and a killed task does not count
        against Spark's task failure limit. Slower than a crash: Spark interrupts the
        task and kills the Python worker after ``spark.python.task.killTimeout`` (2 s).
        """
        with self._changed:
            info = self._registry.workers.get(worker)
        if info is None or info.task_attempt_id is None or self._job is None:
            return False
        return self._job.kill_task(info.task_attempt_id, reason)

    # ================================================================= state

    @property
    def workers(self) -> dict[int, WorkerInfo]:
        """Snapshot: worker index -> its current registration."""
        with self._changed:
            return dict(self._registry.workers)

    def errors(self) -> list[str]:
        """Errors the workers reported (their own and their tasks'), the Spark job's
        end when nobody asked for it, and refused control frames; oldest first."""
        with self._changed:
            return list(self.dispatcher.errors)

    def logs(self) -> list[str]:
        """Log lines (WARNING and up) the workers sent, oldest first."""
        with self._changed:
            return list(self.dispatcher.logs)

    @property
    def job_error(self) -> BaseException | None:
        """The error the Spark job ended with, if it ended with one."""
        with self._changed:
            return self.dispatcher.job_error

    @property
    def running(self) -> bool:
        """True while the workers' Spark jobs run or will be submitted again: from start
        until stop, or until the launcher gave up (``job_error``)."""
        with self._changed:
            return self._started and not self.dispatcher.job_done

    @property
    def restarts(self) -> dict[int, int]:
        """Worker index -> how many times it was started again since ``start``."""
        with self._changed:
            return self._supervisor.restarts()

    def wait_for_registration(
        self, worker: int, min_attempt: int = 0, timeout: float = 30.0
    ) -> WorkerInfo:
        """Block until ``worker`` is registered with attempt >= ``min_attempt``.
        Raises SparkJobFailed if the job ends first, TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                info = self._registry.workers.get(worker)
                if info is not None and info.attempt >= min_attempt:
                    return info
                if self.dispatcher.job_done:
                    raise self._job_failure(f"worker {worker} did not register")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"worker {worker} did not register with attempt >= {min_attempt} "
                        f"within {timeout} s (current: {info})"
                    )
                self._changed.wait(remaining)

    # ================================================================= start steps

    def _check_spark_settings(self) -> None:
        conf = self.sc.getConf()
        if (conf.get("spark.speculation") or "false").lower() == "true":
            raise SparkLaunchError(
                "spark.speculation is on: Spark would start duplicate copies of the "
                "long-running worker tasks (and kill one when the other finishes); "
                "turn it off for a session that runs tupletree topologies"
            )

    def _open_control_service(self) -> None:
        bind_ip, advertised = self._control_hosts()
        port = self.service.start(bind_ip)
        self._service_open = True
        self.control_address = make_control_address(f"tcp://{advertised}:{port}", self._secret)

    def _control_hosts(self) -> tuple[str, str]:
        """(IP to bind the control socket on, host name workers connect to)."""
        if self._bind_host:
            return socket.gethostbyname(self._bind_host), self._bind_host
        if is_local_master(self.sc.master):
            return "127.0.0.1", "127.0.0.1"
        conf = self.sc.getConf()
        advertised = conf.get("spark.driver.host") or socket.gethostname()
        bind = conf.get("spark.driver.bindAddress") or advertised
        return socket.gethostbyname(bind), advertised

    def _task_for(self, index: int) -> Any:
        """The task function of worker ``index``'s next job (its attempts go on from
        the last one heard of)."""
        with self._changed:
            base = self._bases[index] = self._supervisor.next_base(index)
        return task_function(self._worker_main, self.control_address, index, base)

    def _job_ended(self, index: int, error: BaseException | None) -> float | None:
        """Worker ``index``'s job ended: the seconds before it is submitted again, or None
        (stopping; or giving up: before every worker registered, or with Spark gone)."""
        summary = None if error is None else summarize_spark_error(error)
        spark_gone = self._job is not None and self._job.spark_stopped()
        restart: Restart | None = None
        final = False
        delay: float | None = None
        with self._changed:
            self._sync_live()
            if self._registry.stopping:
                pass  # stop() tells the dispatcher once every job has ended
            elif not self._registry.all_registered or spark_gone:
                final = not self._gave_up  # the dispatcher hears of the end once
                self._gave_up = True
            else:
                now = time.monotonic()
                restart = self._supervisor.job_ended(index, self._bases[index], now, summary)
                delay = restart.delay if restart is not None else 0.0
        if final:
            self.dispatcher.job_ended(error, summary)
        if restart is not None:
            self._report_restart(restart)
        return delay

    # ================================================================= supervision

    def _sync_live(self) -> None:
        """Under the lock: deaths count from the first full registration until stop."""
        self._supervisor.live = self._registry.all_registered and not self._registry.stopping

    def _handle(self, route: bytes, env: Envelope, now: float) -> list[Send]:
        """The control service's handler: the dispatcher's, plus what the supervisor
        learns from the message (and, to a task's start, the backoff in the Ack)."""
        sends = self.dispatcher.dispatch(route, env, now)
        msg, index, attempt = env.message, env.worker, env.attempt
        if not 0 <= index < self.num_workers:
            return sends
        restart: Restart | None = None
        with self._changed:
            self._sync_live()
            supervisor = self._supervisor
            match msg:
                case TaskStarted():
                    delay, restart = supervisor.task_started(index, attempt, now)
                    sends = [
                        Send(s.route, Ack(delay)) if isinstance(s.message, Ack) else s
                        for s in sends
                    ]
                case Register():
                    supervisor.registered(index, attempt, now)
                case Metrics() | Ready():
                    supervisor.beat(index, attempt, now)
                case ErrorReport(fatal=True, error=error):
                    supervisor.failed(index, attempt, error)
                case Exiting():
                    supervisor.exiting(index, attempt)
        if restart is not None:
            self._report_restart(restart)
        return sends

    def _check_hung(self, now: float) -> None:
        """Kill the workers whose loops went silent too long (Spark re-runs them)."""
        with self._changed:
            self._sync_live()
            kills, restarts = self._supervisor.check_hung(now)
            tasks = {k.worker: self._registry.tasks.get(k.worker) for k in kills}
        for restart in restarts:
            self._report_restart(restart)
        for kill in kills:
            self._kill(kill, tasks[kill.worker])

    def _kill(self, kill: Kill, task: tuple[int, TaskStarted] | None) -> None:
        """Kill a hung attempt: through Spark (any cluster), or, ``hard`` or without a
        Spark task id, its process when it runs on this host."""
        if task is None or task[0] != kill.attempt:
            return  # that attempt's task is not known (or no longer current)
        started = task[1]
        if not kill.hard and started.task_attempt_id is not None and self._job is not None:
            reason = f"tupletree {self.name}: worker {kill.worker} attempt {kill.attempt} hung"
            try:
                if self._job.kill_task(started.task_attempt_id, reason):
                    return
            except Exception as exc:
                log.warning("%s: could not kill worker %d's task: %s", self.name, kill.worker, exc)
        if started.host == socket.gethostname() and pid_alive(started.pid):
            with contextlib.suppress(OSError):
                os.kill(started.pid, signal.SIGKILL)

    def _report_restart(self, restart: Restart) -> None:
        event = restart.event()
        text = restart_text(restart.worker, restart.died_attempt, event)
        log.warning("%s: %s", self.name, text)
        self.dispatcher.restarting(restart.worker, restart.died_attempt, event, text)

    def _wait_started(self) -> dict[int, WorkerInfo]:
        deadline = time.monotonic() + self._start_timeout
        with self._changed:
            while not self._registry.all_registered:
                if self.dispatcher.job_done:
                    raise self._job_failure(
                        f"{self.name}: the Spark job ended before all "
                        f"{self.num_workers} workers registered"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = self._registry.unreachable()
                    break
                self._changed.wait(min(remaining, 0.5))
            else:
                return dict(self._registry.workers)
        raise WorkerStartTimeout(
            f"{self.name}: workers {missing} did not register within "
            f"{self._start_timeout} s: {self._start_report(missing)}",
            missing=missing,
        )

    def _start_report(self, missing: list[int]) -> str:
        """Why each missing worker is missing, as far as the driver can tell."""
        with self._changed:
            tasks = dict(self._registry.tasks)
            fatal = dict(self.dispatcher.fatal)
        parts = []
        for i in missing:
            task = tasks.get(i)
            if i in fatal:
                parts.append(f"worker {i} failed: {fatal[i]}")
            elif task is not None:
                attempt, started = task
                parts.append(
                    f"worker {i}'s task (attempt {attempt}, pid {started.pid} on "
                    f"{started.host}) is running but worker_main has not registered"
                )
            else:
                parts.append(f"worker {i}'s task has not started (waiting for a task slot?)")
        try:
            slots = slot_info(self.sc)
            parts.append(
                f"Spark has {slots.total} task slots, {slots.busy} running ({slots.master})"
            )
        except Exception as exc:  # only for the message
            parts.append(f"no slot info: {exc}")
        return "; ".join(parts)

    def _job_failure(self, what: str) -> SparkJobFailed:
        """Under the lock: the error for a job that ended, with the best reason known."""
        fatal = dict(self.dispatcher.fatal)
        detail = ""
        if fatal:
            worst = next(iter(fatal.items()))
            detail = f"; worker {worst[0]} reported: {worst[1]}"
        elif self.dispatcher.job_error is not None:
            detail = f": {summarize_spark_error(self.dispatcher.job_error)}"
        return SparkJobFailed(f"{what}{detail}", worker_errors=fatal)

    # ================================================================= control

    def _routes(self) -> list[bytes]:
        with self._changed:
            return list(self._registry.routes.values())

    def _send_all(self, sends: list[Send]) -> None:
        if self._service_open:
            for send in sends:
                self.service.send(send.route, send.message)

    # ================================================================= shutdown

    def _wait_exited(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self.dispatcher.job_done and not self._registry.all_exited():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._changed.wait(remaining)

    def _wait_local_pids_gone(self, timeout: float) -> list[int]:
        reuse = (self.sc.getConf().get("spark.python.worker.reuse") or "true").lower()
        if reuse == "true":
            return []  # finished workers idle in Spark's pool by design
        here = {socket.gethostname()}
        with self._changed:
            pids = [pid for host, pid in self._registry.seen_pids if host in here]
        return wait_pids_gone(pids, timeout)


def restart_text(worker: int, attempt: int, event: WorkerRestarting) -> str:
    """The ``errors()`` line for one restart of a worker."""
    text = (
        f"worker {worker} restarted (restart {event.restarts}): attempt {attempt} ended "
        f"after {event.lived:.1f} s: {event.reason}; next attempt in {event.delay:.1f} s"
    )
    if event.crash_loop:
        text += (
            f"; crash loop: {event.quick_deaths} attempts in a row died young, "
            f"the last with: {event.reason}"
        )
    return text
