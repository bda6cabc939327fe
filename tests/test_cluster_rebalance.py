"""Rebalance (Storm's) and steering calls that are visible when they return, on
LocalCluster; the rebalance checks as a pure function. SparkCluster's rebalance of a
running word count: tests/spark/test_rebalance_spark.py."""

from __future__ import annotations

import re
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.cluster import plan_rebalance
from tupletree.config import validate
from tupletree.errors import InvalidConfigError, InvalidTopologyError
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.testing.shared import SharedList

from .clusters import until


class Lifecycle(Spout):
    """Emits ``total`` numbered tuples ``[n, n % 7]``, tracked; records its
    activate/deactivate calls."""

    outputs = ["n", "key"]

    def __init__(self, total: int, calls: SharedList) -> None:
        self.total = total
        self.calls = calls

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.n = collector, 0

    def next_tuple(self) -> None:
        if self.n < self.total:
            self.collector.emit([self.n, self.n % 7], msg_id=self.n)
            self.n += 1

    def activate(self) -> None:
        self.calls.append("activate")

    def deactivate(self) -> None:
        self.calls.append("deactivate")


class Record(BasicBolt):
    outputs: list[str] = []

    def __init__(self, seen: SharedList) -> None:
        self.seen = seen

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def execute(self, tup: Any, collector: Any) -> None:
        self.seen.append((tup[0], tup[1], self.task))


def topology(spout: Spout, seen: SharedList, tasks: int = 4) -> Any:
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("count", Record(seen), parallelism=1, tasks=tasks).fields_grouping("src", ["key"])
    return b.create_topology()


def test_plan_checks_every_option_and_names_the_numbers():
    b = TopologyBuilder()
    b.set_spout("src", Lifecycle(1, SharedList()))
    b.set_bolt("count", Record(SharedList()), parallelism=2, tasks=4).shuffle_grouping("src")
    topo = b.create_topology()
    conf = validate({Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 7})
    now = {"src": 1, "count": 2}
    plan = plan_rebalance(topo, conf, now, None, None, {"count": 4})
    assert (plan.workers, plan.executors, plan.wait_secs) == (2, {"src": 1, "count": 4}, 7.0)
    with pytest.raises(InvalidTopologyError, match=r"'count' has 4 task\(s\).*not 8") as info:
        plan_rebalance(topo, conf, now, None, None, {"count": 8})
    assert info.value.component == "count"
    assert "submit it with tasks=8 to allow 8" in str(info.value)
    with pytest.raises(InvalidTopologyError, match=r"no component 'cuont'.*count, src"):
        plan_rebalance(topo, conf, now, None, None, {"cuont": 2})
    with pytest.raises(InvalidTopologyError, match="not 0") as info:
        plan_rebalance(topo, conf, now, None, None, {"count": 0})
    assert "submit it with" not in str(info.value)  # more tasks would not allow 0
    with pytest.raises(InvalidConfigError, match="workers must be an integer >= 1, got 0"):
        plan_rebalance(topo, conf, now, None, 0, None)
    with pytest.raises(InvalidConfigError, match=r"wait_secs .* got -1"):
        plan_rebalance(topo, conf, now, -1, None, None)
    assert plan_rebalance(topo, conf, now, 0, 3, None).workers == 3


def test_local_rebalance_records_the_layout_and_follows_storms_steps(sim_cluster):
    """Simulated time: the spouts are deactivated and activated again, the executors
    regroup the tasks (the view shows them), topology.workers is recorded (one worker
    still runs it), each key keeps its task, and nothing is lost."""
    calls, seen = SharedList(), SharedList()
    sim_cluster.submit_topology("wc", {}, topology(Lifecycle(40, calls), seen))
    sim_cluster.advance_time(1)
    sim_cluster.rebalance("wc", workers=3, parallelism={"count": 4})
    assert calls.items() == ["activate", "deactivate", "activate"]
    info = sim_cluster.topology_info("wc")
    assert info["executors"] == {"src": 1, "count": 4}
    assert info["conf"][Config.TOPOLOGY_WORKERS] == 3 and info["workers"] == 1
    assert info["active"] and not info["rebalancing"]
    sim_cluster.advance_time(1)
    assert sorted(n for n, _, _ in seen.items()) == list(range(40))
    assert sim_cluster.metrics("wc")["src"]["acked"] == 40


