"""A bolt that emits many tuples per input must not pile its whole inbox, times that,
into the next bolt's inbox.

What a user saw: a spout emitting bursts feeds a bolt that emits 10,000 tuples per
input (a splitter, an expander). The spouts stop once an inbox is over
``topology.executor.receive.buffer.size``, but every bolt still had its turn each
round, so the expander turned its whole backlog (64,000 tuples) into 640 million
tuples queued for the next bolt, 2.5 million more every round: the worker ran out of
memory. Expected: while an inbox is over its limit the fullest one drains first, so
no inbox grows past the fullest by more than one turn's emits, and every tuple emitted
is still delivered."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.runtime.worker import Worker

BURST, CALLS, FAN_OUT = 100, 20, 100  # the spout emits BURST a call, CALLS calls in all
LIMIT, BATCH = 1024, 16


class Bursts(Spout):
    outputs = ["n"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.calls = collector, 0

    def next_tuple(self) -> None:
        if self.calls < CALLS:
            self.calls += 1
            for n in range(BURST):
                self.collector.emit([n])


class Expand(BasicBolt):
    outputs = ["n"]

    def execute(self, tup: Any, collector: Any) -> None:
        for n in range(FAN_OUT):
            collector.emit([n])


class Count(BasicBolt):
    seen = 0  # one task, in this process

    def execute(self, tup: Any, collector: Any) -> None:
        Count.seen += 1


def test_an_expanding_bolt_fills_the_next_inbox_one_turn_at_a_time() -> None:
    builder = TopologyBuilder()
    builder.set_spout("bursts", Bursts())
    builder.set_bolt("expand", Expand()).shuffle_grouping("bursts")
    builder.set_bolt("count", Count()).shuffle_grouping("expand")
    conf = validate(
        {
            Config.TOPOLOGY_ACKER_EXECUTORS: 0,
            Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: LIMIT,
            Config.TOPOLOGY_EXECUTOR_BATCH_SIZE: BATCH,
        }
    )
    Count.seen = 0
    worker = Worker("expand", builder.create_topology(), conf, lambda: 0.0)
    worker.start(active=True)
    most = 0
    for _ in range(300):
        worker.run_round()
        most = max(most, max(len(ex.inbox) for ex in worker.bolts))
    # The spout's bursts before it was stopped, plus one turn's emits of the expander.
    bound = LIMIT + worker.spout_calls * BURST + BATCH * FAN_OUT
    assert most <= bound, f"an inbox held {most:,} tuples, over {bound:,} (limit {LIMIT:,})"
    assert worker.run_until_idle()
    assert Count.seen == BURST * CALLS * FAN_OUT  # nothing emitted was lost


def test_inbox_over_is_strictly_over_the_limit_and_reads_every_executor():
    """Worker.over_limit's test (executors.inbox_over): an inbox *at* the limit is
    not over it, and any executor's inbox counts, not only the first's."""
    from tupletree.runtime.executors import Executor, inbox_over

    def ex(n: int) -> Any:
        # A real Executor: the compiled inbox_over takes nothing else.
        e = Executor(n, "bolt", lambda *args: None)
        e.inbox.extend(range(n))
        return e

    assert not inbox_over([], 3)
    assert not inbox_over([ex(3), ex(0)], 3)
    assert inbox_over([ex(4)], 3)
    assert inbox_over([ex(0), ex(1), ex(4)], 3)
