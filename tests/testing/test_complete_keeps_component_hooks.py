"""complete_topology runs each component as a cluster would: the capturing wrapper
keeps the hooks the runtime looks up on it.

What a user saw: under complete_topology (and on a cluster it behaved otherwise)
- a windowed bolt whose window outlives the message timeout was not refused at submit
  (``InvalidConfigError`` naming the bolt and ``topology.message.timeout.secs``): the
  run went on and the mocked tuples just timed out, because the wrapper hid the
  component's ``check_config``;
- a spout's ``reset_timeout(msg_id)`` was never called when a bolt reset the tree's
  timeout, because the wrapper's own no-op ``Spout.reset_timeout`` stood in for it.
"""

from __future__ import annotations

import pytest

from tupletree import LocalCluster, TopologyBuilder
from tupletree.errors import InvalidConfigError
from tupletree.testing import MockedSources, SharedList, complete_topology
from tupletree.topology.components import Bolt, Spout
from tupletree.windowing import Duration, WindowedBolt


class Words(Spout):
    outputs = ["w"]


class Sum(WindowedBolt):
    outputs = ["n"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, window):
        self.collector.emit([len(window.get())])


def test_window_longer_than_the_timeout_is_refused_as_on_a_cluster() -> None:
    def topology():
        builder = TopologyBuilder()
        builder.set_spout("words", Words())
        builder.set_bolt("sum", Sum().with_tumbling_window(Duration.seconds(40))).shuffle_grouping(
            "words"
        )
        return builder.create_topology()

    conf = {"topology.message.timeout.secs": 30}
    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises(InvalidConfigError, match="'sum'") as on_cluster:
            cluster.submit_topology("t", conf, topology())
        with pytest.raises(InvalidConfigError, match="'sum'") as completing:
            complete_topology(cluster, topology(), MockedSources({"words": [["a"]]}), conf=conf)
    assert str(completing.value) == str(on_cluster.value)


class Leased(Spout):
    outputs = ["w"]

    def __init__(self, resets: SharedList) -> None:
        self.resets = resets

    def open(self, conf, context, collector):
        self.collector = collector
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.collector.emit(["a"], msg_id="m1")

    def reset_timeout(self, msg_id):
        self.resets.append(msg_id)


class SlowBolt(Bolt):
    outputs = ["w"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.reset_timeout(tup)
        self.collector.ack(tup)


def test_spout_hears_reset_timeout_under_complete_topology() -> None:
    resets = SharedList("resets")
    builder = TopologyBuilder()
    builder.set_spout("leased", Leased(resets))
    builder.set_bolt("slow", SlowBolt()).shuffle_grouping("leased")
    with LocalCluster(simulate_time=True) as cluster:
        complete_topology(cluster, builder.create_topology())
    assert resets.items() == ["m1"]


class LambdaBolt(Bolt):
    outputs = ["w"]

    def __init__(self) -> None:
        self.transform = lambda value: value  # cannot be pickled

    def execute(self, tup):
        pass


def test_unpicklable_component_is_named_by_its_own_class() -> None:
    """Before: ``component 'lb' (_CapturingBolt) cannot be copied``: the wrapper's class,
    which the user never wrote, instead of theirs."""
    builder = TopologyBuilder()
    builder.set_spout("words", Words())
    builder.set_bolt("lb", LambdaBolt()).shuffle_grouping("words")
    with (
        LocalCluster(simulate_time=True) as cluster,
        pytest.raises(Exception, match="'lb'") as caught,
    ):
        complete_topology(cluster, builder.create_topology(), MockedSources({"words": [["a"]]}))
    # The pickling error's own text quotes the lambda's qualname; the component's class
    # must be named where the message names it, next to the component id.
    head = str(caught.value).split("cannot be copied")[0]
    assert "LambdaBolt" in head, head