def test_an_inactive_topology_stays_inactive_and_bad_options_change_nothing(sim_cluster):
    calls, seen = SharedList(), SharedList()
    sim_cluster.submit_topology("wc", {}, topology(Lifecycle(5, calls), seen), inactive=True)
    with pytest.raises(InvalidTopologyError, match="not 9"):
        sim_cluster.rebalance("wc", parallelism={"count": 9})
    assert not sim_cluster.rebalancing("wc")
    sim_cluster.rebalance("wc", wait_secs=0, workers=2)
    assert not sim_cluster.topology_info("wc")["active"] and "activate" not in calls.items()
    with pytest.raises(KeyError):
        sim_cluster.rebalance("nope")


class Blocks(BasicBolt):
    """Blocks the worker's thread in ``execute`` until ``release`` is set."""

    outputs: list[str] = []

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered, self.release = entered, release

    def __getstate__(self) -> dict[str, Any]:
        return {}  # the events stay this process's (LocalCluster copies components)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.entered, self.release = _EVENTS

    def execute(self, tup: Any, collector: Any) -> None:
        self.entered.set()
        self.release.wait(30)


_EVENTS = (threading.Event(), threading.Event())


def test_deactivate_is_visible_when_it_returns_even_while_the_worker_is_busy():
    """Issue 23: after deactivate returned, the status said ACTIVE until the worker's
    thread got to the command. Its thread is held in a bolt here: the status is still
    the one just set, at once, and the spouts follow once the thread is free."""
    entered, release = _EVENTS
    entered.clear()
    release.clear()
    tracker = AckFailTracker()
    feeder = FeederSpout(["x"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("block", Blocks(entered, release)).shuffle_grouping("feed")
    with LocalCluster() as cluster:
        cluster.submit_topology("busy", {}, b.create_topology())
        feeder.feed(["a"], msg_id=1)
        assert entered.wait(30)
        cluster.deactivate("busy")
        assert cluster.topology_info("busy")["active"] is False
        cluster.activate("busy")
        assert cluster.topology_info("busy")["active"] is True
        cluster.deactivate("busy")
        release.set()
        assert until(lambda: 1 in tracker.acked)
        feeder.feed(["b"], msg_id=2)
        assert cluster.wait_idle(30)
        assert 2 not in tracker.acked  # inactive: the spout is not polled
        assert not cluster.topology_info("busy")["active"]


def test_steering_calls_are_visible_when_they_return(any_cluster):
    """On every cluster: what activate/deactivate set is what the status says at once."""
    seen = SharedList()
    any_cluster.submit_topology("steer", {}, topology(Lifecycle(10**9, SharedList()), seen, 2))
    for active in (False, True, False):
        (any_cluster.activate if active else any_cluster.deactivate)("steer")
        assert any_cluster.topology_info("steer")["active"] is active
    any_cluster.kill_topology("steer")


def test_a_rebalance_in_real_time_waits_for_the_trees_in_flight_and_loses_nothing():
    """Real time: the spout is deactivated, its pending trees complete, the layout
    changes, the spout goes on; every tuple is processed once, each key by one task."""
    calls, seen = SharedList(), SharedList()
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 50}
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", conf, topology(Lifecycle(3000, calls), seen))
        assert until(lambda: len(seen.items()) > 500)
        cluster.rebalance("wc", wait_secs=30, workers=2, parallelism={"count": 2})
        assert cluster.topology_info("wc")["executors"]["count"] == 2
        assert until(lambda: cluster.metrics("wc")["src"]["acked"] == 3000)
        records = seen.items()
    assert sorted(n for n, _, _ in records) == list(range(3000))
    tasks: dict[int, set[int]] = {}
    for _, key, task in records:
        tasks.setdefault(key, set()).add(task)
    assert len(tasks) == 7 and all(len(t) == 1 for t in tasks.values())


def test_the_docs_page_example_runs():
    """docs/rebalance.md's Python example runs as written, in a module of its own."""
    page = Path(__file__).resolve().parent.parent / "docs" / "rebalance.md"
    (block,) = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)[1:]
    module = types.ModuleType("rebalance_example")
    sys.modules[module.__name__] = module
    try:
        exec(compile(block, str(page), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


class _Hold(Bolt):
    """Never acks: the trees stay pending until they time out."""

    outputs: list[str] = []

    def execute(self, tup: Any) -> None:
        pass


def _held_topology(tracker: AckFailTracker | None = None) -> tuple[Any, FeederSpout]:
    feeder = FeederSpout(["x"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("hold", _Hold(), parallelism=1, tasks=2).shuffle_grouping("feed")
    return b.create_topology(), feeder


@pytest.mark.parametrize("last_moments", [False, True], ids=["as-is", "thread-reads-alive"])
def test_kill_during_a_rebalance_waits_for_it_and_leaves_no_trace(last_moments: bool):
    """docs/rebalance.md: "killing it waits for the rebalance". A kill of a topology
    whose rebalance (block=False) waits for its trees in flight returned while the
    rebalance still ran: a topology submitted again under the name was refused
    activate (REBALANCING), then laid out and activated by the killed one's rebalance.
    Now the kill returns once the rebalance ended with the worker (no sleep needed to
    see it: the rebalance is over when rebalancing() says so), and the new topology
    keeps its own layout and status.

    ``thread-reads-alive`` holds the worker thread in its last moments, after its final
    notify and before it is no longer alive, where CI once woke the rebalance's wait
    (it went back to sleep for its 30 s, and the kill gave up on it)."""
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}
    with LocalCluster() as cluster:
        topo, feeder = _held_topology()
        cluster.submit_topology("t", conf, topo)
        feeder.feed(["a"], msg_id=1)
        assert until(lambda: cluster.metrics("t")["hold"]["executed"] == 1)
        # A wait far longer than the kill waits for it: it must end with the worker.
        cluster.rebalance("t", wait_secs=30, workers=5, parallelism={"hold": 2}, block=False)
        assert cluster.rebalancing("t")
        if last_moments:
            cluster._runners["t"].thread.is_alive = lambda: True  # type: ignore[method-assign]
        cluster.kill_topology("t")
        assert not cluster.rebalancing("t"), "kill returned while the rebalance still runs"
        topo2, _ = _held_topology()
        cluster.submit_topology("t", conf, topo2, inactive=True)
        info = cluster.topology_info("t")
        assert info["active"] is False, "the killed topology's rebalance activated the new one"
        assert (info["executors"]["hold"], info["conf"][Config.TOPOLOGY_WORKERS]) == (1, 1)
        cluster.activate("t")  # not refused as REBALANCING
        cluster.deactivate("t")


class _PausingCluster(LocalCluster):
    """Pauses a steering call right after its REBALANCING check (as a preempted thread
    would), until the test lets it go on."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.checked = threading.Event()
        self.go_on = threading.Event()
        self.pause = False

    def _set_active(self, name: str, active: bool) -> None:
        if self.pause:  # inside the deactivate, after its check
            self.pause = False
            self.checked.set()
            self.go_on.wait(10)
        super()._set_active(name, active)


def test_a_deactivate_racing_a_rebalance_is_neither_refused_nor_lost():
    """A deactivate that passed the REBALANCING check just before a rebalance began
    returned normally, and the rebalance, which had read the topology as active, put
    that back when it ended: the deactivate was lost. The check and the set are now
    one step under the rebalance's lock: the rebalance waits for the deactivate, and
    leaves the topology inactive."""
    from tupletree.errors import TopologyRebalancingError

    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 60}
    with _PausingCluster() as cluster:
        topo, feeder = _held_topology()
        cluster.submit_topology("t", conf, topo)
        feeder.feed(["a"], msg_id=1)  # a pending tree: the rebalance waits its wait_secs
        assert until(lambda: cluster.metrics("t")["hold"]["executed"] == 1)
        outcome: list[Any] = []

        def user() -> None:
            try:
                cluster.deactivate("t")
                outcome.append("ok")
            except TopologyRebalancingError as exc:
                outcome.append(exc)

        cluster.pause = True
        thread = threading.Thread(target=user)
        thread.start()
        assert cluster.checked.wait(10)
        rebalance = threading.Thread(
            target=lambda: cluster.rebalance("t", wait_secs=1, block=False)
        )
        rebalance.start()
        time.sleep(0.2)  # a rebalance now would have read "active" and deactivated
        cluster.go_on.set()
        rebalance.join(10)
        thread.join(10)
        assert until(lambda: not cluster.rebalancing("t"), 10)
        assert outcome == ["ok"]
        assert cluster.topology_info("t")["active"] is False, (
            "deactivate returned normally but the rebalance re-activated the topology"
        )


def test_rebalance_refuses_a_worker_count_that_submit_refuses(sim_cluster):
    """A submit refuses topology.workers = 10**7 (config.py bounds it to 1..4096); a
    rebalance to it went through, and topology_info's conf then held a value validate()
    refuses. Now it is refused the same way, before anything changes."""
    topo, _ = _held_topology()
    with pytest.raises(InvalidConfigError):
        sim_cluster.submit_topology("big", {Config.TOPOLOGY_WORKERS: 10**7}, topo)
    topo, _ = _held_topology()
    sim_cluster.submit_topology("t", {}, topo)
    with pytest.raises(InvalidConfigError, match=r"'topology.workers' must be from 1 to 4096"):
        sim_cluster.rebalance("t", wait_secs=0, workers=10**7)
    validate(sim_cluster.topology_info("t")["conf"])
    assert not sim_cluster.rebalancing("t")
