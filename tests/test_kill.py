"""A kill is prompt and happens once (LocalCluster in real time).

- it stops between two tuples of a bolt's turn, not after the whole batch;
- the spouts are closed and the bolts cleaned up once, on the worker's own thread, never
  while ``execute`` runs, however many kills come meanwhile;
- it waits at most ``supervisor.worker.shutdown.sleep.secs`` and then names the task
  that would not stop;
- the web view's delayed kill (``kill/<secs>``) leaves alone a topology submitted
  under the same name after it was asked for.

The bolt here blocks inside ``execute`` on an event the test holds, so what happens
while a call of user code is running is decided by the test, not by timing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, Config, LocalCluster, TopologyBuilder
from tupletree.errors import TopologyNotFoundError
from tupletree.testing import FeederSpout

from .ui.support import call, eventually

API = "/api/v1/topology"

# Module-level: every task is a copy of its component, and the test must reach them.
GATE = threading.Event()  # execute returns once it is set
ENTERED = threading.Event()  # execute was entered
JOURNAL: list[tuple[str, int, bool]] = []  # (what, thread id, execute running)
CLEANED = threading.Event()
_running = threading.Event()


class Blocking(Bolt):
    """Each execute waits for GATE (at most 30 s: a bug must fail, not hang)."""

    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        _running.set()
        JOURNAL.append(("execute", threading.get_ident(), True))
        ENTERED.set()
        if not GATE.wait(30):
            GATE.set()  # a bug: fail in 30 s, not 8 x 30 s
        _running.clear()
        if isinstance(self, Blocking):
            self.collector.ack(tup)

    def cleanup(self) -> None:
        JOURNAL.append(("cleanup", threading.get_ident(), _running.is_set()))
        CLEANED.set()


class BlockingBasic(BasicBolt):
    """The same on the BasicBolt path (the executor's other loop)."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        Blocking.execute(self, tup)  # type: ignore[arg-type]

    def cleanup(self) -> None:
        Blocking.cleanup(self)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    for event in (GATE, ENTERED, CLEANED, _running):
        event.clear()
    JOURNAL.clear()
    yield
    GATE.set()  # never leave a worker thread blocked behind a failed test


def _submit(cluster: LocalCluster, shutdown_secs: float, bolt: Any = None) -> FeederSpout:
    feeder = FeederSpout(["n"])
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("slow", bolt or Blocking()).shuffle_grouping("feed")
    conf = {Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS: shutdown_secs}
    cluster.submit_topology("t", conf, b.create_topology())
    for n in range(8):  # one turn takes them all (batch 256)
        feeder.feed([n], msg_id=n)
    assert ENTERED.wait(30), "the bolt never ran"
    return feeder


@pytest.mark.parametrize("bolt", [Blocking, BlockingBasic])
def test_a_kill_that_waits_too_long_names_the_task_and_stops_before_the_next_tuple(
    caplog: pytest.LogCaptureFixture, bolt: type
) -> None:
    """With the bolt stuck in its first execute of 8 queued, the kill returns after its
    bounded wait, naming the bolt's task; the name is free at once; once execute
    returns, none of the 7 others runs and cleanup runs once, on the worker's thread
    (a Bolt and a BasicBolt: two loops in the executor)."""
    with LocalCluster() as cluster:
        _submit(cluster, shutdown_secs=0.2, bolt=bolt())
        with caplog.at_level(logging.WARNING, logger="tupletree"):
            cluster.kill_topology("t")
        (warning,) = [r.getMessage() for r in caplog.records if "did not stop" in r.getMessage()]
        assert "bolt 'slow' (task" in warning and "in execute" in warning
        assert "supervisor.worker.shutdown.sleep.secs" in warning
        assert cluster.topologies() == []
        GATE.set()
        assert CLEANED.wait(30)
    executes = [j for j in JOURNAL if j[0] == "execute"]
    cleanups = [j for j in JOURNAL if j[0] == "cleanup"]
    assert len(executes) == 1, f"{len(executes)} of 8 tuples executed after the kill"
    assert cleanups == [("cleanup", executes[0][1], False)]


def test_a_second_kill_meanwhile_waits_for_the_same_stop_and_cleanup_runs_once():
    """Two kills while execute is blocked: neither runs cleanup on its own thread nor
    while execute runs; both return once the worker stopped; cleanup ran once."""
    with LocalCluster() as cluster:
        _submit(cluster, shutdown_secs=60)
        outcomes: list[Any] = []

        def kill() -> None:
            try:
                cluster.kill_topology("t")
                outcomes.append("killed")
            except TopologyNotFoundError as exc:
                outcomes.append(exc)

        first = threading.Thread(target=kill)
        first.start()
        second = threading.Thread(target=kill)
        second.start()
        # Neither may finish while execute runs (a kill that did would have cleaned up
        # under it, or not waited); 1 s is ample for the old bug to show.
        second.join(1.0)
        first.join(0.1)
        assert first.is_alive() and second.is_alive(), "a kill returned with execute running"
        GATE.set()
        first.join(30)
        second.join(30)
        assert outcomes == ["killed", "killed"]
        assert cluster.topologies() == []
    worker_thread = JOURNAL[0][1]
    cleanups = [j for j in JOURNAL if j[0] == "cleanup"]
    assert cleanups == [("cleanup", worker_thread, False)]
    assert len([j for j in JOURNAL if j[0] == "execute"]) == 1


def test_a_delayed_kill_spares_a_topology_submitted_again_under_the_same_name(caplog):
    """kill/<secs> asked for the first "t"; "t" is killed and submitted again before the
    wait is over: the delayed kill leaves the new one running, and says so."""
    GATE.set()  # this test's bolt never blocks
    with LocalCluster(ui_port=0) as cluster:
        feeder = FeederSpout(["n"])
        b = TopologyBuilder()
        b.set_spout("feed", feeder)
        b.set_bolt("slow", Blocking()).shuffle_grouping("feed")
        topology = b.create_topology()
        cluster.submit_topology("t", None, topology)
        with caplog.at_level(logging.INFO, logger="tupletree.ui"):
            assert call("POST", f"{cluster.ui_url}{API}/t/kill/0.5")[0] == 200
            cluster.kill_topology("t")
            cluster.submit_topology("t", None, topology)
            eventually(
                lambda: "not killing 't'" in caplog.text or "t" not in cluster.topologies(),
                what="the delayed kill to fire",
            )
        assert cluster.topologies() == ["t"], "the delayed kill killed the new topology"
