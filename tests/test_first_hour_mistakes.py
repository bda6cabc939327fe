"""A new user's first hour: mistakes that were silent, late or unclear before stop 41:

- a bolt subscribed twice to one stream (a copied line) got every tuple twice;
- a ``BasicBolt`` whose ``execute`` forgot ``collector`` (or a ``Bolt`` whose ``execute``
  took one, ``prepare``/``open`` with the other base class's arguments) was accepted by
  ``create_topology`` and then failed every tuple with a bare TypeError;
- a subscription to a bolt that forgot ``outputs`` said "which declares only no streams";
- ``submit_topology(None, ...)`` or ``""`` was accepted, and a None name then broke the
  web view's summary and ``cluster.topologies()``;
- a config that is not a dict failed with "'list' object is not a mapping" (no word of
  the config);
- a misspelled Storm key (``topology.max.spout.pendng``) was silently ignored.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, InvalidTopologyError, LocalCluster, Spout, TopologyBuilder
from tupletree.errors import InvalidConfigError


class Sentences(Spout):
    outputs = ["sentence"]


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class NoOutputs(BasicBolt):  # forgot outputs
    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


def simple_topology() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    return builder.create_topology()


# -- create_topology --------------------------------------------------------------------


def test_subscribing_twice_to_one_stream_is_refused():
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("split", Split()).shuffle_grouping("sentences").shuffle_grouping("sentences")
    with pytest.raises(InvalidTopologyError, match=r"'split'.*twice.*'default'.*'sentences'"):
        builder.create_topology()


def test_subscribing_to_two_streams_of_one_component_is_fine():
    class TwoStreams(Spout):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["sentence"])
            declarer.declare_stream("other", ["sentence"])

    builder = TopologyBuilder()
    builder.set_spout("sentences", TwoStreams())
    builder.set_bolt("split", Split()).shuffle_grouping("sentences").shuffle_grouping(
        "sentences", stream="other"
    )
    builder.create_topology()


class BasicWithoutCollector(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any) -> None:  # a Bolt's signature
        pass


class BoltWithCollector(Bolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:  # a BasicBolt's signature
        pass


class BoltPreparedAsBasic(Bolt):
    outputs = ["word"]

    def prepare(self, conf: Any, context: Any) -> None:  # no collector
        pass


class SpoutOpenWithoutCollector(Spout):
    outputs = ["word"]

    def open(self, conf: Any, context: Any) -> None:
        pass


class SpoutAckWithoutMsgId(Spout):
    outputs = ["word"]

    def ack(self) -> None:
        pass


@pytest.mark.parametrize(
    ("component", "is_spout", "match"),
    [
        (
            BasicWithoutCollector(),
            False,
            r"'split'.*BasicWithoutCollector\.execute.*execute\(tup, collector\)",
        ),
        (BoltWithCollector(), False, r"'split'.*BoltWithCollector\.execute.*execute\(tup\)"),
        (
            BoltPreparedAsBasic(),
            False,
            r"'split'.*BoltPreparedAsBasic\.prepare.*prepare\(conf, context, collector\)",
        ),
        (
            SpoutOpenWithoutCollector(),
            True,
            r"'split'.*SpoutOpenWithoutCollector\.open.*open\(conf, context, collector\)",
        ),
        (SpoutAckWithoutMsgId(), True, r"'split'.*SpoutAckWithoutMsgId\.ack.*ack\(msg_id\)"),
    ],
)
def test_a_method_with_the_wrong_arguments_is_refused_at_create_topology(
    component: Any, is_spout: bool, match: str
):
    builder = TopologyBuilder()
    if is_spout:
        builder.set_spout("split", component)
    else:
        builder.set_spout("sentences", Sentences())
        builder.set_bolt("split", component).shuffle_grouping("sentences")
    with pytest.raises(InvalidTopologyError, match=match):
        builder.create_topology()


def test_methods_with_defaults_or_star_args_are_accepted():
    class Flexible(BasicBolt):
        outputs = ["word"]

        def prepare(self, *args: Any) -> None:
            pass

        def execute(self, tup: Any, collector: Any = None, extra: int = 0) -> None:
            pass

    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("split", Flexible()).shuffle_grouping("sentences")
    builder.create_topology()


def test_subscribing_to_a_bolt_without_outputs_says_so():
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("echo", NoOutputs()).shuffle_grouping("sentences")
    builder.set_bolt("split", Split()).shuffle_grouping("echo")
    with pytest.raises(
        InvalidTopologyError, match=r"'echo'.*declares no output streams.*outputs"
    ) as info:
        builder.create_topology()
    assert "only no streams" not in str(info.value)


# -- submit_topology --------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, "", "   ", 42])
def test_a_topology_name_must_be_a_non_empty_string(name: Any):
    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises(ValueError, match="topology name"):
            cluster.submit_topology(name, {}, simple_topology())
        assert cluster.topologies() == []


def test_a_config_that_is_not_a_dict_is_named_as_the_config():
    with (
        LocalCluster(simulate_time=True) as cluster,
        pytest.raises(InvalidConfigError, match="config must be a dict"),
    ):
        cluster.submit_topology("t", [("topology.workers", 1)], simple_topology())  # type: ignore[arg-type]


def test_a_misspelled_known_key_warns_with_the_right_spelling():
    with (
        LocalCluster(simulate_time=True) as cluster,
        pytest.warns(
            UserWarning, match="'topology.max.spout.pendng'.*'topology.max.spout.pending'"
        ),
    ):
        cluster.submit_topology("t", {"topology.max.spout.pendng": 10}, simple_topology())


def test_the_misspelled_key_warning_points_at_the_users_call():
    """At the line that passed the key (here, this file's submit_topology and rebalance
    calls), not inside tupletree (it pointed at cluster.py's ``_checked_submission``)."""
    with LocalCluster(simulate_time=True) as cluster:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cluster.submit_topology("t", {"topology.max.spout.pendng": 10}, simple_topology())
            submit_line = sys._getframe().f_lineno - 1
            cluster.rebalance("t", wait_secs=0, workers=1)
            rebalance_line = sys._getframe().f_lineno - 1
        misspelled = [w for w in caught if "topology.max.spout.pendng" in str(w.message)]
        assert [(w.filename, w.lineno) for w in misspelled] == [
            (__file__, submit_line),
            (__file__, rebalance_line),
        ]


def test_a_users_own_key_does_not_warn():
    with LocalCluster(simulate_time=True) as cluster, warnings.catch_warnings():
        warnings.simplefilter("error")
        cluster.submit_topology(
            "t",
            {"my.app.redis.url": "redis://x", "topology.max.spout.pending": 5},
            simple_topology(),
        )


# -- tupletree run ------------------------------------------------------------------------


def test_run_on_a_file_whose_topology_is_a_value_says_to_make_it_a_function(tmp_path):
    """The README's tour ends with ``topology = builder.create_topology()``: a user who
    saves it as a file for ``tupletree run`` is told to wrap it, not only that the file
    "must define topology()" (it does, in their eyes)."""
    from tupletree import cli

    tour = tmp_path / "tour_as_value.py"
    tour.write_text(
        "from tupletree import Spout, TopologyBuilder\n"
        "class S(Spout):\n"
        "    outputs = ['sentence']\n"
        "builder = TopologyBuilder()\n"
        "builder.set_spout('sentences', S())\n"
        "topology = builder.create_topology()\n"
    )
    with pytest.raises(
        SystemExit, match=r"tour_as_value\.py.*a Topology, not a function.*def topology\(\)"
    ):
        cli.main(["run", "--local", "--no-ui", str(tour)])


# -- testing helpers ----------------------------------------------------------------------


def test_mocked_sources_refuse_a_string_row():
    """``MockedSources({"sentences": ["a b"]})`` (rows as strings, not lists) made each
    row its characters, so the stand-in spout's emits failed and complete_topology waited
    out its timeout with "only 0 of 1 mocked tuples were acked"."""
    from tupletree.testing import MockedSources

    with pytest.raises(ValueError, match=r"'sentences'.*row 0.*'a b'.*\['a b'\]"):
        MockedSources({"sentences": ["a b"]})


def test_complete_topology_checks_mocked_rows_against_the_spouts_fields():
    from tupletree.testing import MockedSources, complete_topology

    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises(ValueError, match=r"'sentences'.*row 0.*2 values.*\['sentence'\]"):
            complete_topology(
                cluster,
                simple_topology(),
                mocked_sources=MockedSources({"sentences": [["a b", "c"]]}),
            )
        assert cluster.topologies() == []


def test_feeder_checks_what_is_fed_against_its_fields():
    from tupletree.testing import FeederSpout

    feeder = FeederSpout(["sentence"])
    with pytest.raises(ValueError, match=r"FeederSpout.*'a b'.*\['a b'\]"):
        feeder.feed("a b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"FeederSpout.*2 values.*\['sentence'\]"):
        feeder.feed(["a", "b"], msg_id=1)
    with pytest.raises(ValueError, match=r"FeederSpout.*row 1.*2 values"):
        feeder.feed_batch([["a"], ["a", "b"]], msg_id=2)
    assert len(feeder.queue) == 0


def test_feeder_fields_given_as_one_string_is_one_field():
    from tupletree.testing import FeederSpout

    assert FeederSpout("sentence").fields == ["sentence"]  # type: ignore[arg-type]
