"""The acker's failed trees by reason on /metrics: a counter must never go back.

What a user saw: ``tupletree_tuples_failed_total{component="__acker",reason="explicit"}``
read 3 while a bolt had failed 3 trees, then dropped to 1 once two other trees timed
out: the collector took ``failed - timed_out`` as the explicit fails of every task, but
an acker's ``failed`` counts only the trees it failed on a bolt's fail (its timeouts are
``timed_out`` alone, unlike a spout's, whose ``failed`` holds both). Prometheus reads
the drop as a counter reset, and ``rate()`` of it jumps.
"""

from __future__ import annotations

from typing import Any

from tupletree import Bolt, Config, LocalCluster, TopologyBuilder
from tupletree.reliability.protocol import ACKER_COMPONENT
from tupletree.testing import FeederSpout
from tupletree.ui.prometheus import ClusterCollector


class FailSomeLoseSome(Bolt):
    """Fails 0, 1, 2; never answers 3, 4 (they time out); acks the rest."""

    outputs = ["n"]

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup[0] < 3:
            self.collector.fail(tup)
        elif tup[0] >= 5:
            self.collector.ack(tup)


def _acker_failed(cluster: LocalCluster) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in ClusterCollector(cluster).collect():
        if family.name != "tupletree_tuples_failed":
            continue
        for sample in family.samples:
            if sample.labels["component"] == ACKER_COMPONENT:
                reason = sample.labels["reason"]
                out[reason] = out.get(reason, 0.0) + sample.value
    return out


def test_acker_explicit_fails_do_not_drop_when_trees_time_out() -> None:
    feeder = FeederSpout(["n"])
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("bolt", FailSomeLoseSome()).shuffle_grouping("feed")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology(
            "t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5}, builder.create_topology()
        )
        for i in range(8):
            feeder.feed([i], msg_id=i)
        cluster.wait_idle()
        assert _acker_failed(cluster) == {"explicit": 3.0, "timeout": 0.0}

        cluster.advance_time(30)
        cluster.wait_idle()
        assert cluster.metrics("t")["feed"]["timed_out"] == 2  # the truth: 3 + 2
        assert _acker_failed(cluster) == {"explicit": 3.0, "timeout": 2.0}
