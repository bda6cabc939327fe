"""Hypothesis strategies and a model of a tuple DAG, shared by the reliability tests.

``TreeSim`` drives the *real* anchoring functions and AckerLedger with a random DAG
of tuples and a random interleaving of emits, acks and message deliveries, while
keeping the ground truth (which tuples exist and which are acked) on the side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import strategies as st

from tupletree.reliability.acker import AckerLedger
from tupletree.reliability.anchoring import ack_values, anchor_child, spout_edges
from tupletree.reliability.ids import IdGenerator
from tupletree.reliability.protocol import ACK, ACKED, FAIL, FAILED, INIT
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource, in_trees

MODEL_SOURCE = TupleSource("model", "default", 1, Fields(["name"]))


def model_tuple(name: str, edges: dict[int, int] | None) -> Tuple:
    """A real runtime Tuple named ``name`` in the trees ``edges`` (``{root: edge}``), so
    the model drives the runtime's own representation of tree membership."""
    return in_trees([name], MODEL_SOURCE, edges)


@dataclass
class TreeSim:
    """One spout task, any number of trees, one or more ackers, messages in flight."""

    seed: int
    n_ackers: int = 1
    combine: bool = False
    ids: IdGenerator = field(init=False)
    ledgers: list[AckerLedger] = field(init=False)
    live: list[Tuple] = field(default_factory=list)  # emitted, not yet acked
    in_flight: list[tuple[int, int, int, int]] = field(default_factory=list)
    outcomes: dict[int, int] = field(default_factory=dict)  # root -> ACKED/FAILED
    members: dict[int, set[str]] = field(default_factory=dict)  # root -> live tuple names
    counter: int = 0

    def __post_init__(self) -> None:
        self.ids = IdGenerator(self.seed)
        self.ledgers = [AckerLedger() for _ in range(self.n_ackers)]
        self._pending_acks: dict[int, int] = {}

    def _name(self) -> str:
        self.counter += 1
        return f"t{self.counter}"

    def spout_emit(self, fanout: int) -> int:
        root = self.ids.next_id()
        edges, init = spout_edges(fanout, self.ids.next_id)
        self.members[root] = set()
        for edge in edges:
            t = model_tuple(self._name(), {root: edge})
            self.live.append(t)
            self.members[root].add(t[0])
        self.in_flight.append((INIT, root, init, 7))
        return root

    def bolt_emit(self, anchors: list[Tuple]) -> Tuple:
        roots = anchor_child(anchors, self.ids.next_id)
        child = model_tuple(self._name(), roots)
        self.live.append(child)
        for root in child._tree_edges():
            self.members[root].add(child[0])
        return child

    def ack(self, t: Tuple) -> None:
        self.live.remove(t)
        for root in t._tree_edges():
            self.members[root].discard(t[0])
        for root, val in ack_values(t):
            if self.combine:
                self._pending_acks[root] = self._pending_acks.get(root, 0) ^ val
            else:
                self.in_flight.append((ACK, root, val, 0))

    def flush(self) -> None:
        """End of an executor turn: send the XOR-combined acks (zero ones are dropped)."""
        for root, val in self._pending_acks.items():
            if val:
                self.in_flight.append((ACK, root, val, 0))
        self._pending_acks.clear()

    def fail(self, t: Tuple) -> None:
        self.live.remove(t)
        for root in t._tree_edges():
            self.in_flight.append((FAIL, root, 0, 0))

    def deliver(self, index: int) -> None:
        kind, root, val, spout_task = self.in_flight.pop(index)
        ledger = self.ledgers[root % self.n_ackers]
        if kind == INIT:
            out = ledger.init(root, val, spout_task)
        elif kind == ACK:
            out = ledger.ack(root, val)
        else:
            out = ledger.fail(root)
        if out is not None:
            assert out[1] == root
            assert root not in self.outcomes, "a tree was settled twice"
            self.outcomes[root] = out[0]

    def deliver_all(self, rng: random.Random) -> None:
        while self.in_flight:
            self.deliver(rng.randrange(len(self.in_flight)))


seeds = st.integers(min_value=0, max_value=2**32 - 1)

# A script is a list of abstract steps interpreted against the live state, so shrinking
# stays meaningful: (op, a, b) with small ints picked modulo what exists.
steps = st.lists(
    st.tuples(
        st.sampled_from(["spout", "emit", "emit2", "ack", "deliver", "flush"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=1,
    max_size=120,
)

# Failure storms: trees as (fan-out, the branch that fails or None), their messages
# delivered in a random interleaving, against an AckerLedger with a small guard.
storm_trees = st.lists(
    st.tuples(st.integers(1, 4), st.one_of(st.none(), st.integers(0, 3))),
    min_size=1,
    max_size=80,
)


@dataclass
class Storm:
    """The messages of ``trees`` (see ``storm_trees``): for each tree an init, and per
    branch an ack of its edge or, for the failing branch, a fail. Roots are 1..n."""

    trees: list[tuple[int, int | None]]
    seed: int

    def messages(self) -> dict[int, list[tuple[int, int, int]]]:
        """root -> that tree's messages ``(kind, root, value)``, the init first."""
        ids = IdGenerator(self.seed)
        out: dict[int, list[tuple[int, int, int]]] = {}
        for i, (fanout, failing) in enumerate(self.trees):
            root = i + 1
            edges, init = spout_edges(fanout, ids.next_id)
            msgs = [(INIT, root, init)]
            for branch, edge in enumerate(edges):
                if failing is not None and branch == failing % fanout:
                    msgs.append((FAIL, root, 0))
                else:
                    msgs.append((ACK, root, edge))
            out[root] = msgs
        return out

    def failing(self, root: int) -> bool:
        return self.trees[root - 1][1] is not None


__all__ = ["ACKED", "FAILED", "Storm", "TreeSim", "model_tuple", "seeds", "steps", "storm_trees"]
