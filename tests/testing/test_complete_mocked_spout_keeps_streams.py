"""A mocked spout keeps every stream its spout declares.

What a user saw: a spout that declares a second stream (``declare_stream("other", ...)``)
with a bolt subscribed to it, mocked in ``complete_topology``, made it raise
``InvalidTopologyError: bolt 'o' subscribes to stream 'other' of 's', which declares only
['default']``: a topology that submits fine, refused because the stand-in spout declared
the default stream alone. Storm's complete-topology keeps the spout's declared streams
(the mock replaces only the spout object).
"""

from __future__ import annotations

from tupletree import LocalCluster, TopologyBuilder
from tupletree.testing import MockedSources, complete_topology, read_tuples
from tupletree.topology.components import BasicBolt, Spout


class TwoStreams(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])
        declarer.declare_stream("other", ["a", "b"])


class Echo(BasicBolt):
    outputs = ["x"]

    def execute(self, tup, collector):
        collector.emit([tup.values[0]])


def test_mocked_spout_with_a_second_stream_completes() -> None:
    builder = TopologyBuilder()
    builder.set_spout("s", TwoStreams())
    builder.set_bolt("d", Echo()).shuffle_grouping("s")
    builder.set_bolt("o", Echo()).shuffle_grouping("s", "other")
    with LocalCluster(simulate_time=True) as cluster:
        results = complete_topology(
            cluster, builder.create_topology(), MockedSources({"s": [["x"], ["y"]]})
        )
    assert sorted(read_tuples(results, "s")) == [["x"], ["y"]]
    assert sorted(read_tuples(results, "d")) == [["x"], ["y"]]
    assert read_tuples(results, "o") == []
    assert results.acked == {"s": {0, 1}}
