"""Max spout pending is checked before ``next_tuple``, as in Storm: one call may emit
several tracked tuples and go over it. Each of them is a pending tree all the same,
and the spout hears ``ack`` or ``fail`` for every message id it emitted: a tree left
untracked would be acked at the acker with nobody told (a queue message leased for
ever, a spout's own pending map leaking), and never timed out or replayed."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.testing import AckFailTracker

BURST = 3
CALLS = 4


class Bursts(Spout):
    """Each next_tuple emits BURST tracked tuples, CALLS times."""

    outputs = ["n"]

    def __init__(self, tracker: AckFailTracker) -> None:
        self.tracker = tracker

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.calls = 0

    def next_tuple(self) -> None:
        if self.calls == CALLS:
            return
        for i in range(BURST):
            n = self.calls * BURST + i
            self.collector.emit([n], msg_id=n)
        self.calls += 1

    def ack(self, msg_id: Any) -> None:
        self.tracker.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.tracker.fail(msg_id)


class Passes(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


class NeverAcks(Bolt):
    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        pass

    def execute(self, tup: Any) -> None:
        pass


@pytest.mark.parametrize("max_pending", [1, 2, BURST])
def test_every_tuple_of_a_burst_over_max_pending_is_acked(max_pending: int) -> None:
    """Bursts of BURST tracked tuples with max pending below or at BURST: every message
    id is acked, once the bolt has processed it."""
    tracker = AckFailTracker()
    b = TopologyBuilder()
    b.set_spout("bursts", Bursts(tracker))
    b.set_bolt("passes", Passes()).shuffle_grouping("bursts")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: max_pending}
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("bursts", conf, b.create_topology())
        assert cluster.wait_idle()
        assert tracker.acked == set(range(BURST * CALLS))
        assert tracker.failed == set()


def test_every_tuple_of_a_burst_over_max_pending_times_out() -> None:
    """A bolt that never acks: the whole first burst (over max pending 1) times out and
    the spout hears fail for each of its message ids."""
    tracker = AckFailTracker()
    b = TopologyBuilder()
    b.set_spout("bursts", Bursts(tracker))
    b.set_bolt("never", NeverAcks()).shuffle_grouping("bursts")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 1, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("bursts", conf, b.create_topology())
        assert cluster.wait_idle()
        assert tracker.failed == set()
        cluster.advance_time(25)
        assert set(range(BURST)) <= tracker.failed
        assert tracker.acked == set()
