"""complete_topology captures what a spout emits with ``emit_batch``.

What a user saw: a spout that emits its rows with ``collector.emit_batch`` (one tree for
many rows, docs/batch-bolts.md) left ``read_tuples(results, spout)`` empty, while the
bolt downstream showed every row: the capturing collector recorded ``emit`` and
``emit_direct`` only, and passed ``emit_batch`` through unrecorded. Storm's
complete-topology captures every tuple every component emits.
"""

from __future__ import annotations

from tupletree import LocalCluster, TopologyBuilder
from tupletree.testing import complete_topology, read_tuples
from tupletree.topology.components import BasicBolt, Spout


class BatchSpout(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])
        declarer.declare_stream("odd", ["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.collector.emit_batch([[1], [2], [3]], msg_id="b")
            self.collector.emit_batch([[5], [7]], "o", "odd")


class Echo(BasicBolt):
    outputs = ["n"]

    def execute(self, tup, collector):
        collector.emit([tup.values[0]])


def test_spout_batches_are_captured_row_by_row() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", BatchSpout())
    builder.set_bolt("echo", Echo()).shuffle_grouping("s")
    with LocalCluster(simulate_time=True) as cluster:
        results = complete_topology(cluster, builder.create_topology())
    assert sorted(read_tuples(results, "echo")) == [[1], [2], [3]]
    assert read_tuples(results, "s") == [[1], [2], [3]]
    assert read_tuples(results, "s", "odd") == [[5], [7]]
