"""What an idle worker costs: wakes per second and CPU, for the worker loop's wait
(distributed/worker_main.py: ``Worker.idle_wait`` until the next report, the driver's
messages waking it) against the waits before: a plain 1 ms wait (until 2026-11-28,
stop 30) and ``Worker.idle_wait`` at most 20 ms (stop 30, when the driver's messages
could not wake the wait).

    python bench/idle_worker.py [seconds]

The worker holds one of two workers' share of the word count (bench/spark.py) and has
nothing to do: its spout inactive, as a bolt-only worker or one whose spouts wait at
max pending for acks is, and no frames arrive. Each mode runs for ``seconds`` (default
3) of wall time, the modes alternated twice; printed: wakes (steps) per second and the
process's CPU time over wall time. ``--instructions N`` instead runs N idle steps with
a zero wait, for ``valgrind --tool=callgrind``: instructions per wake are the
difference of two such runs over the difference of N.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zmq

from bench import spark as spark_bench
from bench import two_workers
from tupletree.distributed.scheduler import assign
from tupletree.distributed.transport import Transport
from tupletree.distributed.worker_main import REPORT_SECS, idle_wait_ms, local_tasks
from tupletree.runtime.clock import RealClock
from tupletree.runtime.worker import IDLE_WAIT_LONGEST_SECS, Worker, make_layout


def idle_worker() -> tuple[Worker, Transport]:
    topology = spark_bench.topology(1000, 2, corpus="zipf", batch=True)
    conf = two_workers.conf(2)
    placement = assign(make_layout(topology, conf), 2)
    transport = Transport(zmq.Context.instance(), "127.0.0.1", two_workers.KEY, lambda i, e: None)
    worker = Worker(
        "idle",
        topology,
        conf,
        RealClock().now,
        local_tasks=local_tasks(placement, 0),
        remote_inbox=lambda task: transport.remote_inbox(task, placement[task]),
        link=transport,
    )
    worker.start(active=False)
    return worker, transport


# The waits compared: a fixed 1 ms; Worker.idle_wait at most 20 ms; Worker.idle_wait
# until the next report, as distributed/worker_main.py waits now.
MODES = (
    ("1 ms wait", "fixed"),
    ("idle_wait, 20 ms cap", "capped"),
    ("idle_wait to report", "report"),
)


def run(worker: Worker, transport: Transport, secs: float, mode: str) -> tuple[float, float]:
    """Wakes per second and CPU share over ``secs`` of the loop, waiting as ``mode``
    (MODES) says."""
    poller = zmq.Poller()
    poller.register(transport.socket, zmq.POLLIN)
    wakes = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    last_report = worker.now()
    while time.perf_counter() - wall0 < secs:
        now = worker.now()
        if now - last_report >= REPORT_SECS:
            last_report = now  # worker_main sends its metrics here
        if not worker.step(now):
            if mode == "fixed":
                wait = 1
            elif mode == "capped":
                wait = idle_wait_ms(worker, now, IDLE_WAIT_LONGEST_SECS)
            else:
                wait = idle_wait_ms(worker, now, last_report + REPORT_SECS - now)
            poller.poll(wait)
        wakes += 1
    wall = time.perf_counter() - wall0
    return wakes / wall, (time.process_time() - cpu0) / wall


def main() -> None:
    worker, transport = idle_worker()
    if "--instructions" in sys.argv:
        n = int(sys.argv[sys.argv.index("--instructions") + 1])
        for _ in range(n):
            if not worker.step(worker.now()):
                idle_wait_ms(worker, worker.now(), IDLE_WAIT_LONGEST_SECS)
        transport.close()
        return
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    print(f"an idle worker (spout inactive, no input), {secs:g} s per run, alternated:")
    for _ in range(2):
        for label, mode in MODES:
            rate, cpu = run(worker, transport, secs, mode)
            print(f"  {label:22} {rate:8,.1f} wakes/s, CPU {cpu:6.1%} of a core")
    transport.close()


if __name__ == "__main__":
    main()
