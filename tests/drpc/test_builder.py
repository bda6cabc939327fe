"""LinearDRPCTopologyBuilder: the topology it builds, and what it rejects at build time."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import BasicBolt, Config, InvalidTopologyError
from tupletree.drpc import CoordinatedBolt, LinearDRPCTopologyBuilder, LocalDRPC
from tupletree.drpc.coordinated_bolt import COORD_STREAM, FAILURE_STREAM

from .support import CountAggregator, CreateTuples, EmitFinish, ExclamationDRPC, IdBolt


class ThreeFields(BasicBolt):
    outputs = ["request", "result", "extra"]


class TwoStreams(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["request", "result"])
        declarer.declare_stream("other", ["request", "x"])


class ClaimsCoord(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["request", "result"])
        declarer.declare_stream(COORD_STREAM, ["a", "b"])


def subscriptions(topology: Any, component: str) -> set[tuple[str, str, str, tuple]]:
    spec = topology.components[component]
    return {
        (s.source, s.stream, s.grouping.kind, tuple(s.grouping.fields or ())) for s in spec.inputs
    }


def test_structure_of_a_three_bolt_topology():
    """Storm's shape: spout, prepare-request, coordinated bolts, join-result, return."""
    builder = LinearDRPCTopologyBuilder("square")
    builder.add_bolt(CreateTuples(), 3)
    builder.add_bolt(IdBolt(), 2).shuffle_grouping()
    builder.add_bolt(CountAggregator(), 4).fields_grouping(["request"])
    with LocalDRPC() as drpc:
        topology = builder.create_local_topology(drpc)
    assert list(topology.components) == [
        "drpc-spout",
        "prepare-request",
        "bolt0",
        "bolt1",
        "bolt2",
        "join-result",
        "return-results",
    ]
    kinds = {cid: spec.obj for cid, spec in topology.components.items()}
    assert all(isinstance(kinds[f"bolt{i}"], CoordinatedBolt) for i in range(3))
    assert kinds["bolt0"].sources == {}
    assert kinds["bolt1"].sources == {"bolt0": "single"}
    assert kinds["bolt2"].sources == {"bolt1": "all"}
    assert kinds["bolt2"].id_stream == ("prepare-request", "id")
    assert kinds["bolt1"].id_stream is None
    assert topology.components["bolt2"].tasks == 4
    assert subscriptions(topology, "bolt0") == {("prepare-request", "default", "none", ())}
    assert subscriptions(topology, "bolt1") == {
        ("bolt0", "default", "shuffle", ()),
        ("bolt0", COORD_STREAM, "direct", ()),
    }
    assert subscriptions(topology, "bolt2") == {
        ("bolt1", "default", "fields", ("request",)),
        ("bolt1", COORD_STREAM, "direct", ()),
        ("prepare-request", "id", "fields", ("request",)),
    }
    assert subscriptions(topology, "join-result") == {
        ("bolt2", "default", "fields", ("request",)),
        ("prepare-request", "ret", "fields", ("request",)),
        # Why a request failed, from any bolt (test_bolt_error_reaches_the_caller.py).
        *((f"bolt{i}", FAILURE_STREAM, "fields", ("request",)) for i in range(3)),
    }
    assert subscriptions(topology, "return-results") == {
        ("join-result", "default", "none", ()),
        ("join-result", FAILURE_STREAM, "none", ()),
    }
    assert topology.components["bolt1"].conf[Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS] == 1
    assert Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS not in topology.components["bolt1"].conf
    assert topology.components["bolt1"].streams[COORD_STREAM].direct


def test_single_finished_callback_bolt_groups_requests_with_ids():
    """A lone FinishedCallback bolt gets requests and id tuples on the same task."""
    builder = LinearDRPCTopologyBuilder("one")
    builder.add_bolt(EmitFinish(), 3)
    topology = builder.create_remote_topology()
    assert subscriptions(topology, "bolt0") == {
        ("prepare-request", "default", "fields", ("request",)),
        ("prepare-request", "id", "fields", ("request",)),
    }


def test_user_tick_configuration_is_kept_next_to_the_expiry_ticks():
    """A bolt that asks for ticks keeps its frequency; the expiry has its own ticks."""
    builder = LinearDRPCTopologyBuilder("t")
    builder.add_bolt(ExclamationDRPC(), 1).add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 5
    )
    topology = builder.create_remote_topology()
    spec = topology.components["bolt0"]
    assert spec.conf[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] == 5
    assert spec.conf[Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS] == 1


@pytest.mark.parametrize(
    ("bolt", "match"),
    [
        (ThreeFields(), r"exactly two fields.*\['request', 'result', 'extra'\]"),
        (TwoStreams(), "exactly one output stream"),
        (ClaimsCoord(), "__coord"),
    ],
)
def test_last_bolt_shape_is_rejected(bolt, match):
    """A last bolt that does not emit [request, result] is rejected when building."""
    builder = LinearDRPCTopologyBuilder("bad")
    builder.add_bolt(ExclamationDRPC(), 2)
    builder.add_bolt(bolt, 2).shuffle_grouping()
    with pytest.raises(InvalidTopologyError, match=match) as info:
        builder.create_remote_topology()
    assert info.value.component == "bolt1"


def test_no_bolts_is_rejected():
    """A DRPC topology needs at least one bolt."""
    with pytest.raises(InvalidTopologyError, match="no bolts"):
        LinearDRPCTopologyBuilder("empty").create_remote_topology()


def test_not_a_bolt_is_rejected():
    """add_bolt with something that is not a bolt names the step."""
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(object(), 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidTopologyError, match="bolt0: add_bolt takes a Bolt"):
        builder.create_remote_topology()


def test_finished_callback_last_bolt_must_group_on_request():
    """A parallel FinishedCallback last bolt fed by shuffle would never finish: rejected."""
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(IdBolt(), 2)
    builder.add_bolt(EmitFinish(), 3).shuffle_grouping()
    with pytest.raises(InvalidTopologyError, match=r"fields_grouping\(\['request'\]\)"):
        builder.create_remote_topology()
    ok = LinearDRPCTopologyBuilder("f")
    ok.add_bolt(IdBolt(), 2)
    ok.add_bolt(EmitFinish(), 3).global_grouping()
    topology = ok.create_remote_topology()
    assert ("prepare-request", "id", "global", ()) in subscriptions(topology, "bolt1")


def test_unknown_grouping_field_is_rejected():
    """A grouping on a field the previous bolt does not declare fails validation."""
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(ExclamationDRPC(), 1)
    builder.add_bolt(ExclamationDRPC(), 2).fields_grouping(["nope"])
    with pytest.raises(InvalidTopologyError, match="nope"):
        builder.create_remote_topology()


def test_local_topology_needs_a_local_drpc():
    """create_local_topology with something else says what to use instead."""
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(ExclamationDRPC(), 1)
    with pytest.raises(TypeError, match="create_remote_topology"):
        builder.create_local_topology("127.0.0.1:3774")
