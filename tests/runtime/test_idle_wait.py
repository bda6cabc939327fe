"""How long an idle worker may wait for input (Worker.idle_wait): 1 ms while something
could make progress without input, else until its next timer, at most ``longest``.
Simulated time throughout: the worker's clock is a list the test moves."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree import Config, TopologyBuilder
from tupletree.config import validate
from tupletree.distributed.worker_main import idle_wait_ms
from tupletree.runtime.worker import SPOUT_WAIT_SECS, Worker
from tupletree.topology.components import BasicBolt, Spout

LONGEST = 0.02


class Numbers(Spout):
    """Emits 1, 2, 3... each with a message id: every one stays pending until acked."""

    outputs = ["n"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0
        self.context = context

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)


class Sink(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


class HookedSink(Sink):
    def prepare(self, conf: Any, context: Any) -> None:
        context.call_each_round(lambda: False)


def worker(clock: list[float], *, max_pending: int = 1000, bolt: Any = None) -> Worker:
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("sink", bolt or Sink()).shuffle_grouping("numbers")
    conf = validate(
        {
            Config.TOPOLOGY_MAX_SPOUT_PENDING: max_pending,
            Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
        }
    )
    w = Worker("w", b.create_topology(), conf, lambda: clock[0])
    w.start(active=False)
    return w


def timer_gap(w: Worker, now: float) -> float:
    due = w.next_timer_due()
    assert due is not None  # the spout's timeout rotation, at least
    return due - now


def test_a_spout_that_may_emit_is_polled_again_after_storms_spout_wait() -> None:
    clock = [0.0]
    w = worker(clock)
    w.activate()
    assert w.idle_wait(clock[0], LONGEST) == SPOUT_WAIT_SECS


def test_with_no_spout_that_may_emit_the_worker_waits_until_its_next_timer() -> None:
    clock = [0.0]
    w = worker(clock)  # inactive: its spout is not polled
    assert w.idle_wait(clock[0], LONGEST) == LONGEST
    gap = timer_gap(w, clock[0])
    assert gap > 1.0  # a timeout rotation is seconds away
    assert w.idle_wait(clock[0], 60.0) == pytest.approx(gap)
    clock[0] += gap - 0.25
    assert w.idle_wait(clock[0], 60.0) == pytest.approx(0.25)
    clock[0] += 1.0  # the timer is overdue: step at once
    assert w.idle_wait(clock[0], 60.0) == 0.0


def test_a_spout_at_max_pending_waits_for_input_not_for_the_spout_wait() -> None:
    clock = [0.0]
    w = worker(clock, max_pending=3)
    w.activate()
    (spout,) = w.spouts
    spout.poll(10)  # stops at max pending: 3 trees wait for acks from elsewhere
    assert len(spout.pending) == 3
    assert w.idle_wait(clock[0], LONGEST) == LONGEST


def test_a_spout_backing_off_is_waited_for_until_its_back_off_ends() -> None:
    clock = [0.0]
    w = worker(clock)
    w.activate()
    (spout,) = w.spouts
    spout.resume_at = clock[0] + 0.005
    assert w.idle_wait(clock[0], LONGEST) == pytest.approx(0.005)
    clock[0] += 0.005  # the back-off is over: the spout may emit
    assert w.idle_wait(clock[0], LONGEST) == SPOUT_WAIT_SECS


def test_round_hooks_and_backpressure_keep_the_short_wait() -> None:
    clock = [0.0]
    hooked = worker(clock, bolt=HookedSink())  # spout inactive: only the hook counts
    assert hooked.idle_wait(clock[0], LONGEST) == SPOUT_WAIT_SECS
    blocked = worker(clock)
    blocked.external_backpressure = lambda: True  # frames wait for a peer's socket
    assert blocked.idle_wait(clock[0], LONGEST) == SPOUT_WAIT_SECS


def test_a_stopping_worker_does_not_wait() -> None:
    clock = [0.0]
    w = worker(clock)
    w.request_stop()
    assert w.idle_wait(clock[0], LONGEST) == 0.0


@given(
    active=st.booleans(),
    at_max=st.booleans(),
    hooked=st.booleans(),
    blocked=st.booleans(),
    back_off=st.floats(0, 2),
    elapsed=st.floats(0, 100),
    longest=st.floats(-1, 1),
)
def test_the_wait_is_never_negative_nor_over_longest(
    active: bool,
    at_max: bool,
    hooked: bool,
    blocked: bool,
    back_off: float,
    elapsed: float,
    longest: float,
) -> None:
    clock = [0.0]
    w = worker(clock, max_pending=2, bolt=HookedSink() if hooked else None)
    w.external_backpressure = lambda: blocked
    if active:
        w.activate()
        (spout,) = w.spouts
        if at_max:
            spout.poll(5)
        spout.resume_at = back_off
    clock[0] = elapsed
    wait = w.idle_wait(clock[0], longest)
    assert 0.0 <= wait <= max(longest, 0.0)
    assert 0 <= idle_wait_ms(w, clock[0], longest) <= max(1000 * longest + 1, 0)


def test_a_wait_under_a_millisecond_is_rounded_up_not_to_a_spin() -> None:
    clock = [0.0]
    w = worker(clock)
    clock[0] = timer_gap(w, 0.0) - 0.0004
    assert idle_wait_ms(w, clock[0], LONGEST) == 1
    clock[0] += 0.0004
    assert idle_wait_ms(w, clock[0], LONGEST) == 0
