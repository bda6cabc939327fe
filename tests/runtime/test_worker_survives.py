"""A user's exception never ends a worker, and what errors leave behind is bounded.

Issue 13, items 6 and 7: a bolt raising SystemExit, KeyboardInterrupt or an exception
whose ``__str__`` raises killed LocalCluster's worker thread (errors() empty, wait_idle()
True); a bolt raising 200 kB messages filled stderr and memory; a spout whose next_tuple
always raised was polled (and logged) ~775 times a second.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, LocalCluster, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.errors import WorkerDiedError
from tupletree.runtime.error_log import (
    MAX_ERROR_CHARS,
    MAX_ERRORS_KEPT,
    ErrorLogLimiter,
    format_error,
)
from tupletree.runtime.executors import BACKOFF_MAX_SECS, next_tuple_backoff
from tupletree.runtime.worker import Worker
from tupletree.testing import AckFailTracker, FeederSpout

from ..clusters import until


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def raise_for(kind: str) -> None:
    if kind == "exit":
        raise SystemExit(3)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "badstr":
        raise BadStr()


class Raises(BasicBolt):
    """Raises what the input names; other inputs pass."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        raise_for(tup[0])


class PlainRaises(Bolt):
    """A plain Bolt: raises what the input names, acks the others itself."""

    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        raise_for(tup[0])
        self.collector.ack(tup)


KINDS = ["exit", "interrupt", "badstr"]


