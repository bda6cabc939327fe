"""The Spark benchmark's 2-worker word count without Spark: two forked processes, each a
``Worker`` with its share of the tasks (the same placement SparkCluster uses) and a
``Transport`` to the other, driven by ``Worker.step`` as distributed/worker_main.py drives it.

    python bench/two_workers.py [sentences] [workers] [corpus] [batch] [pN] [tN] [cpu]

With ``workers`` 1 (default 2) it runs the same loop in one process with every task:
the one-worker figure to compare with, measured the same way. ``pN`` gives each
component N tasks and the topology N ackers (default: as many as workers): ``1 zipf
p2`` is one worker running the two-worker topology, all local, which tells what
parallelism 2 costs apart from what crossing workers costs. ``corpus``: "benchmark"
(default: 27 words, whose count work splits 63/37 over two count tasks) or "zipf"
(10,000 words with Zipf's frequencies, split 50/50; bench/wordcount.py). ``batch``: the
split and count are BatchBolts (topology/batch.py). ``tN``: each spout emits N sentences
at a time as one tree (``emit_batch``), not one tree per sentence. ``cpu``: also time, on the main
thread's CPU clock, the worker's calls into the transport (receive, and flush_due, which
encodes and seals): what crossing costs in time, next to what callgrind counts.
In the environment: ``FLUSH_MILLIS`` (topology.batch.flush.interval.millis, default 2),
``FRAME_ITEMS`` (topology.transfer.batch.size, default 512), ``IN_FLIGHT`` and
``TREES_IN_FLIGHT`` (max spout pending; see below).

Used to profile the cross-worker path: under ``valgrind --tool=callgrind
--trace-children=yes`` each worker writes its own profile (bench/instructions_two.sh).
Prints sentences/s and, per worker, the frames it sent, its CPU time, the share of its
wall time spent in rounds that did something (the bottleneck worker's is near 100%) and
how much of that its main thread was on a core.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zmq

from bench import spark as spark_bench
from tupletree import Config
from tupletree.config import validate
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.scheduler import assign
from tupletree.distributed.transport import Transport
from tupletree.distributed.worker_main import apply_transfer_batching, idle_wait_ms, local_tasks
from tupletree.runtime.clock import RealClock
from tupletree.runtime.gc_tuning import worker_gc
from tupletree.runtime.worker import IDLE_WAIT_LONGEST_SECS, Worker, make_layout

KEY = data_key(new_secret())  # shared by the forked workers, as a topology's are


# Sentences a spout task may have in flight, whether one tree each or N to a tree
# (IN_FLIGHT=N in the environment changes it), and at least TREES_IN_FLIGHT trees.
# Why the floor: a tree that crosses workers waits at each hop for the sender's next
# flush (up to the transport's 2 ms linger while it is busy), so a spout task's
# throughput is at most its trees in flight over a tree's latency (Little's law). With
# 1,000 sentences as 10 trees of 100, two workers sat idle 37% of their wall time and
# ran no faster than one (331k against 362k sentences/s); with 100 trees of 100 both
# were busy 96% of it and ran 1.47x one (notes/performance.md, stop 36).
IN_FLIGHT = int(os.environ.get("IN_FLIGHT", 1000))
TREES_IN_FLIGHT = int(os.environ.get("TREES_IN_FLIGHT", 100))
# Storm's default, 30 s. Under valgrind a run goes ~50x slower while the timeout is still
# wall-clock seconds: at parallelism 16 with trees of 100, 1,600 trees are in flight (100
# a spout task) and waited longer than that, so trees timed out, failed and were counted
# in the instructions a sentence (stop 41). The instruction scripts raise it.
MESSAGE_TIMEOUT_SECS = int(os.environ.get("MESSAGE_TIMEOUT_SECS", 30))


def conf(workers: int, parallelism: int | None = None, rows_per_tree: int = 1) -> dict:
    return validate(
        {
            Config.TOPOLOGY_WORKERS: workers,
            Config.TOPOLOGY_ACKER_EXECUTORS: parallelism or workers,
            # Max pending counts trees.
            Config.TOPOLOGY_MAX_SPOUT_PENDING: max(IN_FLIGHT // rows_per_tree, TREES_IN_FLIGHT),
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: MESSAGE_TIMEOUT_SECS,
            **_transfer_batching_from_env(),
        }
    )


def _transfer_batching_from_env() -> dict[str, Any]:
    """FLUSH_MILLIS and FRAME_ITEMS in the environment, as the config keys a worker
    reads (topology.batch.flush.interval.millis, topology.transfer.batch.size)."""
    out: dict[str, Any] = {}
    if "FLUSH_MILLIS" in os.environ:
        out[Config.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS] = float(os.environ["FLUSH_MILLIS"])
    if "FRAME_ITEMS" in os.environ:
        out[Config.TOPOLOGY_TRANSFER_BATCH_SIZE] = int(os.environ["FRAME_ITEMS"])
    return out


def run_worker(
    index: int,
    workers: int,
    total: int,
    shared: Any,
    ready: Any,
    done: Any,
    corpus: str,
    batch: bool = False,
    parallelism: int | None = None,
    cpu: bool = False,
    rows_per_tree: int = 1,
) -> None:
    # For bench/instructions_two.sh, which picks each worker's count by its pid (pids
    # can wrap around between the processes of one run, so their order says nothing).
    # One write, line and newline together: print() writes the newline separately, and
    # two workers' lines ran together ("...pid 11447two_workers: worker 0...") and lost
    # a count.
    os.write(2, f"two_workers: worker {index} pid {os.getpid()}\n".encode())
    tasks = parallelism or workers
    topology = spark_bench.topology(
        total // tasks, tasks, corpus=corpus, batch=batch, rows_per_tree=rows_per_tree
    )
    full_conf = conf(workers, tasks, rows_per_tree)
    placement = assign(make_layout(topology, full_conf), workers)
    transport = Transport(
        zmq.Context.instance(),
        "127.0.0.1",
        KEY,
        lambda item, exc: None,
        same_host_ipc=os.environ.get("SAME_HOST_IPC", "1") != "0",
    )
    apply_transfer_batching(transport, full_conf)  # as worker_main does
    shared[("address", index)] = transport.address
    worker = Worker(
        "two",
        topology,
        full_conf,
        RealClock().now,
        local_tasks=local_tasks(placement, index),
        remote_inbox=lambda t: transport.remote_inbox(t, placement[t]),
        link=transport,
    )
    timed = _TimedLink(transport) if cpu else None
    if timed is not None:
        worker.link = timed
    ready.wait()
    transport.set_peers({i: shared[("address", i)] for i in range(workers)}, index)
    worker.start(active=True)
    t0, wall0, thread0 = os.times(), time.perf_counter(), time.thread_time()
    with worker_gc():
        rounds_s, rounds_cpu_s = _loop(
            worker, transport, workers, spouts_total=total // workers // rows_per_tree, done=done
        )
    t1, wall, thread_s = os.times(), time.perf_counter() - wall0, time.thread_time() - thread0
    shared[("worker", index)] = {
        "cpu_s": (t1.user - t0.user) + (t1.system - t0.system),
        "system_s": t1.system - t0.system,
        "wall_s": wall,
        "rounds_s": rounds_s,
        "rounds_cpu_s": rounds_cpu_s,
        "thread_s": thread_s,
        "receive_s": timed.receive_s if timed else None,
        "flush_s": timed.flush_s if timed else None,
        "frames_sent": transport.frames_sent,
        "items_sent": getattr(transport, "items_sent", 0),  # 0 before it was counted
    }
    transport.close()


def _loop(
    worker: Worker, transport: Transport, workers: int, spouts_total: int, done: Any
) -> tuple[float, float]:
    """distributed/worker_main's loop without the driver: the same rounds, until every
    worker's spouts have heard back about all their sentences.

    Returns the wall time spent in rounds that did something, and the main thread's CPU
    time in them: a worker busy nearly all its wall time is the bottleneck, and CPU
    well under that wall time would mean its thread was waiting for a core."""
    poller = zmq.Poller()
    poller.register(transport.socket, zmq.POLLIN)
    finished = False
    rounds_s = rounds_cpu_s = 0.0
    while done.value < workers:
        wall, cpu = time.perf_counter(), time.thread_time()
        now = worker.now()
        busy = worker.step(now)
        if busy:
            rounds_s += time.perf_counter() - wall
            rounds_cpu_s += time.thread_time() - cpu
        if not finished and _heard(worker) >= spouts_total:
            finished = True
            with done.get_lock():
                done.value += 1
        if not busy:
            poller.poll(idle_wait_ms(worker, now, IDLE_WAIT_LONGEST_SECS))
    return rounds_s, rounds_cpu_s


class _TimedLink:
    """The transport as the worker sees it, with the main thread's CPU time in receive
    and flush_due added up. A stand-in object: the compiled Transport takes no new
    attributes. (Costs two calls a round more; not for instruction counts.)"""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self.receive_s = self.flush_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def receive(self, inboxes: dict[int, Any], max_frames: int) -> int:
        t = time.thread_time()
        n = self._transport.receive(inboxes, max_frames)
        self.receive_s += time.thread_time() - t
        return n

    def flush_due(self, now: float, idle: bool) -> None:
        t = time.thread_time()
        self._transport.flush_due(now, idle)
        self.flush_s += time.thread_time() - t


def _heard(worker: Worker) -> int:
    """Trees this worker's spouts have heard back about (acked or failed)."""
    return sum(ex.metrics.acked + ex.metrics.failed for ex in worker.spouts)


