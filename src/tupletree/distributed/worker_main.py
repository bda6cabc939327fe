"""The body of a topology worker, run by the driver's launcher (inside a Spark task).

``TopologyWorkerMain`` is the picklable ``worker_main`` handed to the WorkerLauncher.
It binds its data socket, registers with the driver, builds the same ``Worker``
LocalCluster uses for its share of the tasks (remote tasks reached through the
Transport, also its ``link``), says ``Ready`` and runs the loop until the driver says
stop. It starts inactive: the driver answers ``Ready`` with ``Activate`` when the
topology is active.

    control messages -> ``worker.step(now)`` (timers, frames in, a round, frames out)
    -> report metrics every REPORT_SECS -> when idle, wait for a frame, a driver's
    message, a timer or the next report, whichever comes first.

On ``Stop`` the spouts are deactivated and the worker drains what it holds (bounded by
DRAIN_SECS) before closing its tasks, so a kill does not cut trees in half needlessly.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import zmq

from tupletree.config import Config
from tupletree.distributed.control import Activate, Deactivate, Metrics, Peers, Ready, data_key
from tupletree.runtime.clock import RealClock
from tupletree.runtime.error_log import MAX_ERROR_CHARS, safe_str
from tupletree.runtime.gc_tuning import worker_gc
from tupletree.runtime.memory import resident_bytes
from tupletree.runtime.worker import IDLE_WAIT_LONGEST_SECS, Worker, pickled_components

REPORT_SECS = 0.5
DRAIN_SECS = 2.0
# The driver pings every second; a worker that hears nothing for this long ends with
# DriverLost (reported, and its task fails so that Spark runs it again).
DRIVER_TIMEOUT_SECS = 30.0


class TopologyWorkerMain:
    """``worker_main(index, attempt, control_address)`` for one topology."""

    def __init__(
        self,
        name: str,
        topology_blob: bytes,
        conf: dict[str, Any],
        placement: dict[int, int],
        start_timeout: float,
        driver_timeout: float = DRIVER_TIMEOUT_SECS,
    ) -> None:
        self.name = name
        self.topology_blob = topology_blob
        self.conf = conf
        self.placement = placement
        self.start_timeout = start_timeout  # how long the driver waits for every worker
        self.driver_timeout = driver_timeout  # silence after which the driver is lost

    def __call__(self, index: int, attempt: int, control_address: str) -> None:
        from pyspark import cloudpickle

        from tupletree.distributed.control_client import (
            ControlClient,
            DriverLost,
            advertise_host,
            parse_control_address,
        )
        from tupletree.distributed.transport import Transport

        topology = cloudpickle.loads(self.topology_blob)
        placement = self.placement
        context = zmq.Context.instance()
        with ControlClient(
            control_address, index, attempt, driver_timeout=self.driver_timeout
        ) as control:
            worker_ref: list[Worker] = []

            def unserializable(item: Any, exc: BaseException) -> None:
                worker_ref[0].fail_unserializable(item, exc)

            def bad_frame(exc: BaseException) -> None:
                worker_ref[0].report_error(
                    "dropped a frame from a peer that could not be read "
                    f"(its tuples' trees will time out and be replayed): "
                    f"{type(exc).__name__}: {exc}"
                )

            def rejected(report: str) -> None:
                if worker_ref:
                    worker_ref[0].report_error(report)

            _, secret = parse_control_address(control_address)
            transport = Transport(
                context,
                advertise_host(control_address),
                data_key(secret),
                unserializable,
                bad_frame,
                on_rejected=rejected,
                same_host_ipc=self.conf[Config.TUPLETREE_WORKER_SAME_HOST_IPC],
            )
            apply_transfer_batching(transport, self.conf)
            forward = _ForwardLogs(control)
            logging.getLogger().addHandler(forward)
            mine = local_tasks(placement, index)
            try:
                control.register(transport.address)
                worker = Worker(
                    self.name,
                    topology,
                    self.conf,
                    RealClock().now,
                    local_tasks=mine,
                    remote_inbox=lambda t: transport.remote_inbox(t, placement[t]),
                    components=pickled_components(topology, cloudpickle.dumps),
                    link=transport,
                )
                worker_ref.append(worker)
                # As long as the driver waits for a start: peers that start late are
                # not a reason to fail this task (each failure uses a Spark retry).
                transport.set_peers(control.wait_for_peers(self.start_timeout), index)
                # Inactive: the driver activates it if the topology is active now.
                worker.start(active=False)
                control.send(Ready())
                with worker_gc():
                    _loop(worker, transport, control, index)
                if control.driver_lost is not None:
                    # Not a clean end: reported by the task wrapper, and the task fails
                    # so that Spark runs it again.
                    raise DriverLost(control.driver_lost)
            finally:
                logging.getLogger().removeHandler(forward)
                transport.close()


class _ForwardLogs(logging.Handler):
    """Ships this worker's log records (WARNING and up, the user's loggers included) to
    the driver, where ``SparkCluster.logs(name)`` keeps them and the driver's logging
    shows them. The executor's own stderr still gets them too.

    tupletree's own records are skipped (task errors already reach the driver through
    the metrics reports, as ``cluster.errors``), and at most MAX_PER_SEC records a
    second are sent, so a noisy bolt cannot flood the control channel; the number
    dropped is sent with the next record that goes out."""

    MAX_PER_SEC = 100

    def __init__(self, control: Any) -> None:
        super().__init__(logging.WARNING)
        self.control = control
        self.window = 0
        self.sent = 0
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "tupletree" or record.name.startswith("tupletree."):
            return
        second = int(record.created)
        if second != self.window:
            self.window, self.sent = second, 0
        if self.sent >= self.MAX_PER_SEC:
            self.dropped += 1
            return
        self.sent += 1
        line = safe_str(f"{record.name}: {self.format(record)}", MAX_ERROR_CHARS)
        if self.dropped:
            line += f" ({self.dropped} earlier records dropped: over {self.MAX_PER_SEC}/s)"
            self.dropped = 0
        try:
            self.control.log(line, record.levelname)
        except Exception:
            self.handleError(record)


def apply_transfer_batching(transport: Any, conf: dict[str, Any]) -> None:
    """A validated config's ``topology.transfer.batch.size`` and
    ``topology.batch.flush.interval.millis``, onto the worker's Transport."""
    transport.frame_items = conf[Config.TOPOLOGY_TRANSFER_BATCH_SIZE]
    transport.linger_secs = conf[Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS] / 1000