@pytest.mark.parametrize("simulate", [False, True], ids=["real-time", "simulated"])
@pytest.mark.parametrize("bolt", [Raises, PlainRaises], ids=["basic", "plain"])
def test_base_exceptions_and_unprintable_ones_fail_the_input_and_the_worker_goes_on(simulate, bolt):
    tracker = AckFailTracker()
    feeder = FeederSpout(["kind"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("raises", bolt()).shuffle_grouping("feed")
    with LocalCluster(simulate_time=simulate) as cluster:
        cluster.submit_topology("t", {"topology.message.timeout.secs": 600}, b.create_topology())
        for i, kind in enumerate(KINDS):
            feeder.feed([kind], msg_id=i)
        feeder.feed(["fine"], msg_id="after")
        # Failed at once (no timeout passes here), and the tuple after them is processed.
        if simulate:
            assert cluster.wait_idle() is True
        else:
            assert until(lambda: len(tracker.acked) + len(tracker.failed) == 4, 30), "verdicts"
        assert tracker.failed == {0, 1, 2}
        assert tracker.acked == {"after"}
        assert cluster.wait_idle() is True
        errors = cluster.errors("t")
        assert len(errors) == 3
        assert "SystemExit: 3" in errors[0]
        assert "KeyboardInterrupt" in errors[1]
        assert "BadStr: <str() of BadStr raised RuntimeError>" in errors[2]
        assert all("raises[task" in e and "execute" in e for e in errors)


class SpoutRaisesEverywhere(Spout):
    """open raises SystemExit is not survivable for a spout (it is never polled), so
    this one raises from next_tuple (once), ack and fail instead."""

    outputs = ["n"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.n += 1
        if self.n == 1:
            raise KeyboardInterrupt
        if self.n <= 3:
            self.collector.emit([self.n], msg_id=self.n)

    def ack(self, msg_id: Any) -> None:
        raise SystemExit("from ack")

    def fail(self, msg_id: Any) -> None:
        raise BadStr()


class FailsEven(BasicBolt):
    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any) -> None:
        raise SystemExit("from prepare")

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] % 2 == 0:
            raise ValueError("even")


def test_a_spout_raising_base_exceptions_in_next_tuple_ack_and_fail_keeps_running():
    b = TopologyBuilder()
    b.set_spout("s", SpoutRaisesEverywhere())
    b.set_bolt("b", FailsEven()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {}, b.create_topology())

        def settled() -> int:
            spout = cluster.metrics("t")["s"]
            return spout["acked"] + spout["failed"]

        assert until(lambda: settled() == 2, 30), "both trees settled"
        assert cluster.wait_idle() is True
        text = "\n".join(cluster.errors("t"))
        for expected in (
            "prepare: SystemExit: from prepare",
            "next_tuple: KeyboardInterrupt",
            "ack: SystemExit: from ack",
            "fail: BadStr: <str() of BadStr raised RuntimeError>",
        ):
            assert expected in text


def test_a_dead_worker_thread_shows_in_errors_and_wait_idle_raises(monkeypatch):
    """A bug in tupletree itself ends the thread: that must never look like idle."""

    def broken_round(self: Worker) -> bool:
        raise RuntimeError("a bug in the scheduler")

    tracker = AckFailTracker()
    feeder = FeederSpout(["x"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    with LocalCluster() as cluster:
        monkeypatch.setattr(Worker, "run_round", broken_round)
        cluster.submit_topology("t", {}, b.create_topology())
        with pytest.raises(WorkerDiedError, match="a bug in the scheduler") as info:
            cluster.wait_idle(timeout=30)
        assert info.value.name == "t"
        assert any(
            "worker thread died" in e and "a bug in the scheduler" in e for e in cluster.errors("t")
        )


# -- bounds on error texts and logs ---------------------------------------------------


class HugeMessages(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        raise ValueError("x" * 200_000)


def test_error_texts_are_bounded_in_length_and_number_and_logging_is_rate_limited(
    sim_cluster, caplog
):
    tracker = AckFailTracker()
    feeder = FeederSpout(["x"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("huge", HugeMessages()).shuffle_grouping("feed")
    sim_cluster.submit_topology("t", {}, b.create_topology())
    n = MAX_ERRORS_KEPT + 200
    with caplog.at_level(logging.WARNING, logger="tupletree"):
        for i in range(n):
            feeder.feed(["x"], msg_id=i)
        assert sim_cluster.wait_idle()
    assert len(tracker.failed) == n
    errors = sim_cluster.errors("t")
    assert len(errors) == MAX_ERRORS_KEPT
    assert max(len(e) for e in errors) <= MAX_ERROR_CHARS
    assert "more characters]" in errors[-1] and errors[-1].startswith("huge[task")
    logged = [r for r in caplog.records if r.name == "tupletree"]
    assert len(logged) == 5  # Storm's default throttle: 5 reports per 10 s
    assert sum(len(r.getMessage()) for r in logged) < 5 * (MAX_ERROR_CHARS + 200)

    # The next window logs again, and says how many were not logged.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tupletree"):
        sim_cluster.advance_time(11)
        feeder.feed(["x"], msg_id="late")
        assert sim_cluster.wait_idle()
    (record,) = [r for r in caplog.records if r.name == "tupletree"]
    assert f"[{n - 5} more like it since the last one logged, not logged]" in record.getMessage()


def test_format_error_never_raises_and_keeps_the_innermost_frames():
    def deep(k: int) -> None:
        if k == 0:
            raise BadStr()
        deeper(k - 1)

    def deeper(k: int) -> None:  # alternating, so traceback does not fold repeats
        deep(k)

    try:
        deep(100)
    except BadStr as exc:
        text = format_error("c", 7, "execute", exc)
    assert text.startswith("c[task 7] execute: BadStr: <str() of BadStr raised RuntimeError>")
    assert len(text) <= MAX_ERROR_CHARS
    assert "characters of traceback cut" in text
    assert "raise BadStr()" in text  # the frame that raised is kept


def test_error_log_limiter_counts_what_it_suppresses_per_key():
    lim = ErrorLogLimiter(burst=2, window=10.0, max_keys=3)
    assert [lim.admit("a", 0.0) for _ in range(4)] == [0, 0, None, None]
    assert lim.admit("b", 1.0) == 0  # keys are limited apart
    assert lim.admit("a", 9.9) is None
    assert lim.admit("a", 10.0) == 3  # new window: three were not logged
    assert lim.suppressed_total == 3
    # More keys than max_keys share one limit: the number of keys stays bounded.
    for k in range(100):
        lim.admit(("k", k), 11.0)
    assert len(lim._keys) <= 4
    assert lim.suppressed_total > 90


# -- a spout whose next_tuple keeps raising ---------------------------------------------


class AlwaysRaises(Spout):
    outputs = ["x"]

    def __init__(self, until: int | None = None) -> None:
        self.until = until

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.calls = 0

    def next_tuple(self) -> None:
        self.calls += 1
        if self.until is None or self.calls <= self.until:
            raise OSError("the source is down")
        self.collector.emit([self.calls])


def spout_worker(spout: AlwaysRaises, clock: list[float]) -> Worker:
    b = TopologyBuilder()
    b.set_spout("s", spout)
    worker = Worker("w", b.create_topology(), validate({}), lambda: clock[0])
    worker.start()
    return worker


def test_a_spout_that_keeps_raising_is_polled_less_and_less_often():
    """Ten simulated seconds of 1 ms rounds: ~10,000 polls without a backoff."""
    clock = [0.0]
    worker = spout_worker(AlwaysRaises(), clock)
    for _ in range(10_000):
        worker.run_round()
        clock[0] += 0.001
    (ex,) = worker.spouts
    calls = ex.spout.calls
    assert calls == ex.metrics.errors
    assert calls <= 30, calls  # 3 at once, then 1 ms, 2 ms, ... up to 1 s apart
    assert ex.resume_at - clock[0] <= BACKOFF_MAX_SECS


def test_a_spout_that_recovers_is_polled_at_full_speed_again():
    clock = [0.0]
    worker = spout_worker(AlwaysRaises(until=8), clock)
    for _ in range(3000):
        worker.run_round()
        clock[0] += 0.001
    (ex,) = worker.spouts
    assert ex.metrics.errors == 8
    assert ex.raises_in_a_row == 0
    assert ex.metrics.emitted > 1000  # every round emits once it works


def test_backoff_starts_after_a_few_raises_doubles_and_is_capped():
    waits = [next_tuple_backoff(n) for n in range(1, 40)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == 0.001
    assert all(b == min(BACKOFF_MAX_SECS, 2 * a) for a, b in itertools.pairwise(waits[3:]))
    assert max(waits) == BACKOFF_MAX_SECS
