"""The spout-versus-state matrix, pure and as build() applies it: exactly-once pairs
build; others are refused naming the pair and why, unless at-least-once is asked for;
an append-only sink needs a transactional spout and deterministic routing."""

from __future__ import annotations

from typing import Any

import pytest

from tupletree import Fields
from tupletree.errors import InvalidTopologyError
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.guarantees import judge
from tupletree.trident.state import MemoryMapState, StateFactory, StateType
from tupletree.trident.state.sinks import SinkUpdater, SqliteSinkFactory

from ..registry import Box
from .support import SeqOpaque, SeqTransactional, Split

MATRIX = {
    ("transactional", "opaque"): True,
    ("transactional", "transactional"): True,
    ("transactional", "non-transactional"): False,
    ("opaque", "opaque"): True,
    ("opaque", "transactional"): False,
    ("opaque", "non-transactional"): False,
    ("non-transactional", "opaque"): False,
    ("non-transactional", "transactional"): False,
    ("non-transactional", "non-transactional"): False,
}


@pytest.mark.parametrize(("pair", "expected"), sorted(MATRIX.items()))
def test_storms_matrix(pair: tuple[str, str], expected: bool) -> None:
    ok, why = judge(pair[0], pair[1], append_only=False, loose_partitions=[])
    assert ok is expected
    assert why


def test_append_only_sinks() -> None:
    assert judge("transactional", "transactional", True, [])[0] is True
    ok, why = judge("transactional", "transactional", True, ["shuffle"])
    assert not ok and "shuffle" in why and "partition_by" in why
    ok, why = judge("opaque", "transactional", True, [])
    assert not ok


class TypedFactory(StateFactory):
    def __init__(self, state_type: StateType) -> None:
        self.state_type = state_type

    def make_state(self, conf: Any, metrics: Any, partition_index: int, num_partitions: int) -> Any:
        return MemoryMapState.Factory().make_state(conf, metrics, partition_index, num_partitions)


def counting(spout: Any, factory: Any) -> TridentTopology:
    t = TridentTopology()
    t.new_stream("src", spout).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    )
    return t


def test_build_refuses_an_opaque_spout_with_a_transactional_state_and_says_why() -> None:
    t = counting(SeqOpaque(Box()), TypedFactory(StateType.TRANSACTIONAL))
    with pytest.raises(InvalidTopologyError) as err:
        t.build()
    text = str(err.value)
    assert "spout 'src' (opaque)" in text and "(transactional)" in text
    assert "would be lost" in text and "allow_at_least_once" in text
    built = t.build(allow_at_least_once=True)
    (verdict,) = built.trident_guarantees
    assert not verdict.exactly_once


def test_build_accepts_the_exactly_once_pairs_and_says_so() -> None:
    for spout, state in [
        (SeqTransactional(Box()), StateType.TRANSACTIONAL),
        (SeqTransactional(Box()), StateType.OPAQUE),
        (SeqOpaque(Box()), StateType.OPAQUE),
    ]:
        (verdict,) = counting(spout, TypedFactory(state)).build().trident_guarantees
        assert verdict.exactly_once, verdict.line()


def test_a_non_transactional_state_is_refused() -> None:
    with pytest.raises(InvalidTopologyError, match="applies a replayed batch again"):
        counting(SeqTransactional(Box()), TypedFactory(StateType.NON_TRANSACTIONAL)).build()


def sink_topology(spout: Any, tmp_path: Any, repartition: str) -> TridentTopology:
    t = TridentTopology()
    s = t.new_stream("src", spout)
    s = s.shuffle() if repartition == "shuffle" else s.partition_by(Fields("word"))
    s.partition_persist(
        SqliteSinkFactory(str(tmp_path / "s.db"), "words"), Fields("word"), SinkUpdater()
    )
    return t


def test_an_append_only_sink_needs_partition_by_not_shuffle(tmp_path: Any) -> None:
    ok = sink_topology(SeqTransactional(Box()), tmp_path, "partition_by").build()
    assert ok.trident_guarantees[0].exactly_once
    with pytest.raises(InvalidTopologyError, match="shuffle between the spout and the sink"):
        sink_topology(SeqTransactional(Box()), tmp_path, "shuffle").build()


def test_an_append_only_sink_needs_a_transactional_spout(tmp_path: Any) -> None:
    with pytest.raises(InvalidTopologyError, match="append-only sink"):
        sink_topology(SeqOpaque(Box()), tmp_path, "partition_by").build()


def test_guarantees_without_building() -> None:
    t = TridentTopology()
    t.new_stream("src", SeqTransactional(Box())).each(Fields("word"), Split(), Fields("w"))
    assert t.guarantees() == []  # no state: nothing to judge
