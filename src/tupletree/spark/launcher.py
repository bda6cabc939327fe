"""Driver side: run W workers as W long-running Spark tasks and keep in touch with them.

Storm's roles mapped onto Spark: the driver is Nimbus (this launcher hands out the
assignment and the peer table and relays commands) and, with Spark's task retry, the
Supervisor: a worker whose process dies fails its task and Spark runs that task again,
or, once Spark's retries for it are spent or its task ended while the topology is alive,
the launcher submits the worker a new job. Either way it registers anew and we tell the
other workers its new address. Why this shape, and the decisions it takes (backoff,
crash loops, hung workers): ``tupletree.spark.supervision``.

Each worker runs as a Spark job of one task, on a driver thread of its own, all under one
job group so that ``stop`` can cancel them. Not barrier mode: a barrier stage restarts
every task when one fails, and aborts the job if it is the result stage; here a dead
worker is started again alone.

The control service is a zmq ROUTER on the driver. Workers connect with ``ControlClient``
(``tupletree.distributed.control_client``); frames are signed pickles (``protocol``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zmq

from tupletree.distributed import control as protocol
from tupletree.distributed.control import Message
from tupletree.distributed.control_client import WorkerMain, make_control_address
from tupletree.spark.errors import (
    NotEnoughSlotsError,
    SparkJobFailed,
    SparkLaunchError,
    WorkerStartTimeout,
)
from tupletree.spark.slots import describe_shortage, is_local_master, slot_info
from tupletree.spark.supervision import Restart, RestartPolicy, WorkerRestarts, hung_for
from tupletree.spark.worker_task import task_function

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Slots held by launchers of this process that have started and not stopped, per
# SparkContext: {id(sc): {job_group: workers}}. A launch counts them as busy even when
# their tasks are not running yet, so two topologies submitted at once cannot both
# count the same free slots.
_reservations: dict[int, dict[str, int]] = {}
_reservations_lock = threading.Lock()


@dataclass(frozen=True)
class WorkerInfo:
    """What the driver knows about the current attempt of one worker."""

    index: int
    attempt: int
    pid: int
    host: str
    address: str
    task_attempt_id: int | None
    registered_at: float  # time.monotonic()
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerMessage:
    """A message from worker ``worker`` (attempt ``attempt``), or an event of the
    launcher itself (``worker_registered``, ``job_ended``)."""

    worker: int | None
    attempt: int | None
    msg: Message

    @property
    def type(self) -> str:
        return str(self.msg.get("type"))


MessageHandler = Callable[[WorkerMessage], None]

_ACK: Message = {"type": protocol.ACK}
# Messages that do not show a worker's scheduler loop is alive (the control client's
# own thread or the task wrapper send them), so they do not count against a hang.
_NOT_FROM_THE_LOOP = frozenset(
    {protocol.HEARTBEAT, protocol.LOG, protocol.TASK_STARTED, protocol.ERROR, protocol.EXITING}
)


class WorkerLauncher:
    """Start ``num_workers`` workers on Spark, supervise them, and talk to them.

    ``worker_main(worker_index, attempt, control_address)`` must be picklable
    (cloudpickle): it runs in a Spark task and should register through a
    ``ControlClient`` and return when it receives ``{"type": "stop"}``.

    ``assignments[i]`` (anything picklable) is given to worker ``i`` in its welcome.
    Messages from workers, and the launcher's own events (``task_started``,
    ``worker_registered``, ``worker_restarting``, ``job_ended``), go to ``on_message``
    (called on the launcher's control or job threads: keep it quick, never block on the
    launcher) or, without one, to a bounded inbox read with ``recv``.

    Once every worker has registered, a worker that dies or whose task ends is started
    again, forever, paced by ``restart_policy``; each restart is a ``worker_restarting``
    event (``reason``, ``lived``, ``delay``, ``restarts``, ``quick_deaths``, ``crash_loop``). With
    ``worker_timeout`` set, a registered worker that sends nothing but its control
    client's own heartbeats for that long (``start_timeout`` before its first message) is
    hung: it is killed and restarted the same way. Before every worker has registered, a
    worker's job that ends fails ``start`` instead, so a worker that cannot start is an
    error at once.
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
        on_message: MessageHandler | None = None,
        inbox_size: int = 10_000,
        worker_timeout: float | None = None,
        restart_policy: RestartPolicy | None = None,
    ) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if worker_timeout is not None and worker_timeout <= 0:
            raise ValueError(f"worker_timeout must be > 0 or None, got {worker_timeout}")
        self.sc: SparkContext = getattr(spark, "sparkContext", spark)  # type: ignore[assignment]
        self.name = name
        self.num_workers = num_workers
        self._worker_main = worker_main
        self._assignments = dict(assignments or {})
        self._start_timeout = start_timeout
        self._slot_wait = start_timeout / 3 if slot_wait is None else slot_wait
        self._bind_host = bind_host
        self._ping_interval = ping_interval
        self._on_message = on_message
        self._worker_timeout = worker_timeout
        self._policy = restart_policy or RestartPolicy()
        self.job_group = f"tupletree-{name}-{uuid.uuid4().hex[:8]}"

        self._secret = protocol.new_secret()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._workers: dict[int, WorkerInfo] = {}
        self._routes: dict[int, bytes] = {}
        self._worker_errors: dict[int, str] = {}
        self._exited: set[int] = set()
        self._tasks: dict[int, Message] = {}  # index -> its latest task_started message
        self._all_registered = False
        self._job_done = False
        self._job_error: BaseException | None = None
        self._stopping = False
        self._started = False
        self._closed = False
        self._seen_pids: set[tuple[str, int]] = set()
        # Supervision, per worker index: restart history; (attempt, when its worker code
        # starts, after any backoff); (attempt, when it last reported from its loop);
        # the highest attempt heard of; the last fatal error (attempt, text); a hung
        # attempt being killed (attempt, since); backoff owed to the next start.
        self._restarts = {i: WorkerRestarts(i, self._policy) for i in range(num_workers)}
        self._attempt_started: dict[int, tuple[int, float]] = {}
        self._last_beat: dict[int, tuple[int, float]] = {}
        self._max_attempt: dict[int, int] = {}
        self._last_fatal: dict[int, tuple[int, str]] = {}
        self._killing: dict[int, tuple[int, float]] = {}
        self._owed_delay: dict[int, float] = {}
        self._job_threads: dict[int, threading.Thread] = {}
        self._jobs_left = 0

        self._inbox: deque[WorkerMessage] = deque(maxlen=inbox_size)
        self._outbox: queue.Queue[tuple[bytes, list[bytes]]] = queue.Queue()
        self._ctx = zmq.Context.instance()
        self._router: zmq.Socket | None = None
        self._wake_tx: zmq.Socket | None = None
        self._wake_lock = threading.Lock()
        self._control_thread: threading.Thread | None = None
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
        self._check_slots()
        try:
            self._open_control_service()
            self._spawn_job_threads()
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
            self._stopping = True
            self._changed.notify_all()  # wakes job threads waiting out a backoff
        if self._router is not None:
            self.broadcast({"type": protocol.STOP, "reason": reason})
        job_threads = list(self._job_threads.values())
        if job_threads:
            unreachable = self._unreachable_workers()
            if unreachable:
                # A worker that never registered cannot be told to stop, so its job
                # cannot end by itself: let the others exit cleanly, then cancel.
                self._wait_exited(timeout)
            with self._lock:
                done = self._job_done
            deadline = time.monotonic() + (timeout if done or not unreachable else 0)
            for thread in job_threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            if any(t.is_alive() for t in job_threads):
                why = (
                    f"workers {unreachable} never registered"
                    if unreachable
                    else f"workers did not stop within {timeout} s"
                )
                log.info("%s: %s; cancelling Spark job group %s", self.name, why, self.job_group)
                self.sc.cancelJobGroup(self.job_group)
                deadline = time.monotonic() + max(10.0, timeout)
                for thread in job_threads:
                    thread.join(max(0.0, deadline - time.monotonic()))
                if any(t.is_alive() for t in job_threads):
                    log.warning("%s: Spark jobs still running after cancel", self.name)
        leftovers = self._wait_local_pids_gone(5.0)
        if leftovers:
            log.warning("%s: worker processes still alive after stop: %s", self.name, leftovers)
        self._close_control_service()
        self._release_slots()
        self._closed = True
        return leftovers

    def __enter__(self) -> WorkerLauncher:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ================================================================= talking

    def send(self, worker: int, msg: Message) -> bool:
        """Send a dict to the current attempt of ``worker``; False if it has not
        registered (zmq drops a message to a worker whose process has died)."""
        with self._lock:
            route = self._routes.get(worker)
        if route is None:
            return False
        self._queue_send(route, msg)
        return True

    def broadcast(self, msg: Message, exclude: int | None = None) -> None:
        """Send a dict to every registered worker (but ``exclude``)."""
        with self._lock:
            routes = [r for i, r in self._routes.items() if i != exclude]
        for route in routes:
            self._queue_send(route, msg)

    def recv(self, timeout: float | None = None) -> WorkerMessage | None:
        """The oldest unread worker message or launcher event, or None after
        ``timeout`` seconds. Unused when an ``on_message`` handler was given."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self._inbox:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._changed.wait(remaining)
            return self._inbox.popleft()

    def restart_worker(self, worker: int, reason: str = "restart requested") -> bool:
        """Have Spark kill the worker's task attempt; Spark then runs the task again.

        Works on any cluster (no pid needed), and a killed task does not count
        against Spark's task failure limit. Slower than a crash: Spark interrupts the
        task and kills the Python worker after ``spark.python.task.killTimeout`` (2 s).
        """
        with self._lock:
            info = self._workers.get(worker)
        if info is None or info.task_attempt_id is None:
            return False
        return bool(self.sc._jsc.sc().killTaskAttempt(info.task_attempt_id, True, reason))

    # ================================================================= state

    @property
    def workers(self) -> dict[int, WorkerInfo]:
        """Snapshot: worker index -> its current registration."""
        with self._lock:
            return dict(self._workers)

    @property
    def job_error(self) -> BaseException | None:
        """The error a worker's Spark job ended with when the launcher gave up on it
        (during start, or once Spark itself stopped), if it ended with one."""
        with self._lock:
            return self._job_error

    @property
    def running(self) -> bool:
        """True while the workers' Spark jobs run or will be started again: from start
        until stop, or until the launcher gave up (see ``job_error``)."""
        with self._lock:
            return self._started and not self._job_done

    @property
    def restarts(self) -> dict[int, int]:
        """Worker index -> how many times it was started again since ``start``."""
        with self._lock:
            return {i: r.restarts for i, r in self._restarts.items()}

    def wait_for_registration(
        self, worker: int, min_attempt: int = 0, timeout: float = 30.0
    ) -> WorkerInfo:
        """Block until ``worker`` is registered with attempt >= ``min_attempt``.
        Raises SparkJobFailed if the job ends first, TimeoutError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                info = self._workers.get(worker)
                if info is not None and info.attempt >= min_attempt:
                    return info
                if self._job_done:
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

    def _check_slots(self) -> None:
        """Refuse at once when Spark cannot run every worker at the same time.

        On a local master the count is final. On a cluster, executors may still be
        registering right after the session started, so we wait for them up to
        ``slot_wait`` seconds (default: a third of the start timeout). With dynamic
        allocation Spark adds executors only once tasks are pending, so we leave it to
        the start timeout.
        """
        conf = self.sc.getConf()
        dynamic = (conf.get("spark.dynamicAllocation.enabled") or "false").lower() == "true"
        deadline = time.monotonic() + self._slot_wait
        while True:
            with _reservations_lock:
                held = _reservations.setdefault(id(self.sc), {})
                info = slot_info(self.sc, reserved=sum(held.values()))
                if dynamic or info.free >= self.num_workers:
                    held[self.job_group] = self.num_workers
                    return
            if is_local_master(self.sc.master) or time.monotonic() >= deadline:
                raise NotEnoughSlotsError(
                    describe_shortage(self.name, self.num_workers, info),
                    needed=self.num_workers,
                    available=info.free,
                    master=info.master,
                )
            time.sleep(0.5)

    def _release_slots(self) -> None:
        with _reservations_lock:
            _reservations.get(id(self.sc), {}).pop(self.job_group, None)

    def _open_control_service(self) -> None:
        bind_ip, advertised = self._control_hosts()
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        port = router.bind_to_random_port(f"tcp://{bind_ip}")
        wake_address = f"inproc://tupletree-launcher-{id(self)}"
        wake_rx = self._ctx.socket(zmq.PULL)
        wake_rx.bind(wake_address)
        wake_tx = self._ctx.socket(zmq.PUSH)
        wake_tx.connect(wake_address)
        self._router, self._wake_tx = router, wake_tx
        self.control_address = make_control_address(f"tcp://{advertised}:{port}", self._secret)
        self._control_thread = threading.Thread(
            target=self._control_loop,
            args=(router, wake_rx),
            name=f"tupletree-control-{self.name}",
            daemon=True,
        )
        self._control_thread.start()

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

    def _spawn_job_threads(self) -> None:
        from pyspark import InheritableThread

        self._jobs_left = self.num_workers
        for index in range(self.num_workers):
            thread = InheritableThread(
                target=self._run_worker_jobs,
                args=(index,),
                name=f"tupletree-job-{self.name}-w{index}",
                daemon=True,
            )
            self._job_threads[index] = thread
            thread.start()

    def _run_worker_jobs(self, index: int) -> None:
        """Run worker ``index``'s Spark job; while the topology lives, run it again each
        time it ends (after the backoff the restart policy gives)."""
        base = 0
        final: Message | None = None
        while True:
            error = self._run_one_job(index, base)
            restart: Restart | None = None
            with self._changed:
                if self._stopping:
                    break
                if not self._all_registered or self._spark_stopped():
                    # During start a worker that cannot run is an error at once (start
                    # raises it); and with Spark itself gone there is nowhere to run.
                    self._job_done = True
                    self._job_error = error or RuntimeError(
                        f"worker {index}'s Spark task ended before the topology started"
                    )
                    self._changed.notify_all()
                    text = _summarize_spark_error(self._job_error)
                    final = {"type": protocol.JOB_ENDED, "error": text, "requested": False}
                    break
                # At least this job's first attempt died, even if its start was not heard.
                attempt = max(self._max_attempt.get(index, base), base)
                reason = self._death_reason(index, attempt, error)
                restart = self._count_death(index, attempt, time.monotonic(), reason)
                base = max(base, attempt + 1)
                self._owed_delay.pop(index, None)  # waited for here, not by the task
            if restart is not None:
                self._report_restart(restart)
            delay = restart.delay if restart is not None else 0.0
            with self._changed:
                deadline = time.monotonic() + delay
                while not self._stopping and time.monotonic() < deadline:
                    self._changed.wait(deadline - time.monotonic())
                if self._stopping:
                    break
        with self._changed:
            self._jobs_left -= 1
            last = self._jobs_left == 0
            if last and final is None:
                self._job_done = True
                final = {"type": protocol.JOB_ENDED, "error": None, "requested": True}
            self._changed.notify_all()
        if final is not None:
            self._deliver(WorkerMessage(None, None, final))

    def _run_one_job(self, index: int, attempt_base: int) -> BaseException | None:
        # In PySpark's pinned-thread mode (the default) job-group properties are per
        # thread, so they are set here, on the thread that submits the job.
        try:
            self.sc.setJobGroup(
                self.job_group,
                f"tupletree {self.name}: worker {index}",
                interruptOnCancel=True,
            )
            fn = task_function(self._worker_main, self.control_address, index, attempt_base)
            self.sc.parallelize([index], 1).mapPartitions(fn).collect()
        except BaseException as exc:
            return exc
        return None

    def _spark_stopped(self) -> bool:
        try:
            return self.sc._jsc is None or bool(self.sc._jsc.sc().isStopped())
        except Exception:
            return True

    def _death_reason(self, index: int, attempt: int, job_error: BaseException | None) -> str:
        """Why attempt ``attempt`` of a worker ended, as well as the driver can tell."""
        fatal = self._last_fatal.get(index)
        if fatal is not None and fatal[0] == attempt:
            return f"it raised {fatal[1]}"
        if job_error is not None:
            return f"its Spark job failed: {_summarize_spark_error(job_error)}"
        if index in self._exited:
            return "its worker code returned while the topology is running"
        return "its Spark task ended while the topology is running"

    def _count_death(self, index: int, attempt: int, now: float, reason: str) -> Restart | None:
        """Record a death (under the lock); the restart decision, None if known already."""
        started = self._attempt_started.get(index)
        lived = now - started[1] if started is not None and started[0] == attempt else 0.0
        return self._restarts[index].died(attempt, max(0.0, lived), reason)

    def _report_restart(self, restart: Restart) -> None:
        event = {
            "type": protocol.WORKER_RESTARTING,
            "reason": restart.reason,
            "lived": restart.lived,
            "delay": restart.delay,
            "restarts": restart.restarts,
            "crash_loop": restart.crash_loop,
            "quick_deaths": restart.quick_deaths,
        }
        log.warning(
            "%s: worker %d (attempt %d) died after %.1f s: %s; starting it again in %.1f s%s",
            self.name,
            restart.worker,
            restart.died_attempt,
            restart.lived,
            restart.reason,
            restart.delay,
            " (crash loop)" if restart.crash_loop else "",
        )
        self._deliver(WorkerMessage(restart.worker, restart.died_attempt, event))

    def _wait_started(self) -> dict[int, WorkerInfo]:
        deadline = time.monotonic() + self._start_timeout
        with self._changed:
            while not self._all_registered:
                if self._job_done:
                    raise self._job_failure(
                        f"{self.name}: the Spark job ended before all "
                        f"{self.num_workers} workers registered"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(self.num_workers)) - set(self._workers))
                    break
                self._changed.wait(min(remaining, 0.5))
            else:
                return dict(self._workers)
        raise WorkerStartTimeout(
            f"{self.name}: workers {missing} did not register within "
            f"{self._start_timeout} s: {self._start_report(missing)}",
            missing=missing,
        )

    def _start_report(self, missing: list[int]) -> str:
        """Why each missing worker is missing, as far as the driver can tell."""
        with self._lock:
            tasks = dict(self._tasks)
            errors = dict(self._worker_errors)
        parts = []
        for i in missing:
            task = tasks.get(i)
            if i in errors:
                parts.append(f"worker {i} failed: {errors[i]}")
            elif task is not None:
                parts.append(
                    f"worker {i}'s task (attempt {task['attempt']}, pid {task['pid']} on "
                    f"{task['host']}) is running but worker_main has not registered"
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
        errors = dict(self._worker_errors)
        detail = ""
        if errors:
            worst = next(iter(errors.items()))
            detail = f"; worker {worst[0]} reported: {worst[1]}"
        elif self._job_error is not None:
            detail = f": {_summarize_spark_error(self._job_error)}"
        return SparkJobFailed(f"{what}{detail}", worker_errors=errors)

    # ================================================================= control thread

    def _queue_send(self, route: bytes, msg: Message) -> None:
        if self._closed:
            return
        self._outbox.put((route, protocol.encode(self._secret, msg)))
        self._wake_control_thread()

    def _wake_control_thread(self) -> None:
        with self._wake_lock:
            if self._wake_tx is not None:
                with contextlib.suppress(zmq.ZMQError):
                    self._wake_tx.send(b"", zmq.NOBLOCK)

    def _control_loop(self, router: zmq.Socket, wake_rx: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        poller.register(wake_rx, zmq.POLLIN)
        next_ping = time.monotonic() + self._ping_interval
        try:
            while not self._closed:
                events = dict(poller.poll(int(self._ping_interval * 1000)))
                if wake_rx in events:
                    with contextlib.suppress(zmq.Again):
                        while True:
                            wake_rx.recv(zmq.NOBLOCK)
                self._flush_outbox(router)
                if router in events:
                    self._drain_router(router)
                now = time.monotonic()
                if now >= next_ping:
                    next_ping = now + self._ping_interval
                    with self._lock:
                        routes = list(self._routes.values())
                    ping = protocol.encode(self._secret, {"type": protocol.PING})
                    for route in routes:
                        router.send_multipart([route, *ping])
                    self._check_hung(now)
        except zmq.ContextTerminated:
            pass
        except Exception:
            log.exception("%s: control loop crashed", self.name)
        finally:
            self._flush_outbox(router)
            router.close(linger=0)
            wake_rx.close(linger=0)

    def _flush_outbox(self, router: zmq.Socket) -> None:
        while True:
            try:
                route, frames = self._outbox.get_nowait()
            except queue.Empty:
                return
            router.send_multipart([route, *frames])

    def _drain_router(self, router: zmq.Socket) -> None:
        while True:
            try:
                route, *frames = router.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                index, attempt, msg = protocol.decode(self._secret, frames)
            except (protocol.BadFrame, TypeError, ValueError) as exc:
                log.warning("%s: dropped a control frame: %s", self.name, exc)
                continue
            if msg.get("type") == protocol.TASK_STARTED:
                delay = self._task_started(index, attempt, msg)
                if msg.get("want_ack"):
                    reply = {**_ACK, "delay": delay}
                    router.send_multipart([route, *protocol.encode(self._secret, reply)])
                continue
            if msg.get("want_ack"):
                router.send_multipart([route, *protocol.encode(self._secret, _ACK)])
            if msg.get("type") == protocol.REGISTER:
                self._handle_register(router, route, index, attempt, msg)
            else:
                self._handle_message(index, attempt, msg)

    def _handle_register(
        self, router: zmq.Socket, route: bytes, index: int, attempt: int, msg: Message
    ) -> None:
        if not isinstance(index, int) or not 0 <= index < self.num_workers:
            log.warning("%s: registration from unknown worker index %r", self.name, index)
            return
        now = time.monotonic()
        info = WorkerInfo(
            index=index,
            attempt=attempt,
            pid=msg["pid"],
            host=msg["host"],
            address=msg["address"],
            task_attempt_id=msg.get("task_attempt_id"),
            registered_at=now,
            info=dict(msg.get("info") or {}),
        )
        with self._changed:
            previous = self._workers.get(index)
            if previous is not None and previous.attempt > attempt:
                stale = True
            else:
                stale = False
                old_route = self._routes.get(index)
                self._workers[index] = info
                self._routes[index] = route
                self._exited.discard(index)
                self._seen_pids.add((info.host, info.pid))
                self._max_attempt[index] = max(attempt, self._max_attempt.get(index, attempt))
                if self._attempt_started.get(index, (-1, 0.0))[0] < attempt:
                    self._attempt_started[index] = (attempt, now)  # its task_started was lost
                first_full = not self._all_registered and len(self._workers) == self.num_workers
                if first_full:
                    self._all_registered = True
                peers = {i: w.address for i, w in self._workers.items()}
                routes = dict(self._routes)
                self._changed.notify_all()
        if stale:  # an older attempt that outlived its replacement: retire it
            stop = {"type": protocol.STOP, "reason": f"attempt {attempt} was replaced"}
            router.send_multipart([route, *protocol.encode(self._secret, stop)])
            return
        welcome = {
            "type": protocol.WELCOME,
            "num_workers": self.num_workers,
            "peers": peers,
            "assignment": self._assignments.get(index),
            "attempt": attempt,
        }
        router.send_multipart([route, *protocol.encode(self._secret, welcome)])
        if self._stopping:  # re-run by Spark while we shut down: stop it at once
            stop = {"type": protocol.STOP, "reason": "launcher is stopping"}
            router.send_multipart([route, *protocol.encode(self._secret, stop)])
        restarted = previous is not None
        if restarted and old_route is not None and old_route != route:
            stop = {"type": protocol.STOP, "reason": f"replaced by attempt {attempt}"}
            router.send_multipart([old_route, *protocol.encode(self._secret, stop)])
        if first_full:
            update = {"type": protocol.PEERS, "peers": peers, "changed": sorted(peers)}
            targets = [r for i, r in routes.items() if i != index]
        elif restarted:
            update = {"type": protocol.PEERS, "peers": peers, "changed": [index]}
            targets = [r for i, r in routes.items() if i != index]
        else:
            targets = []
        if targets:
            frames = protocol.encode(self._secret, update)
            for target in targets:
                router.send_multipart([target, *frames])
        event = {
            "type": protocol.WORKER_REGISTERED,
            "restarted": restarted,
            "previous_attempt": previous.attempt if previous else None,
            "pid": info.pid,
            "host": info.host,
            "address": info.address,
        }
        self._deliver(WorkerMessage(index, attempt, event))

    def _handle_message(self, index: int, attempt: int, msg: Message) -> None:
        with self._changed:
            current = self._workers.get(index)
            if current is not None and attempt < current.attempt:
                return  # from an attempt that has been replaced
            kind = msg.get("type")
            if kind == protocol.ERROR and msg.get("fatal"):
                self._worker_errors[index] = str(msg.get("error"))
                self._last_fatal[index] = (attempt, str(msg.get("error")))
                self._changed.notify_all()
            elif kind not in _NOT_FROM_THE_LOOP:
                self._last_beat[index] = (attempt, time.monotonic())
            elif kind == protocol.EXITING:
                self._exited.add(index)
                self._changed.notify_all()
        self._deliver(WorkerMessage(index, attempt, msg))

    def _task_started(self, index: int, attempt: int, msg: Message) -> float:
        """A worker's task started: count the death of the attempt before it (Spark
        re-ran the task) and answer how long the task should wait before starting."""
        if not isinstance(index, int) or not 0 <= index < self.num_workers:
            log.warning("%s: task start from unknown worker index %r", self.name, index)
            return 0.0
        now = time.monotonic()
        restart: Restart | None = None
        with self._changed:
            self._tasks[index] = {**msg, "attempt": attempt}
            self._seen_pids.add((msg["host"], msg["pid"]))
            self._max_attempt[index] = max(attempt, self._max_attempt.get(index, attempt))
            if self._all_registered and not self._stopping and attempt > 0:
                reason = self._death_reason(index, attempt - 1, None)
                if reason.startswith("its Spark task ended"):
                    reason = "its process died without a word (killed, or out of memory?)"
                restart = self._count_death(index, attempt - 1, now, reason)
            delay = restart.delay if restart is not None else self._owed_delay.pop(index, 0.0)
            self._attempt_started[index] = (attempt, now + delay)
            self._changed.notify_all()
        if restart is not None:
            self._report_restart(restart)
        self._deliver(WorkerMessage(index, attempt, {**msg, "delay": delay}))
        return delay

    def _check_hung(self, now: float) -> None:
        """Kill the workers whose loops went silent for longer than ``worker_timeout``
        (through Spark, which then re-runs them); a second kill, of the process, if the
        first did not take within the timeout."""
        timeout = self._worker_timeout
        if timeout is None:
            return
        kills: list[tuple[int, int, Message | None, bool]] = []
        restarts: list[Restart] = []
        with self._lock:
            if self._stopping or not self._all_registered:
                return
            for index, (attempt, started_at) in self._attempt_started.items():
                killing = self._killing.get(index)
                if killing is not None and killing[0] == attempt:
                    if now - killing[1] > timeout:  # Spark's kill did not take
                        self._killing[index] = (attempt, now)
                        kills.append((index, attempt, self._tasks.get(index), True))
                    continue
                if attempt <= self._restarts[index].counted_through:
                    continue  # known dead: its job is being started again
                beat = self._last_beat.get(index)
                last = beat[1] if beat is not None and beat[0] == attempt else None
                silent = hung_for(
                    now, started_at, last, timeout=timeout, start_timeout=self._start_timeout
                )
                if silent is None:
                    continue
                reason = (
                    f"it hung: no report from its loop for {silent:.0f} s "
                    f"(supervisor.worker.timeout.secs {timeout:g}); killed"
                )
                restart = self._count_death(index, attempt, now, reason)
                if restart is not None:
                    restarts.append(restart)
                    self._owed_delay[index] = restart.delay
                self._killing[index] = (attempt, now)
                kills.append((index, attempt, self._tasks.get(index), False))
        for restart in restarts:
            self._report_restart(restart)
        for index, attempt, task, hard in kills:
            self._kill(index, attempt, task, hard)

    def _kill(self, index: int, attempt: int, task: Message | None, hard: bool) -> None:
        """Kill attempt ``attempt`` of a worker: through Spark (any cluster), or, ``hard``
        or without a Spark task id, its process when it runs on this host."""
        if task is None or task.get("attempt") != attempt:
            return  # that attempt's task is not known (or no longer current)
        task_attempt_id = task.get("task_attempt_id")
        if not hard and task_attempt_id is not None:
            reason = f"tupletree {self.name}: worker {index} attempt {attempt} hung"
            try:
                if self.sc._jsc.sc().killTaskAttempt(task_attempt_id, True, reason):
                    return
            except Exception as exc:
                log.warning("%s: could not kill worker %d's task: %s", self.name, index, exc)
        pid = task.get("pid")
        if task.get("host") == socket.gethostname() and isinstance(pid, int) and pid_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _deliver(self, message: WorkerMessage) -> None:
        if self._on_message is not None:
            try:
                self._on_message(message)
            except Exception:
                log.exception("%s: on_message handler failed", self.name)
            return
        with self._changed:
            self._inbox.append(message)  # bounded: the oldest goes when it is full
            self._changed.notify_all()

    # ================================================================= shutdown

    def _unreachable_workers(self) -> list[int]:
        with self._lock:
            return [i for i in range(self.num_workers) if i not in self._routes]

    def _wait_exited(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self._job_done and not set(self._routes) <= self._exited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._changed.wait(remaining)

    def _wait_local_pids_gone(self, timeout: float) -> list[int]:
        reuse = (self.sc.getConf().get("spark.python.worker.reuse") or "true").lower()
        if reuse == "true":
            return []  # finished workers idle in Spark's pool by design
        here = {socket.gethostname()}
        with self._lock:
            pids = [pid for host, pid in self._seen_pids if host in here]
        return wait_pids_gone(pids, timeout)

    def _close_control_service(self) -> None:
        self._closed = True
        self._wake_control_thread()
        if self._control_thread is not None:
            self._control_thread.join(5.0)
        with self._wake_lock:
            if self._wake_tx is not None:
                self._wake_tx.close(linger=0)
                self._wake_tx = None


def wait_pids_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` s for these local processes to exit; the ones still alive."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live (non-zombie) process on this host."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _summarize_spark_error(exc: BaseException) -> str:
    """The useful line of a Py4J-wrapped Spark job failure (the full text is a page of
    Java stack): Spark's 'Job aborted ...' reason, else the Python exception's last
    line, else the first line."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "Job aborted" in ln or "cancelled" in ln.lower():
            return ln[:500]
    for ln in reversed(lines):
        if ln.startswith(("org.apache.spark.api.python.PythonException", "Traceback")):
            continue
        if ":" in ln and not ln.startswith("at "):
            return ln[:500]
    return (lines[0] if lines else repr(exc))[:500]
