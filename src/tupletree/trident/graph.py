"""The graph a TridentTopology builds as the user chains operations (Storm's Node,
SpoutNode, ProcessorNode, PartitionNode): what the planner compiles into bolts.

A node's parents are always older nodes (ids grow), so id order is a topological order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

SPOUT, DRPC, OP, PARTITION, STATE = "spout", "drpc", "op", "partition", "state"

# Partitions that send a replayed batch's tuples where they went before (the tasks
# stay), and those that do not: the append-only sinks' condition (guarantees.py).
DETERMINISTIC = {"fields", "global", "batch_global", "identity", "broadcast"}


class Node:
    def __init__(
        self,
        node_id: int,
        kind: str,
        fields: Sequence[str],
        parents: Sequence[Node] = (),
        *,
        label: str = "",
        make: Callable[[list[list[str]]], Any] | None = None,
        grouping: str | None = None,
        grouping_fields: Sequence[str] | None = None,
        spout: Any = None,
        tx_id: str | None = None,
        state_id: str | None = None,
        factory: Any = None,
        committer: bool = False,
        colocate_with: Node | None = None,
    ) -> None:
        self.id = node_id
        self.kind = kind
        self.fields = list(fields)
        self.parents = list(parents)
        self.label = label  # what it does, for names and messages ("each Split")
        self.make = make  # OP: in_fields per parent -> Processor
        self.grouping = grouping  # PARTITION
        self.grouping_fields = list(grouping_fields or [])
        self.custom: Any = None  # PARTITION "custom": the CustomStreamGrouping
        self.spout = spout  # SPOUT: the adapter; DRPC: (function, drpc)
        self.tx_id = tx_id
        self.state_id = state_id  # STATE, or an OP that persists into / queries a state
        self.factory = factory  # STATE and persisting OPs: the StateFactory
        self.committer = committer  # an OP that commits state (partition_persist)
        self.colocate_with = colocate_with  # a query: the state's node
        self.name: str | None = None  # .name(...)
        self.parallelism: int | None = None  # .parallelism_hint(...)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.kind}, {self.label or self.grouping!r}, {self.fields})"
