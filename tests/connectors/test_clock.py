"""A broker spout's decisions follow the cluster's clock (``TopologyContext.now``): in
simulated time a failed message's replay waits for ``advance_time``, not for real
seconds. (The broker's own pacing, on the I/O thread, stays real: connectors/spout.py.)"""

from __future__ import annotations

import uuid
from typing import Any

from tests.connectors.fake_broker import BROKERS, FakeBroker, FakeSpout
from tests.connectors.support import until
from tupletree import BasicBolt, FailedException, LocalCluster, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals

# Bodies the bolt has seen, in order (the bolt runs in this process: LocalCluster).
SEEN: list[bytes] = []


class FailFirstSight(BasicBolt):
    """Fails a message the first time it sees it, passes it on after."""

    outputs = ["message"]

    def execute(self, tup: Any, collector: Any) -> None:
        first = tup[0] not in SEEN
        SEEN.append(tup[0])
        if first:
            raise FailedException("first sight")


def test_a_replay_backoff_follows_simulated_time() -> None:
    SEEN.clear()
    name = uuid.uuid4().hex
    broker = BROKERS[name] = FakeBroker([b"once"])
    spout = FakeSpout(name, retry=RetryPolicy(initial_delay_secs=8.0, max_delay_secs=8.0))
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", FailFirstSight()).shuffle_grouping("src")
    conf = {"topology.message.timeout.secs": 30}
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("t", conf, b.create_topology())

        def counts() -> dict[str, int]:
            return connector_totals(cluster.metrics("t")["src"])

        # The I/O thread fetches in real time; the worker runs when the test says.
        assert until(lambda: cluster.wait_idle() and counts()["failed"] == 1)
        assert counts()["retried"] == 1 and SEEN == ["once"]
        cluster.advance_time(7)
        assert SEEN == ["once"] and counts()["acked"] == 0  # 7 s of its 8 s backoff
        cluster.advance_time(1)
        assert SEEN == ["once", "once"] and counts()["acked"] == 1
        assert until(lambda: not broker.unacked and not broker.ready)