def run(
    total: int,
    workers: int = 2,
    corpus: str = "benchmark",
    batch: bool = False,
    parallelism: int | None = None,
    cpu: bool = False,
    rows_per_tree: int = 1,
) -> dict[str, Any]:
    """One word count of ``total`` sentences over ``workers`` forked worker processes:
    ``{"sentences_per_s", "workers": [{"cpu_s", "system_s", "wall_s", "rounds_s",
    "rounds_cpu_s", "thread_s", "receive_s", "flush_s", "frames_sent", "items_sent"}]}``.
    ``cpu_s`` is the worker process's (user + system, ZeroMQ's I/O thread included);
    ``rounds_s`` and ``rounds_cpu_s`` are what ``_loop`` returns; ``thread_s`` is the
    main thread's CPU over the loop, and with ``cpu`` ``receive_s`` and ``flush_s`` are
    its share in the transport's calls (else None)."""
    tasks = parallelism or workers
    if tasks % workers:
        raise ValueError(f"parallelism {tasks} is not a multiple of {workers} workers")
    total -= total % (tasks * rows_per_tree)  # each spout task emits total // tasks
    ctx = mp.get_context("fork")
    with ctx.Manager() as manager:
        shared = manager.dict()
        ready = ctx.Barrier(workers + 1)
        done = ctx.Value("i", 0)
        procs = [
            ctx.Process(
                target=run_worker,
                args=(
                    i,
                    workers,
                    total,
                    shared,
                    ready,
                    done,
                    corpus,
                    batch,
                    parallelism,
                    cpu,
                    rows_per_tree,
                ),
            )
            for i in range(workers)
        ]
        for p in procs:
            p.start()
        ready.wait()
        start = time.perf_counter()
        # A worker that dies leaves its peer waiting for acks forever: stop then, too.
        while done.value < workers and all(p.exitcode in (None, 0) for p in procs):
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        failed = [i for i, p in enumerate(procs) if p.exitcode not in (None, 0)]
        if failed:
            for p in procs:
                p.kill()
            raise RuntimeError(f"worker process(es) {failed} exited with an error")
        for p in procs:
            p.join()
        per_worker = [shared[("worker", i)] for i in range(workers)]
    return {"sentences_per_s": total / elapsed, "workers": per_worker}


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    corpus = sys.argv[3] if len(sys.argv) > 3 else "benchmark"
    batch = "batch" in sys.argv[4:]
    tasks = [int(a[1:]) for a in sys.argv[4:] if a[:1] == "p" and a[1:].isdigit()]
    parallelism = tasks[-1] if tasks else None
    trees = [int(a[1:]) for a in sys.argv[4:] if a[:1] == "t" and a[1:].isdigit()]
    rows_per_tree = trees[-1] if trees else 1
    cpu = "cpu" in sys.argv[4:]
    result = run(total, workers, corpus, batch, parallelism, cpu, rows_per_tree)
    for i, w in enumerate(result["workers"]):
        rounds = w["rounds_s"] / w["wall_s"]
        on_core = w["rounds_cpu_s"] / w["rounds_s"] if w["rounds_s"] else 0.0
        print(
            f"worker {i}: {w['frames_sent']:,} frames sent, CPU {w['cpu_s']:.2f} s "
            f"(system {w['system_s']:.2f}) in {w['wall_s']:.2f} s "
            f"({w['cpu_s'] / w['wall_s']:.0%}); in working rounds {rounds:.0%} of its wall "
            f"time, main thread on a core {on_core:.0%} of that"
        )
        if cpu:
            crossing = w["receive_s"] + w["flush_s"]
            print(
                f"worker {i}: main thread CPU {w['thread_s']:.3f} s, of which the transport "
                f"{crossing:.3f} s ({crossing / w['thread_s']:.0%}: receive "
                f"{w['receive_s']:.3f}, flush {w['flush_s']:.3f})"
            )
    print(
        f"{result['sentences_per_s']:,.0f} sentences/s ({workers} workers, {corpus} corpus, "
        f"{'BatchBolts, ' if batch else ''}"
        f"{f'parallelism {parallelism}, ' if parallelism else ''}"
        f"{f'{rows_per_tree} sentences a tree, ' if rows_per_tree > 1 else ''}no Spark)"
    )


if __name__ == "__main__":
    main()
