"""read_tuples refuses a stream the component does not declare, naming the ones it does.

What a user saw: ``read_tuples(results, "split", stream="eror")`` (a typo for "error")
returned ``[]``, so ``assert read_tuples(...) == []`` ("no errors") passed whatever the
bolt did; a component id typo already raised KeyError naming the components. A stream
the component declares but never emitted on still reads as ``[]``.
"""

from __future__ import annotations

import pytest

from tupletree import LocalCluster, TopologyBuilder
from tupletree.testing import MockedSources, complete_topology, read_tuples
from tupletree.topology.components import BasicBolt, Spout


class Lines(Spout):
    outputs = ["line"]


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])
        declarer.declare_stream("error", ["line"])

    def execute(self, tup, collector):
        line = tup.values[0]
        if not line:
            collector.emit([line], stream="error")
        for word in line.split():
            collector.emit([word])


def _results():
    builder = TopologyBuilder()
    builder.set_spout("lines", Lines())
    builder.set_bolt("split", Split()).shuffle_grouping("lines")
    with LocalCluster(simulate_time=True) as cluster:
        return complete_topology(
            cluster, builder.create_topology(), MockedSources({"lines": [["a b"], [""]]})
        )


def test_undeclared_stream_raises_naming_the_declared_ones() -> None:
    results = _results()
    assert read_tuples(results, "split", stream="error") == [[""]]
    with pytest.raises(KeyError) as caught:
        read_tuples(results, "split", stream="eror")
    text = str(caught.value)
    assert "'eror'" in text and "'split'" in text and "['default', 'error']" in text


def test_declared_stream_without_emits_reads_empty() -> None:
    results = _results()
    # The mocked spout declares only "default"; "lines" emitted nothing elsewhere.
    assert read_tuples(results, "lines") == [["a b"], [""]]
    assert sorted(read_tuples(results, "split")) == [["a"], ["b"]]
