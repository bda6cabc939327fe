"""Tuple: one message flowing through a topology.

Design note: a Tuple is created for every delivery to every target task, so it is the
hottest object in the runtime. It holds the values, a shared ``TupleSource``
(component, stream, task and fields, one object per emitting task and stream, so
nothing is copied per tuple), and the reliability fields:

- the trees it belongs to, each as ``root id -> edge id``. Almost every tracked tuple is
  in exactly one tree, so that case has two plain fields, ``_root`` and ``_edge``, and
  only a tuple in several trees (multi-anchoring across trees) carries a dict:

  ====================  ==========  ==========  =================================
  the tuple is in       ``_root``   ``_edge``   ``_roots``
  ====================  ==========  ==========  =================================
  no tree (untracked)   0           0           None
  one tree              root id     edge id     None
  two or more trees     0           0           ``{root: edge}``, 2+ entries
  ====================  ==========  ==========  =================================

  Ids are never 0, so ``_root`` doubles as the "one tree" flag. A ``{root: edge}`` dict
  on every tracked tuple (the earlier design) cost a good share of the compiled word
  count's instructions, to build, iterate and free (notes/performance.md has the
  figures). ``_tree_edges()`` gives every case as a dict, for code off the hot path;
  ``in_trees`` builds a Tuple from one.
- ``_ack_val``: the XOR of the edge ids of every child anchored to this tuple so far.
  A bolt's ack sends, per tree, ``edge ^ _ack_val``.
"""

from __future__ import annotations

from typing import Any

from tupletree.reliability.ids import Id
from tupletree.topology.fields import Fields


class TupleSource:
    """Where tuples come from: shared by every tuple one task emits on one stream."""

    __slots__ = ("component", "fields", "stream", "task")

    def __init__(self, component: str, stream: str, task: int, fields: Fields) -> None:
        self.component = component
        self.stream = stream
        self.task = task
        self.fields = fields

    def __repr__(self) -> str:
        return f"TupleSource({self.component!r}, {self.stream!r}, task={self.task})"


class Tuple:
    """A tuple received by a bolt: values plus where they came from.

    ``tup[i]``, ``tup.get("field")``, ``len(tup)``, ``.values``, ``.fields``,
    ``.source_component``, ``.source_stream``, ``.source_task``.
    """

    __slots__ = ("_ack_val", "_edge", "_root", "_roots", "_src", "values")

    def __init__(
        self,
        values: list[Any],
        src: TupleSource,
        root: Id = 0,
        edge: Id = 0,
        roots: dict[Id, Id] | None = None,
    ) -> None:
        self.values = values
        self._src = src
        self._root = root
        self._edge = edge
        self._roots = roots
        self._ack_val: Id = 0

    def _tree_edges(self) -> dict[Id, Id]:
        """``{root: edge}`` for every tree this tuple is in (empty when untracked)."""
        if self._root:
            return {self._root: self._edge}
        return dict(self._roots) if self._roots else {}

    @property
    def fields(self) -> Fields:
        return self._src.fields

    @property
    def source_component(self) -> str:
        return self._src.component

    @property
    def source_stream(self) -> str:
        return self._src.stream

    @property
    def source_task(self) -> int:
        return self._src.task

    def get(self, field: str) -> Any:
        """The value of ``field``; KeyError naming the field and the stream's fields."""
        return self.values[self._src.fields.index(field)]

    def select(self, fields: Fields | list[str]) -> list[Any]:
        return self._src.fields.select(fields, self.values)

    def is_settled(self) -> bool:
        """True once this tuple was acked or failed (further acks/fails are ignored)."""
        return self._ack_val < 0

    def is_tick(self) -> bool:
        """True for the system's tick tuples (``topology.tick.tuple.freq.secs``)."""
        return self._src.stream == "__tick" and self._src.component == "__system"

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.values)

    def __repr__(self) -> str:
        src = self._src
        return f"Tuple({self.values!r}, source={src.component}:{src.task}, stream={src.stream!r})"


def in_trees(values: list[Any], src: TupleSource, edges: dict[Id, Id] | None) -> Tuple:
    """A Tuple in the trees ``edges`` maps (``{root: edge}``; None or empty: untracked).
    With two or more trees the Tuple keeps ``edges`` itself: pass a dict of its own."""
    if not edges:
        return Tuple(values, src)
    if len(edges) == 1:
        ((root, edge),) = edges.items()
        return Tuple(values, src, root, edge)
    return Tuple(values, src, 0, 0, edges)
