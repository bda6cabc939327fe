"""What build() makes: operations between repartitions in one bolt (a chain of each with
its spout is one bolt), where parallelism hints go, the wiring (data streams with the
partition's grouping, coordination, $batch/$commit/$success), and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Fields
from tupletree.errors import InvalidTopologyError
from tupletree.topology import groupings as g
from tupletree.trident import TridentTopology
from tupletree.trident.bolt import TridentBolt
from tupletree.trident.builtin import Count, FilterNull, MapGet, Sum
from tupletree.trident.processors import Each, FilterEach, Output
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

from .support import Collect, Split, TxidStateFactory


def spout() -> FixedBatchSpout:
    return FixedBatchSpout(Fields("sentence"), 3, ["a b"], ["c d"])


def inputs(built: Any, cid: str) -> set[tuple[str, str, str]]:
    return {(s.source, s.stream, s.grouping.kind) for s in built.components[cid].inputs}


def test_a_chain_of_each_is_one_bolt_with_its_spout() -> None:
    t = TridentTopology()
    (
        t.new_stream("spout1", spout())
        .each(Fields("sentence"), Split(), Fields("word"))
        .each(Fields("word"), FilterNull())
        .each(Fields("word"), lambda tup: [[tup[0].upper()]], Fields("upper"))
    )
    built = t.build()
    assert sorted(built.components) == ["__mastercoord-bg0", "spout1"]
    bolt = built.components["spout1"].obj
    assert isinstance(bolt, TridentBolt)
    kinds = [type(p) for p in bolt.plan.processors]
    assert kinds == [Each, FilterEach, Each]
    assert inputs(built, "spout1") == {
        ("__mastercoord-bg0", "$batch", g.ALL),
        ("__mastercoord-bg0", "$success", g.ALL),
    }


def test_tutorial_wiring_and_parallelism() -> None:
    t = TridentTopology()
    counts = (
        t.new_stream("spout1", spout())
        .parallelism_hint(2)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count"))
        .parallelism_hint(6)
    )
    (
        t.new_drpc_stream("words")
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    built = t.build()
    comps = built.components
    assert comps["spout1"].parallelism == 1  # FixedBatchSpout caps its bolt at 1
    assert comps["b-0"].parallelism == 6  # the state's bolt: the hint on the state
    # The spout's bolt: split and the partial count, then one stream by word.
    outs = [p for p in comps["spout1"].obj.plan.processors if isinstance(p, Output)]
    assert len(outs) == 1
    got = inputs(built, "b-0")
    assert ("spout1", outs[0].stream, g.FIELDS) in got
    assert ("spout1", "$coord-bg0", g.DIRECT) in got
    assert ("__mastercoord-bg0", "$commit", g.ALL) in got
    # The DRPC side's lookup runs in the state's bolt (its own group, no commit).
    assert ("b-1", "$coord-bg1", g.DIRECT) in got
    (drpc,) = [c for c in comps if c.startswith("__drpc-words")]
    assert comps["b-1"].obj.plan.groups["bg1"].coord_sources == {drpc: "single"}
    assert not any(s == "$commit" and "bg1" in c for c, s, _ in got)
    # Every bolt gets system ticks (its batches expire).
    assert all(
        spec.conf.get("tupletree.system.tick.freq.secs") == 1
        for spec in comps.values()
        if isinstance(spec.obj, TridentBolt)
    )
    # The partition by word carries the whole tuple's fields after the batch id.
    assert comps["spout1"].streams[outs[0].stream].fields.to_list() == [
        "__batch",
        "word",
        "count",
    ]


def test_named_operations_name_their_bolt() -> None:
    t = TridentTopology()
    (
        t.new_stream("spout1", spout())
        .shuffle()
        .each(Fields("sentence"), Split(), Fields("word"))
        .name("split")
        .each(Fields("word"), FilterNull())
        .name("nonnull")
    )
    assert "b-0-split-nonnull" in t.build().components


def test_a_hint_on_a_partition_goes_to_the_bolt_after_it() -> None:
    t = TridentTopology()
    t.new_stream("spout1", spout()).shuffle().parallelism_hint(4).each(
        Fields("sentence"), Split(), Fields("word")
    )
    assert t.build().components["b-0"].parallelism == 4


def test_the_batch_group_of_merged_spouts_shares_one_coordinator() -> None:
    t = TridentTopology()
    a = t.new_stream("a", spout())
    b = t.new_stream("b", spout())
    t.merge(a, b).each(Fields("sentence"), Split(), Fields("word"))
    built = t.build()
    masters = [c for c in built.components if c.startswith("__mastercoord")]
    assert masters == ["__mastercoord-bg0"]
    assert built.components["__mastercoord-bg0"].obj.spouts[0][0] == "a"
    assert [s for s, _ in built.components["__mastercoord-bg0"].obj.spouts] == ["a", "b"]


def test_refusals_name_the_problem() -> None:
    t = TridentTopology()
    t.new_stream("x", spout())
    with pytest.raises(ValueError, match="already made"):
        t.new_stream("x", spout())
    with pytest.raises(ValueError, match="'__'"):
        t.new_stream("__x", spout())
    s = t.new_stream("y", spout())
    with pytest.raises(ValueError, match=r"no field\(s\) \['nope'\]"):
        s.each(Fields("nope"), Split(), Fields("w"))
    with pytest.raises(ValueError, match="already in the stream"):
        s.each(Fields("sentence"), Split(), Fields("sentence"))
    with pytest.raises(TypeError, match="did you mean an instance"):
        s.each(Fields("sentence"), Split, Fields("w"))
    with pytest.raises(TypeError, match="not an aggregator"):
        s.aggregate(Fields("sentence"), object(), Fields("n"))
    with pytest.raises(TypeError, match="Aggregator"):
        from tupletree.trident.builtin import _FirstNAgg

        s.group_by(Fields("sentence")).persistent_aggregate(
            MemoryMapState.Factory(), _FirstNAgg(1), Fields("n")
        )


def test_a_class_given_for_an_instance_is_refused_naming_it() -> None:
    """``Count`` for ``Count()``, ``MemoryMapState.Factory`` for ``...Factory()``: the
    class has the methods (unbound), so it was taken, and every batch then failed in the
    workers with "missing 1 required positional argument"."""
    t = TridentTopology()
    grouped = t.new_stream("x", spout()).group_by(Fields("sentence"))
    with pytest.raises(TypeError, match=r"the class Count: did you mean Count\(\)"):
        grouped.persistent_aggregate(MemoryMapState.Factory(), Count, Fields("n"))
    with pytest.raises(TypeError, match=r"the class Count: did you mean Count\(\)"):
        grouped.aggregate(Count, Fields("n"))
    with pytest.raises(
        TypeError, match=r"persistent_aggregate's state factory .* MemoryMapState\.Factory\(\)"
    ):
        grouped.persistent_aggregate(MemoryMapState.Factory, Count(), Fields("n"))
    with pytest.raises(TypeError, match=r"persistent_aggregate's state factory"):
        grouped.to_stream().persistent_aggregate(MemoryMapState.Factory, Count(), Fields("n"))
    with pytest.raises(TypeError, match=r"new_static_state's state factory"):
        t.new_static_state(MemoryMapState.Factory)
    counts = grouped.persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("n"))
    with pytest.raises(TypeError, match=r"query function .* did you mean MapGet\(\)"):
        grouped.state_query(counts, Fields("sentence"), MapGet, Fields("c"))
    with pytest.raises(TypeError, match=r"updater .* did you mean Collect\(\)"):
        grouped.to_stream().partition_persist(TxidStateFactory(), Fields("sentence"), Collect)


def test_a_join_on_a_missing_field_names_the_join() -> None:
    """It said "partition_by: no field(s) ['kk']": join repartitions, the user did not."""
    t = TridentTopology()
    a = t.new_stream("a", FixedBatchSpout(Fields("k", "v"), 2, [1, 2]))
    b = t.new_stream("b", FixedBatchSpout(Fields("k", "w"), 2, [1, 3]))
    with pytest.raises(ValueError, match=r"join fields of stream 2: no field\(s\) \['kk'\]"):
        t.join(a, Fields("k"), b, Fields("kk"), Fields("k", "v", "w"))
    with pytest.raises(TypeError, match="join: stream 1 must be a Stream"):
        t.join(a.group_by(Fields("k")), Fields("k"), b, Fields("k"), Fields("k", "v", "w"))


def test_a_stream_named_like_a_bolt_gets_no_clash() -> None:
    """A stream named "b-0" was refused with "duplicate component id 'b-0':
    set_spout/set_bolt used it twice" (the planner named its first bolt b-0 too)."""
    t = TridentTopology()
    t.new_stream("b-0", spout()).group_by(Fields("sentence")).persistent_aggregate(
        MemoryMapState.Factory(), Count(), Fields("n")
    )
    t.new_stream("b-2", spout()).shuffle().each(Fields("sentence"), Split(), Fields("w"))
    assert sorted(t.build().components) == [
        "__mastercoord-bg0",
        "__mastercoord-bg1",
        "b-0",
        "b-1",
        "b-2",
        "b-3",
    ]


def test_a_drpc_stream_cannot_be_merged_with_a_spout() -> None:
    t = TridentTopology()
    a = t.new_stream("a", spout())
    d = t.new_drpc_stream("f").project(Fields("args"))
    t.merge(a, d)
    with pytest.raises(InvalidTopologyError, match="DRPC stream cannot be joined or merged"):
        t.build()


def test_the_built_topology_is_refused_nothing_by_the_builder() -> None:
    """System ids (``__mastercoord-bg0``) pass only through the planner's own check."""
    t = TridentTopology()
    t.new_stream("spout1", spout()).each(Fields("sentence"), Split(), Fields("word"))
    built = t.build()
    assert "__mastercoord-bg0" in built.components
    assert built.components["__mastercoord-bg0"].parallelism == 1


def test_a_partitioned_spouts_bolt_takes_the_hint() -> None:
    from ..registry import Box
    from .support import SeqTransactional

    t = TridentTopology()
    t.new_stream("p", SeqTransactional(Box())).parallelism_hint(3).each(
        Fields("word"), FilterNull()
    )
    assert t.build().components["p"].parallelism == 3
