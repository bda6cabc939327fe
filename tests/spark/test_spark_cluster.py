"""SparkCluster on a real local Spark session (local[2,4]): the same semantics as
LocalCluster, across worker processes, including a worker killed with SIGKILL."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from tests.spark.workerfns import NotRebuildable
from tupletree import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.connectors.sqlite_queue import SQLiteQueue, SQLiteQueueSpout
from tupletree.distributed.processes import pid_alive
from tupletree.distributed.scheduler import assign
from tupletree.distributed.transport import same_host_endpoint
from tupletree.errors import InvalidConfigError
from tupletree.runtime.worker import make_layout
from tupletree.spark.cluster import SparkCluster
from tupletree.spark.errors import NotEnoughSlotsError

pytestmark = pytest.mark.spark

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


class NumberedSentences(Spout):
    """``total`` deterministic sentences (None: endless), tracked, replayed on fail."""

    outputs = ["sentence"]

    def __init__(self, total: int | None) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.next_n = context.this_task_index
        self.step = len(context.this_component_tasks())
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            n = self.replay.pop()
        elif self.total is None or self.next_n < self.total:
            n = self.next_n
            self.next_n += self.step
        else:
            return
        words = [WORDS[(n * 3 + i) % len(WORDS)] for i in range(1 + n % 5)]
        self.collector.emit([" ".join(words)], msg_id=n)

    def fail(self, msg_id: int) -> None:
        self.replay.append(msg_id)


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class Counts:
    def __init__(self, bolt: CountWords) -> None:
        self.bolt = bolt

    def __call__(self) -> dict[str, int]:
        return dict(self.bolt.counts)


class CountWords(BasicBolt):
    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()
        context.register_metric("counts", Counts(self))

    def execute(self, tup: Any, collector: Any) -> None:
        self.counts[tup[0]] += 1


def word_count(total: int, parallelism: int = 2) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", NumberedSentences(total), parallelism=parallelism)
    b.set_bolt("split", Split(), parallelism=parallelism).shuffle_grouping("sentences")
    b.set_bolt("count", CountWords(), parallelism=parallelism).fields_grouping("split", ["word"])
    return b.create_topology()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def all_counts(metrics: dict[str, Any]) -> Counter[str]:
    total: Counter[str] = Counter()
    for per_task in metrics["count"]["custom"]["counts"].values():
        total.update(per_task)
    return total


@pytest.fixture
def cluster(spark: Any) -> Any:
    with SparkCluster(spark) as c:
        yield c


CONF = {
    Config.TOPOLOGY_WORKERS: 2,
    Config.TOPOLOGY_ACKER_EXECUTORS: 2,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 200,
}


@pytest.mark.parametrize("same_host_ipc", [True, False], ids=["unix-socket", "tcp"])
def test_word_count_same_counts_as_local_cluster(
    cluster: SparkCluster, same_host_ipc: bool
) -> None:
    """2 workers on Spark count exactly what LocalCluster counts, every tree acked:
    the workers of this one host over their Unix sockets (the default), and over TCP."""
    total = 3000
    with LocalCluster() as local:
        local.submit_topology("wc", CONF, word_count(total))
        wait_for(lambda: local.metrics("wc")["sentences"]["acked"] >= total, 30, "local")
        expected = all_counts(local.metrics("wc"))
    conf = {**CONF, Config.TUPLETREE_WORKER_SAME_HOST_IPC: same_host_ipc}
    cluster.submit_topology("wc", conf, word_count(total))
    wait_for(lambda: cluster.metrics("wc")["sentences"]["acked"] >= total, 60, "spark acks")
    assert cluster.wait_idle(30)
    metrics = cluster.metrics("wc")
    assert metrics["sentences"]["failed"] == 0
    assert all_counts(metrics) == expected
    assert cluster.errors("wc") == []
    if sys.platform.startswith("linux"):
        # The setting reached the workers: their Unix sockets are bound or not.
        with open("/proc/net/unix") as table:
            bound = {line.split()[-1] for line in table}
        listening = [
            "@" + same_host_endpoint(w.address).removeprefix("ipc://@") in bound
            for w in cluster.workers("wc").values()
        ]
        assert listening == [same_host_ipc] * 2
    cluster.kill_topology("wc")


class PairJoin(Bolt):
    """Multi-anchors each output to two inputs that may come from different trees (and
    so from ackers on different workers)."""

    outputs = ["pair"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: Any = None

    def execute(self, tup: Any) -> None:
        if self.held is None:
            self.held = tup
            return
        first, self.held = self.held, None
        self.collector.emit([first[0] + "+" + tup[0]], anchors=[first, tup])
        self.collector.ack(first)
        self.collector.ack(tup)


class AckAll(Bolt):
    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)


def test_cross_worker_acking_with_two_ackers(cluster: SparkCluster) -> None:
    """Trees span both workers and both ackers (multi-anchored joins included); every one
    completes, none fails, and each ack reaches the spout task that emitted it. (The
    sentences hold 6,000 words in all: the join pairs every one, holding none back.)"""
    total = 2000
    b = TopologyBuilder()
    b.set_spout("sentences", NumberedSentences(total), parallelism=2)
    b.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("join", PairJoin(), parallelism=1).global_grouping("split")
    b.set_bolt("sink", AckAll(), parallelism=2).shuffle_grouping("join")
    topology = b.create_topology()
    # A timeout far beyond the run: a failed tree here is a bug, not a slow machine.
    conf = {**CONF, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 120}
    layout = make_layout(topology, validate(conf))
    placement = assign(layout, 2)
    assert set(placement.values()) == {0, 1}
    assert {placement[t] for t in layout.component_to_tasks["__acker"]} == {0, 1}
    # An odd number of words would leave one held in the join: emit pairs only.
    cluster.submit_topology("acks", conf, topology)
    wait_for(lambda: cluster.metrics("acks")["sentences"]["acked"] >= total, 60, "acks")
    m = cluster.metrics("acks")
    assert m["sentences"]["acked"] == total and m["sentences"]["failed"] == 0
    assert m["__acker"]["acked"] == total and m["__acker"]["failed"] == 0
    for task, per_task in m["sentences"]["tasks"].items():
        assert per_task["acked"] > 0, f"spout task {task} heard no acks"
    cluster.kill_topology("acks")


class RecordingSink(BasicBolt):
    """Records each processed message id in a SQLite table, slowly enough that a worker
    can be killed mid-stream."""

    outputs: list[str] = []

    def __init__(self, path: str, delay: float) -> None:
        self.path = path
        self.delay = delay

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.conn.execute("CREATE TABLE IF NOT EXISTS processed (id INTEGER, pid INTEGER)")

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(self.delay)
        self.conn.execute("INSERT INTO processed VALUES (?, ?)", (tup[0], os.getpid()))


class PassOn(BasicBolt):
    outputs = ["id", "body"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], tup[1]])


def test_killed_worker_loses_no_message(cluster: SparkCluster, tmp_path: Any) -> None:
    """SIGKILL one worker mid-stream: Spark re-runs it, it re-registers, trees in flight
    time out and are replayed from the durable queue, and every message is processed."""
    path = str(tmp_path / "queue.db")
    n = 1500
    queue = SQLiteQueue(path)
    queue.put(f"message {i}" for i in range(n))
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20), parallelism=2)
    b.set_bolt("pass", PassOn(), parallelism=2).shuffle_grouping("queue")
    b.set_bolt("sink", RecordingSink(path, delay=0.001), parallelism=2).shuffle_grouping("pass")
    conf = {
        **CONF,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 50,
        # Plain shuffle (the default, said here because the test depends on it): the live
        # worker's trees run through the killed one too.
        Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: True,
    }
    cluster.submit_topology("durable", conf, b.create_topology())
    wait_for(lambda: queue.counts()["done"] >= n // 4, 60, "a quarter of the messages")
    victim = cluster.workers("durable")[1]
    os.kill(victim.pid, signal.SIGKILL)
    wait_for(
        lambda: cluster.workers("durable")[1].attempt > victim.attempt, 90, "the retried worker"
    )
    assert cluster.workers("durable")[1].pid != victim.pid
    wait_for(lambda: queue.counts()["done"] == n, 120, "every message done")
    processed = {
        row[0] for row in sqlite3.connect(path).execute("SELECT DISTINCT id FROM processed")
    }
    assert processed == set(range(1, n + 1))
    assert max(queue.deliveries().values()) >= 2, "nothing was replayed: the kill missed"
    # Frames to and from the killed process are never read: idleness is judged between
    # the current processes, so it is still seen.
    assert cluster.wait_idle(30)
    cluster.kill_topology("durable")
    queue.close()


class SometimesRaises(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == "gamma":
            logging.getLogger("user.bolt").warning("saw %s in pid %d", tup[0], os.getpid())
        if tup[0].startswith("beta"):
            raise ValueError(f"cannot handle {tup[0]!r}")


class Once(Spout):
    outputs = ["sentence"]

    def __init__(self, total: int) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        if self.n < self.total:
            word = WORDS[self.n % len(WORDS)]
            self.collector.emit([word], msg_id=self.n)
            self.n += 1


def test_bolt_exception_does_not_kill_the_worker(cluster: SparkCluster) -> None:
    """A bolt raising on some tuples fails those trees, reports the error to the driver,
    and keeps processing: no worker is restarted. Its log records reach the driver. Each
    error arrives as the record its worker made (pickled across, field by field), with
    the worker and attempt that ran the task and when it happened."""
    b = TopologyBuilder()
    b.set_spout("words", Once(200))
    b.set_bolt("raiser", SometimesRaises(), parallelism=2).shuffle_grouping("words")
    before = time.time()
    cluster.submit_topology("raises", CONF, b.create_topology())
    attempts = {i: w.attempt for i, w in cluster.workers("raises").items()}
    wait_for(
        lambda: (
            cluster.metrics("raises")["words"]["acked"]
            + cluster.metrics("raises")["words"]["failed"]
            >= 200
        ),
        30,
        "every tree settled",
    )
    m = cluster.metrics("raises")
    assert m["words"]["failed"] == 20 and m["words"]["acked"] == 180
    assert any("cannot handle 'beta'" in e for e in cluster.errors("raises"))
    wait_for(lambda: len(cluster.error_records("raises")) == 20, 30, "20 error records")
    records = cluster.error_records("raises")
    assert {(r.component, r.where, r.exception) for r in records} == {
        ("raiser", "execute", "ValueError")
    }
    assert {r.message for r in records} == {"cannot handle 'beta'"}
    assert all("raise ValueError" in r.traceback for r in records)
    assert {(r.worker, r.attempt) for r in records} <= set(attempts.items())
    assert all(before <= r.time <= time.time() for r in records)
    assert [r.render() for r in records] == cluster.errors("raises")
    assert cluster.worker_events("raises") == []
    assert any("user.bolt: saw gamma in pid" in line for line in cluster.logs("raises")), (
        "worker log records reach the driver"
    )
    assert {i: w.attempt for i, w in cluster.workers("raises").items()} == attempts
    cluster.kill_topology("raises")


class EmitsUnpicklable(Spout):
    outputs = ["value"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = False

    def next_tuple(self) -> None:
        if not self.sent:
            self.sent = True
            self.collector.emit([threading.Lock()], msg_id="lock")


def test_unserializable_value_is_reported_with_component_and_stream(
    cluster: SparkCluster,
) -> None:
    """A value that cannot cross to another worker is reported naming the component and
    stream, and its tree is failed at once (not left to time out)."""
    b = TopologyBuilder()
    b.set_spout("locks", EmitsUnpicklable())
    b.set_bolt("far", AckAll(), parallelism=2).all_grouping("locks")
    conf = {**CONF, Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    cluster.submit_topology("pickle", conf, b.create_topology())
    wait_for(lambda: cluster.metrics("pickle")["locks"]["failed"] >= 1, 30, "the failure")
    errors = cluster.errors("pickle")
    assert any("'locks'" in e and "'default'" in e and "serialized" in e for e in errors)
    cluster.kill_topology("pickle")


@dataclass(frozen=True)
class Reading:
    """A value class of this module: on Spark it reaches the workers by value (the
    test module is not importable there), so plain pickle cannot name it."""

    word: str
    n: int


class EmitsReadings(Spout):
    outputs = ["reading"]

    def __init__(self, total: int) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0
        self.replay: list[int] = []
        # Distinct readings acked: a reading processed but timed out (a slow machine) is
        # replayed and acked again, so the "acked" counter alone can reach the total
        # while another reading is still in flight.
        self.acked: set[int] = set()
        context.register_metric("distinct_acked", lambda: len(self.acked))

    def next_tuple(self) -> None:
        if self.n == 0:
            self.collector.emit([NotRebuildable("row 0", "bad")])  # untracked: never replayed
        if self.replay:
            n = self.replay.pop()
        elif self.n < self.total:
            n = self.n
            self.n += 1
        else:
            return
        self.collector.emit([Reading(WORDS[n % len(WORDS)], n)], msg_id=n)

    def ack(self, msg_id: int) -> None:
        self.acked.add(msg_id)

    def fail(self, msg_id: int) -> None:
        self.replay.append(msg_id)


class CountReadings(BasicBolt):
    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: Counter[str] = Counter()
        context.register_metric("counts", Counts(self))

    def execute(self, tup: Any, collector: Any) -> None:
        if isinstance(tup[0], Reading):
            self.counts[tup[0].word] += 1


def test_user_value_classes_cross_workers_and_an_unreadable_frame_is_survived(
    cluster: SparkCluster,
) -> None:
    """Instances of the topology module's own classes cross workers as on LocalCluster.
    A value that pickles but cannot be rebuilt on the other worker costs its frame (the
    trees in it time out and are replayed) and an error naming the problem, not the
    worker: no attempt is restarted and every tracked reading is acked."""
    total = 300
    b = TopologyBuilder()
    b.set_spout("readings", EmitsReadings(total))
    # Shuffled: fields grouping would hash the readings, and that is not what is tested.
    b.set_bolt("count", CountReadings(), parallelism=2).shuffle_grouping("readings")
    conf = {**CONF, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 2}
    cluster.submit_topology("values", conf, b.create_topology())
    attempts = {i: w.attempt for i, w in cluster.workers("values").items()}

    def distinct_acked() -> int:
        custom = cluster.metrics("values")["readings"].get("custom", {})  # from 1st report
        return sum(custom.get("distinct_acked", {}).values())

    wait_for(lambda: distinct_acked() == total, 60, "every reading acked")
    expected = Counter(WORDS[n % len(WORDS)] for n in range(total))

    def counts() -> Counter[str]:
        seen: Counter[str] = Counter()
        for per_task in cluster.metrics("values")["count"]["custom"]["counts"].values():
            seen.update(per_task)
        return seen

    # Each worker reports every half second: the counting worker's report may trail the
    # spout's acks a little.
    wait_for(
        lambda: (
            set(counts()) == set(expected) and all(counts()[w] >= expected[w] for w in expected)
        ),
        30,
        "every reading counted",
    )
    errors = cluster.errors("values")
    assert any("could not be read" in e and "NotRebuildable.__init__" in e for e in errors), errors
    assert not any("serialized" in e for e in errors), errors
    assert {i: w.attempt for i, w in cluster.workers("values").items()} == attempts
    cluster.kill_topology("values")


class DiesAfterAWhile(Spout):
    """Kills its own worker process half a second after it starts emitting, in every
    attempt: a crash loop."""

    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.started: float | None = None

    def next_tuple(self) -> None:
        if self.started is None:
            self.started = time.monotonic()
        elif time.monotonic() - self.started > 0.5:
            os._exit(3)
        self.collector.emit([1])


def test_a_crash_loop_is_restarted_past_sparks_retries_and_reported(
    cluster: SparkCluster,
) -> None:
    """A worker that dies soon after every start is started again past Spark's task
    retries (local[2,4]: the 4th death used to end the job and the topology), with
    growing backoff; each restart is in errors(), the crash loop with its last error,
    and the other worker and the metrics carry on."""
    b = TopologyBuilder()
    b.set_spout("doomed", DiesAfterAWhile())
    b.set_bolt("sink", AckAll(), parallelism=2).shuffle_grouping("doomed")
    cluster.submit_topology("loops", CONF, b.create_topology())
    wait_for(lambda: max(cluster.worker_restarts("loops").values()) >= 5, 120, "5 restarts")
    restarts = cluster.worker_restarts("loops")
    victim = max(restarts, key=restarts.__getitem__)
    assert restarts[1 - victim] == 0
    lines = [e for e in cluster.errors("loops") if e.startswith(f"worker {victim} restarted")]
    assert len(lines) >= 5
    assert "next attempt in 0.0 s" in lines[0] and "crash loop" not in lines[0]
    assert "next attempt in 1.0 s" in lines[2] and "crash loop: 3 attempts" in lines[2]
    assert "the last with: " in lines[4]
    assert cluster.metrics("loops")["sink"]["executed"] > 0  # no SparkJobFailed
    launcher = cluster._running["loops"].launcher
    assert launcher.running
    cluster.kill_topology("loops")  # perhaps while the worker waits out a backoff
    assert "loops" not in cluster.topologies()
    assert not launcher.running


class DiesOnMarkers(BasicBolt):
    """Kills its own process the first time it sees each marker message (a file per
    marker remembers it died for it), so the worker running it dies once per marker."""

    outputs: list[str] = []

    def __init__(self, flags: str) -> None:
        self.flags = flags

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1].startswith("marker"):
            try:
                fd = os.open(os.path.join(self.flags, tup[1]), os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return
            os.close(fd)
            os._exit(7)


class HangsOnMarker(BasicBolt):
    """Blocks forever (as a bolt stuck on a dead socket would) the first time it sees
    a marker message; the worker's loop, not its process, stops."""

    outputs: list[str] = []

    def __init__(self, flags: str) -> None:
        self.flags = flags

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1] == "marker":
            try:
                fd = os.open(os.path.join(self.flags, "hung"), os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return
            os.close(fd)
            threading.Event().wait()


def queue_topology(path: str, bolt: BasicBolt) -> Any:
    """A durable queue read by two spout tasks, through one task of ``bolt`` (so it
    lives on one worker) and a pass-through on both."""
    b = TopologyBuilder()
    b.set_spout("queue", SQLiteQueueSpout(path, batch=20), parallelism=2)
    b.set_bolt("pass", PassOn(), parallelism=2).shuffle_grouping("queue")
    b.set_bolt("victim", bolt, parallelism=1).shuffle_grouping("pass")
    return b.create_topology()


def test_a_worker_that_dies_five_times_is_restarted_and_finishes_every_message(
    cluster: SparkCluster, tmp_path: Any
) -> None:
    """Issue 13, item 4: the worker running a bolt that kills its process on each of
    five markers dies five times (more than Spark's local[2,4] allows one task); it is
    started again each time, every message of the durable queue is done, and each
    restart is reported."""
    path = str(tmp_path / "queue.db")
    n = 300
    queue = SQLiteQueue(path)
    queue.put(f"marker {i}" if i % 60 == 30 else f"message {i}" for i in range(n))
    conf = {**CONF, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3, Config.TOPOLOGY_MAX_SPOUT_PENDING: 20}
    cluster.submit_topology("dies", conf, queue_topology(path, DiesOnMarkers(str(tmp_path))))
    wait_for(lambda: queue.counts()["done"] == n, 150, "every message done")
    assert len([f for f in os.listdir(tmp_path) if f.startswith("marker")]) == 5
    restarts = cluster.worker_restarts("dies")
    assert sorted(restarts.values()) == [0, 5], restarts
    victim = max(restarts, key=restarts.__getitem__)
    lines = [e for e in cluster.errors("dies") if e.startswith(f"worker {victim} restarted")]
    assert len(lines) == 5 and "(restart 5)" in lines[-1]
    assert cluster.workers("dies")[victim].attempt == 5
    cluster.kill_topology("dies")
    queue.close()


def test_a_hung_worker_is_killed_restarted_and_reported(
    cluster: SparkCluster, tmp_path: Any
) -> None:
    """A worker whose loop blocks (a bolt stuck forever) still heartbeats from its
    control thread; after supervisor.worker.timeout.secs without a report from its loop
    it is killed and started again, and every message is done."""
    path = str(tmp_path / "queue.db")
    n = 200
    queue = SQLiteQueue(path)
    queue.put("marker" if i == 50 else f"message {i}" for i in range(n))
    conf = {
        **CONF,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 20,
        Config.SUPERVISOR_WORKER_TIMEOUT_SECS: 2,
    }
    cluster.submit_topology("hangs", conf, queue_topology(path, HangsOnMarker(str(tmp_path))))
    wait_for(lambda: queue.counts()["done"] == n, 120, "every message done")
    restarts = cluster.worker_restarts("hangs")
    assert sorted(restarts.values()) == [0, 1], restarts
    victim = max(restarts, key=restarts.__getitem__)
    (line,) = [e for e in cluster.errors("hangs") if e.startswith(f"worker {victim} restarted")]
    assert "it hung: no report from its loop" in line
    assert "supervisor.worker.timeout.secs 2" in line
    cluster.kill_topology("hangs")
    queue.close()


def test_worker_timeout_is_checked_at_submit(cluster: SparkCluster) -> None:
    with pytest.raises(InvalidConfigError, match=r"supervisor\.worker\.timeout\.secs"):
        cluster.submit_topology("bad", {Config.SUPERVISOR_WORKER_TIMEOUT_SECS: 0}, word_count(10))
    assert "bad" not in cluster.topologies()


def test_deactivate_and_activate(cluster: SparkCluster) -> None:
    """Deactivate stops the spouts on every worker; activate resumes them. (Idle: every
    worker reported an idle round after the call, so an endless spout that was still
    polled would keep it from returning True.)"""
    cluster.submit_topology("toggle", CONF, word_count(None), inactive=True)
    assert cluster.wait_idle(60)
    assert cluster.metrics("toggle").get("sentences", {}).get("emitted", 0) == 0
    cluster.activate("toggle")
    wait_for(lambda: cluster.metrics("toggle")["sentences"]["emitted"] > 100, 30, "emits")
    cluster.deactivate("toggle")
    assert cluster.wait_idle(60)
    before = cluster.metrics("toggle")["sentences"]["emitted"]
    assert cluster.wait_idle(60)  # later reports, from idle rounds again
    assert cluster.metrics("toggle")["sentences"]["emitted"] == before
    cluster.activate("toggle")
    wait_for(lambda: cluster.metrics("toggle")["sentences"]["emitted"] > before, 30, "resumed")
    cluster.kill_topology("toggle")


def test_kill_leaves_nothing_running(cluster: SparkCluster, spark: Any) -> None:
    """After kill_topology the worker processes are gone and the Spark job has ended."""
    cluster.submit_topology("doomed", CONF, word_count(None))
    pids = [w.pid for w in cluster.workers("doomed").values()]
    launcher = cluster._running["doomed"].launcher
    cluster.kill_topology("doomed")
    wait_for(lambda: not any(pid_alive(p) for p in pids), 20, "worker processes to exit")
    assert not launcher.running
    assert "doomed" not in cluster.topologies()
    active = spark.sparkContext.statusTracker().getActiveJobsIds()
    assert list(active) == []


def test_too_few_slots_fails_fast_with_both_numbers(cluster: SparkCluster) -> None:
    """Asking for more workers than Spark has slots raises at once, naming both."""
    start = time.monotonic()
    with pytest.raises(NotEnoughSlotsError) as info:
        cluster.submit_topology("big", {Config.TOPOLOGY_WORKERS: 3}, word_count(10))
    # At once, not after waiting for slots (SLOT_WAIT_SECS, 100 s): room for a busy machine.
    assert time.monotonic() - start < 30
    assert "3" in str(info.value) and "2" in str(info.value)
    assert (info.value.needed, info.value.available) == (3, 2)
    assert "big" not in cluster.topologies()


class RunsCode:
    """A pickle that runs a shell command when it is loaded (the attack)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_strangers_neither_run_code_in_a_worker_nor_take_its_route(
    cluster: SparkCluster, tmp_path: Any
) -> None:
    """As the attacker, against a running topology: a pickle that would write a marker
    file is pushed from another socket to worker 0's data address; a DEALER takes the
    routing id worker 0 was seen using on the driver's control port and holds on (ZeroMQ
    refuses it: no handover), and another sends junk there. Nothing runs (no marker),
    the refused frames are reported in errors(), and the topology keeps running on the
    same worker attempts."""
    import zmq

    marker = tmp_path / "pwned"
    cluster.submit_topology("guarded", CONF, word_count(None))
    launcher = cluster._running["guarded"].launcher
    victim = cluster.workers("guarded")[0]
    attempts = {i: w.attempt for i, w in cluster.workers("guarded").items()}
    ctx = zmq.Context.instance()
    pusher = ctx.socket(zmq.PUSH)
    pusher.setsockopt(zmq.LINGER, 0)
    pusher.connect(victim.address)
    header = len(b"tcp://evil:1").to_bytes(2, "big") + b"tcp://evil:1"
    pusher.send(header + pickle.dumps(RunsCode(str(marker))))
    intruder = ctx.socket(zmq.DEALER)
    intruder.setsockopt(zmq.LINGER, 0)
    intruder.setsockopt(zmq.ROUTING_ID, launcher.read(lambda s: s.registry.routes[0]))
    intruder.connect(launcher.service.endpoint)
    junk = ctx.socket(zmq.DEALER)
    junk.setsockopt(zmq.LINGER, 0)
    junk.connect(launcher.service.endpoint)
    junk.send(b"junk")

    def reported() -> bool:
        errors = cluster.errors("guarded")
        return any("failed authentication" in e for e in errors) and any(
            "control frames" in e for e in errors
        )

    try:
        wait_for(reported, 30, f"both intrusions reported (errors: {cluster.errors('guarded')})")
        acked = cluster.metrics("guarded")["sentences"]["acked"]
        wait_for(
            lambda: cluster.metrics("guarded")["sentences"]["acked"] > acked + 500,
            30,
            "the topology to keep acking",
        )
        assert not marker.exists(), "a stranger's pickle ran in a worker"
        # The refused frame is in the worker's figures too, not only in errors().
        wait_for(
            lambda: (
                (cluster.worker_stats("guarded")[0]["frames_refused"] or {}).get("data", 0) >= 1
            ),
            30,
            "worker 0 to report the refused data frame",
        )
        assert intruder.poll(100) == 0, "the stranger received the worker's traffic"
        assert {i: w.attempt for i, w in cluster.workers("guarded").items()} == attempts
    finally:
        pusher.close()
        intruder.close()
        junk.close()
    cluster.kill_topology("guarded")


class HoldsEverything(Bolt):
    """Keeps every input and never acks nor fails one."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.held.append(tup)


def test_timed_out_trees_name_the_bolt_that_held_them(cluster: SparkCluster) -> None:
    """Issue 15, where trees stall, on Spark: a bolt that never acks yields timed-out
    trees naming the spout message and that bolt's task, holding the tuple in execute."""
    b = TopologyBuilder()
    b.set_spout("src", NumberedSentences(3))
    b.set_bolt("sink", HoldsEverything()).shuffle_grouping("src")
    conf = {**CONF, Config.TOPOLOGY_WORKERS: 1, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1}
    cluster.submit_topology("stalls", conf, b.create_topology())
    # The spout replays what fails, so the same three messages time out again and again.
    wait_for(lambda: len(cluster.timed_out("stalls")) >= 3, 60, "three timed-out trees")
    trees = cluster.timed_out("stalls")
    assert {t.msg_id for t in trees} <= {0, 1, 2}
    for tree in trees:
        assert tree.spout_component == "src"
        assert [(h.component, h.state) for h in tree.holders] == [("sink", "executing")]
    cluster.kill_topology("stalls")
