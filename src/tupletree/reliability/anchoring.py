"""The tuple side of XOR tracking: which ids a tuple carries and what its ack sends.

Storm's scheme (DESIGN.md): a tuple carries ``{root_id: edge_id}`` for every tree it
is in (its ``_tree_edges()``; topology/tuple.py says how a Tuple stores them). When a
tuple is emitted to a target task anchored to tuples A1..An, each anchor that is
tracked gets one fresh edge id e_i: e_i is XORed into the anchor's ``_ack_val`` and
into the child's entry for every root of that anchor. Acking a tuple sends, per root,
``edge ^ _ack_val``: it removes itself from the tree and adds its children in one
message, so a tree can never read zero while a child is unacked.

A duplicate anchor ``[t, t]`` draws two edge ids; both land in t's ack value and in the
child's entry, so they cancel correctly. A spout emit makes a new root and one edge id
per target task; the init message carries the XOR of those edges.

These functions work on any object with ``_tree_edges()`` and ``_ack_val`` (the
runtime's Tuple). They are the reference the property tests drive; the runtime calls
``anchor_child`` for multi-anchored emits and inlines the same arithmetic on its hot
paths (one anchor, spout emits, BasicBolt auto-acks, OutputCollector.ack), which the
scenario tests exercise end to end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tupletree.reliability.ids import Id


def anchor_child(anchors: Iterable[Any], next_id: Callable[[], Id]) -> dict[Id, Id] | None:
    """Roots of a child emitted to one target task, anchored to ``anchors``.

    Mutates each tracked anchor's ``_ack_val``. Returns None if no anchor is tracked.
    """
    roots: dict[Id, Id] | None = None
    for anchor in anchors:
        anchor_roots = anchor._tree_edges()
        if not anchor_roots:
            continue
        edge = next_id()
        anchor._ack_val ^= edge
        if roots is None:
            roots = {}
        for root in anchor_roots:
            roots[root] = roots.get(root, 0) ^ edge
    return roots


def ack_values(tup: Any) -> list[tuple[Id, Id]]:
    """The ``(root, value)`` acker messages that acking ``tup`` sends."""
    roots = tup._tree_edges()
    if not roots:
        return []
    ack_val = tup._ack_val
    return [(root, edge ^ ack_val) for root, edge in roots.items()]


def spout_edges(n_targets: int, next_id: Callable[[], Id]) -> tuple[list[Id], Id]:
    """Edge ids for a spout tuple sent to ``n_targets`` tasks, and the init value."""
    edges = [next_id() for _ in range(n_targets)]
    init = 0
    for edge in edges:
        init ^= edge
    return edges, init
