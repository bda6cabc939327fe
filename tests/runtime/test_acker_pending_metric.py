"""The acker's ``pending`` metric: the trees its ledger holds (what
``topology.acker.high.water`` bounds), so a soak can watch the ledger's size."""

from __future__ import annotations

from typing import Any

from tupletree import Bolt, Config, Spout, TopologyBuilder


class Five(Spout):
    outputs = ["n"]

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        if self.n < 5:
            self.collector.emit([self.n], msg_id=self.n)
            self.n += 1


class HoldsEven(Bolt):
    """Acks odd numbers, holds even ones (their trees stay open)."""

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        if tup[0] % 2:
            self.collector.ack(tup)


def test_acker_pending_counts_the_trees_its_ledger_holds(sim_cluster) -> None:
    b = TopologyBuilder()
    b.set_spout("five", Five())
    b.set_bolt("holds", HoldsEven()).shuffle_grouping("five")
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}
    sim_cluster.submit_topology("held", conf, b.create_topology())
    assert sim_cluster.wait_idle()
    metrics = sim_cluster.metrics("held")
    assert metrics["five"]["acked"] == 2
    assert metrics["__acker"]["pending"] == 3  # trees of 0, 2 and 4
    for _ in range(4):  # ... until they time out (the ledger rotates its buckets)
        sim_cluster.advance_time(30)
    assert sim_cluster.wait_idle()
    assert sim_cluster.metrics("held")["five"]["failed"] == 3
    assert sim_cluster.metrics("held")["__acker"]["pending"] == 0
