"""complete_topology records an emit only once the runtime took it.

What a user saw: a bolt whose emit was refused (a row with the wrong number of values,
caught by the bolt) still had that row in ``read_tuples``, though nothing was sent; and
``collector.emit(5)`` raised a bare ``TypeError: 'int' object is not iterable`` from the
capturing wrapper instead of the runtime's error naming the component and stream, so the
same bolt failed differently under complete_topology than on a cluster.
"""

from __future__ import annotations

from tupletree import LocalCluster, TopologyBuilder
from tupletree.testing import MockedSources, complete_topology, read_tuples
from tupletree.topology.components import Bolt, Spout


class Words(Spout):
    outputs = ["w"]


class Careless(Bolt):
    """Tries bad emits, keeps what they raised, then emits one good tuple."""

    outputs = ["x"]
    raised: list[str] = []

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        for bad in ([1, 2], 5):
            try:
                self.collector.emit(bad, tup)
            except Exception as exc:  # the test reads what was raised
                Careless.raised.append(str(exc))
        self.collector.emit([tup.values[0]], tup)
        self.collector.ack(tup)


def test_refused_emits_are_not_captured_and_keep_the_runtime_error() -> None:
    Careless.raised = []
    builder = TopologyBuilder()
    builder.set_spout("words", Words())
    builder.set_bolt("careless", Careless()).shuffle_grouping("words")
    with LocalCluster(simulate_time=True) as cluster:
        results = complete_topology(
            cluster, builder.create_topology(), MockedSources({"words": [["a"]]})
        )
    assert read_tuples(results, "careless") == [["a"]]
    assert len(Careless.raised) == 2
    # Both errors are the runtime's own, naming the bolt, not the wrapper's TypeError.
    assert all("careless" in text for text in Careless.raised), Careless.raised
