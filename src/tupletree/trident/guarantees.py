"""Which combinations of spout and state are exactly-once (Storm's matrix, extended to
append-only sinks), decided for every (spout, state) pair of a topology at build time.

| spout \\ state      | opaque | transactional | non-transactional |
| ------------------ | ------ | ------------- | ----------------- |
| transactional      | yes    | yes           | no                |
| opaque             | yes    | no            | no                |
| non-transactional  | no     | no            | no                |

An append-only sink (a state with ``requires_deterministic_batches``, such as an
exactly-once table or Kafka sink) is exactly-once only behind a transactional spout and
when every repartition between them sends a replayed batch's tuples to the same sink
partition as before: ``partition_by``/``group_by`` (fields), ``global``,
``batch_global`` (by txid), ``broadcast``, identity; never ``shuffle`` or
``local_or_shuffle`` (round robin from wherever it stopped) or an unknown custom
grouping. A DRPC stream has no txids: a state it writes is at-least-once.

``build()`` refuses a topology with any pair that is not exactly-once, naming each and
why, unless ``build(allow_at_least_once=True)``; either way the verdicts are kept on the
built topology (``topology.trident_guarantees``). Pure: plain values in, verdicts out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tupletree.errors import InvalidTopologyError
from tupletree.trident.graph import DETERMINISTIC, DRPC, PARTITION, SPOUT, Node
from tupletree.trident.spout.interfaces import SpoutType
from tupletree.trident.state.base import StateType

TRANSACTIONAL, OPAQUE, NON_TRANSACTIONAL = "transactional", "opaque", "non-transactional"


@dataclass(frozen=True)
class Verdict:
    spout: str
    spout_type: str
    state: str
    state_type: str
    exactly_once: bool
    why: str

    def line(self) -> str:
        mark = "exactly-once" if self.exactly_once else "NOT exactly-once"
        return (
            f"spout {self.spout!r} ({self.spout_type}) -> state {self.state} "
            f"({self.state_type}): {mark}: {self.why}"
        )


def judge(
    spout_type: str, state_type: str, append_only: bool, loose_partitions: Iterable[str]
) -> tuple[bool, str]:
    """(exactly once?, why) for one pair; ``loose_partitions``: the repartitions on the
    way that do not route a replay as before."""
    loose = sorted(set(loose_partitions))
    if state_type == NON_TRANSACTIONAL:
        return False, "a non-transactional state applies a replayed batch again"
    if spout_type == NON_TRANSACTIONAL:
        return False, (
            "a non-transactional spout promises nothing about a replayed txid (its tuples "
            "may come again in another batch, or not at all)"
        )
    if spout_type == "drpc":
        return False, "a DRPC stream has no txids, so nothing can skip a replay"
    if append_only and spout_type != TRANSACTIONAL:
        return False, (
            "an append-only sink writes what a batch brings; it needs a transactional "
            "spout, whose replayed txid brings the same tuples"
        )
    if append_only and loose:
        return False, (
            f"{' and '.join(loose)} between the spout and the sink may send a replayed "
            "batch's tuples to other sink partitions than the first attempt's, and those "
            "would write them again: repartition with partition_by or group_by"
        )
    if append_only:
        return True, "a transactional spout, routed deterministically to the sink's partitions"
    if spout_type == OPAQUE and state_type == TRANSACTIONAL:
        return False, (
            "an opaque spout may bring other tuples under a replayed txid, and a "
            "transactional state skips a txid it has applied: those tuples would be lost "
            "(use an opaque state)"
        )
    return True, f"a {spout_type} spout and a {state_type} state"


def _kind(value: Any) -> str:
    if isinstance(value, SpoutType | StateType):
        return str(value.value)
    return str(value)


def judge_all(nodes: list[Node], groups: dict[int, str]) -> list[Verdict]:
    """A verdict for each (spout, committing state) pair connected in the graph."""
    # For each node: spout node id -> the loose repartitions on some path from it.
    reach: dict[int, dict[int, set[str]]] = {}
    by_id = {n.id: n for n in nodes}
    for n in sorted(nodes, key=lambda x: x.id):
        if n.kind in (SPOUT, DRPC):
            reach[n.id] = {n.id: set()}
            continue
        here: dict[int, set[str]] = {}
        for p in n.parents:
            for sid, loose in reach.get(p.id, {}).items():
                here.setdefault(sid, set()).update(loose)
        if n.kind == PARTITION and n.grouping not in DETERMINISTIC:
            for loose in here.values():
                loose.add(n.grouping or "?")
        reach[n.id] = here
    out = []
    for n in nodes:
        if not n.committer:
            continue
        factory = n.factory
        state_type = _kind(getattr(factory, "state_type", StateType.NON_TRANSACTIONAL))
        append_only = bool(getattr(factory, "requires_deterministic_batches", False))
        for sid, loose in sorted(reach.get(n.id, {}).items()):
            s = by_id[sid]
            if s.kind == DRPC:
                name, spout_type = f"drpc:{s.spout[0]}", "drpc"
            else:
                name = s.tx_id or str(sid)
                spout_type = _kind(getattr(s.spout, "spout_type", SpoutType.NON_TRANSACTIONAL))
            ok, why = judge(spout_type, state_type, append_only, loose)
            state = f"{type(factory).__name__} of {n.label!r}"
            out.append(Verdict(name, spout_type, state, state_type, ok, why))
    return out


def check(verdicts: list[Verdict], allow_at_least_once: bool) -> None:
    """InvalidTopologyError listing the pairs that are not exactly-once, unless allowed."""
    bad = [v for v in verdicts if not v.exactly_once]
    if bad and not allow_at_least_once:
        lines = "\n  ".join(v.line() for v in bad)
        raise InvalidTopologyError(
            f"this Trident topology is not exactly-once:\n  {lines}\n"
            "Change the spout or state as said, or build(allow_at_least_once=True) to "
            "accept at-least-once for these",
            component=bad[0].state,
        )
