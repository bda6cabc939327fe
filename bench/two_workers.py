"""The Spark benchmark's 2-worker word count without Spark: two forked processes, each a
``Worker`` with its share of the tasks (the same placement SparkCluster uses) and a
``Transport`` to the other, driven by the same loop shape as spark/worker_process.py.

    python bench/two_workers.py [sentences]

Used to profile the cross-worker path: under ``valgrind --tool=callgrind
--trace-children=yes`` each worker writes its own profile. Prints sentences/s and the
frames each worker sent.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zmq

from bench import spark as spark_bench
from tupletree import Config
from tupletree.config import validate
from tupletree.runtime.clock import RealClock
from tupletree.runtime.worker import Worker, make_layout
from tupletree.spark.scheduler import assign
from tupletree.spark.transport import Transport
from tupletree.spark.worker_process import IDLE_WAIT_MS, local_tasks, worker_gc, worker_round

WORKERS = 2


def conf() -> dict:
    return validate(
        {
            Config.TOPOLOGY_WORKERS: WORKERS,
            Config.TOPOLOGY_ACKER_EXECUTORS: WORKERS,
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000,
        }
    )


def run_worker(index: int, total: int, addresses: dict, ready: mp.Barrier, done: mp.Value) -> None:
    topology = spark_bench.topology(total // WORKERS, WORKERS)
    placement = assign(make_layout(topology, conf()), WORKERS)
    transport = Transport(zmq.Context.instance(), "127.0.0.1", lambda item, exc: None)
    transport.frame_items = int(os.environ.get("FRAME_ITEMS", transport.frame_items))
    transport.linger_secs = float(os.environ.get("LINGER_SECS", transport.linger_secs))
    addresses[index] = transport.address
    worker = Worker(
        "two",
        topology,
        conf(),
        RealClock().now,
        local_tasks=local_tasks(placement, index),
        remote_inbox=lambda t: transport.remote_inbox(t, placement[t]),
    )
    worker.external_backpressure = transport.blocked
    ready.wait()
    transport.set_peers(dict(addresses), index)
    worker.start(active=True)
    t0, wall0 = os.times(), time.perf_counter()
    with worker_gc():
        _loop(worker, transport, spouts_total=total // WORKERS, done=done)
    t1, wall = os.times(), time.perf_counter() - wall0
    user, system = t1.user - t0.user, t1.system - t0.system
    print(
        f"worker {index}: {transport.frames_sent:,} frames sent, CPU {user + system:.2f} s "
        f"(system {system:.2f}) in {wall:.2f} s ({(user + system) / wall:.0%})",
        flush=True,
    )
    transport.close()


def _loop(worker: Worker, transport: Transport, spouts_total: int, done: mp.Value) -> None:
    """spark/worker_process's loop without the driver: the same rounds, until every
    worker's spouts have heard back about all their sentences."""
    poller = zmq.Poller()
    poller.register(transport.socket, zmq.POLLIN)
    finished = False
    while done.value < WORKERS:
        busy = worker_round(worker, transport, worker.now())
        if not finished and _heard(worker) >= spouts_total:
            finished = True
            with done.get_lock():
                done.value += 1
        if not busy:
            poller.poll(IDLE_WAIT_MS)


def _heard(worker: Worker) -> int:
    """Sentences this worker's spouts have heard back about (acked or failed)."""
    return sum(ex.metrics.acked + ex.metrics.failed for ex in worker.spouts)


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    ctx = mp.get_context("fork")
    manager = ctx.Manager()
    addresses = manager.dict()
    ready = ctx.Barrier(WORKERS + 1)
    done = ctx.Value("i", 0)
    procs = [
        ctx.Process(target=run_worker, args=(i, total, addresses, ready, done))
        for i in range(WORKERS)
    ]
    for p in procs:
        p.start()
    ready.wait()
    start = time.perf_counter()
    while done.value < WORKERS:
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    print(f"{total / elapsed:,.0f} sentences/s ({WORKERS} workers, no Spark)")


if __name__ == "__main__":
    main()