def local_tasks(placement: dict[int, int], index: int) -> list[int]:
    """The tasks ``placement`` (task -> worker) gives worker ``index``."""
    return sorted(t for t, w in placement.items() if w == index)


def idle_wait_ms(worker: Worker, now: float, longest: float) -> int:
    """``Worker.idle_wait`` in whole milliseconds for a zmq poll, rounded up: pyzmq
    truncates a float timeout, and a wait of 0.4 ms cut to 0 would spin."""
    return math.ceil(worker.idle_wait(now, longest) * 1000)


def _loop(worker: Worker, transport: Any, control: Any, index: int) -> None:
    clock_now = worker.now
    poller = zmq.Poller()
    poller.register(transport.socket, zmq.POLLIN)
    arrivals = control.arrivals
    poller.register(arrivals, zmq.POLLIN)
    # While the transport is congested it reads no frame, so a frame waiting must not
    # end the wait (the loop would spin): then only the driver's messages do.
    driver_only = zmq.Poller()
    driver_only.register(arrivals, zmq.POLLIN)
    last_report = -math.inf  # the first report goes with the first step, whatever the clock
    sent = (0, 0)  # errors and timed-out trees reported so far
    idle_rounds = 0
    draining_since: float | None = None
    while True:
        msg = control.recv(0)
        while msg is not None:
            if isinstance(msg, Activate):
                worker.activate()
            elif isinstance(msg, Deactivate):
                worker.deactivate()
            elif isinstance(msg, Peers):
                transport.set_peers(msg.peers, index)
            msg = control.recv(0)
        # Set by the client for a Stop and for a driver gone silent alike.
        if control.stop_requested.is_set() and draining_since is None:
            worker.deactivate()
            draining_since = clock_now()
        now = clock_now()
        busy = worker.step(now)
        idle_rounds = 0 if busy else idle_rounds + 1
        if now - last_report >= REPORT_SECS or (draining_since is not None and idle_rounds):
            sent = _report(worker, transport, control, sent, idle_rounds > 0)
            last_report = now
            # Refused data frames are reported on this timer too, not only when the
            # next bad frame arrives.
            due = transport.rejections.due(now)
            if due is not None:
                worker.report_error(due)
        if draining_since is not None and (
            (idle_rounds > 2 and not transport.blocked()) or now - draining_since > DRAIN_SECS
        ):
            break
        if not busy:
            # Until the next report at most: a driver's message ends the wait (the
            # control client wakes ``arrivals``), and so does a frame. While draining,
            # a few short waits, so that a Stop ends in a few idle rounds.
            longest = last_report + REPORT_SECS - now
            if draining_since is not None:
                longest = min(longest, IDLE_WAIT_LONGEST_SECS)
            waiting = driver_only if transport.congested() else poller
            if dict(waiting.poll(idle_wait_ms(worker, now, longest))).get(arrivals):
                control.clear_arrivals()
    worker.shutdown()
    _report(worker, transport, control, sent, idle=True)


def _report(
    worker: Worker,
    transport: Any,
    control: Any,
    sent: tuple[int, int],
    idle: bool,
) -> tuple[int, int]:
    """Send the driver this worker's metrics, new errors and newly timed-out trees;
    return how many of each have been sent."""
    errors_sent, timed_out_sent = sent
    control.send(
        Metrics(
            snapshot=worker.metrics_snapshot(),
            errors=worker.errors_since(errors_sent),
            timed_out=worker.timed_out.since(timed_out_sent),
            idle=idle and not transport.blocked(),
            sent_to=dict(transport.sent_to),
            received_from=dict(transport.received_from),
            rss_bytes=resident_bytes(),
            refused={
                "control": control.frames_refused,
                "data": transport.rejections.total,
                "unreadable": transport.frames_unreadable,
            },
        )
    )
    return worker.error_count, worker.timed_out.count
