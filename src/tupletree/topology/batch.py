"""Batch: rows from one source task and stream, held as columns; what a BatchBolt gets.

Design note: an item that crosses workers cost ~3.3k instructions with one ``Tuple``
per item, and most of that was CPython object work, not the wire: building a Tuple, its
values list and an edge int on the receiver, walking Tuples on the sender, freeing both
(notes/performance.md; notes/batch-bolts.md). A frame is already columnar, so a run of
tuples from one source arrives as slices, and a Batch keeps it so:

- ``_values``: the rows' values, row-major and flat: row ``i`` is
  ``_values[i * arity : (i + 1) * arity]`` (``arity`` = the source's fields). One slice
  of the frame's values column; for one field, the column itself.
- the trees, run-length coded as frames code them: rows ``[0, _counts[0])`` are in tree
  ``_roots[0]``, the next ``_counts[1]`` rows in ``_roots[1]``, and so on (root 0: the
  rows are untracked). ``_edges``: one edge id per row. A row in two or more trees
  (multi-anchoring across trees, rare) has root 0 there and its ``{root: edge}`` in
  ``_multi``, keyed by row.

A bolt never acks a row: a batch is acked whole when ``execute_batch`` returns, and each
tree then gets one ACK, the XOR of its rows' edges and of the edges of the children
anchored to them (``tree_acks``). That is exactly what acking each row would send, XOR
being associative and commutative (tests/topology/test_batch.py checks it against
``OutputCollector.ack`` with hypothesis). It is also why a Batch that a BatchBolt emits
to another BatchBolt carries one edge per run of a tree's rows, on the run's first row,
and 0 on the others (runtime/batch_collector.py): only their XOR is ever used. Such a
Batch is never turned into Tuples.

A Batch is read-only for the bolt: ``column`` and ``row`` return lists of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tupletree.reliability.ids import Id
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource


class Batch:
    """Rows from one source task and stream, as columns.

    ``len(batch)``, ``batch.column("word")`` (a list, one value per row),
    ``batch.row(i)`` (a list, the row's values), ``for values in batch``, ``.fields``,
    ``.source_component``, ``.source_stream``, ``.source_task``, ``is_tick()``.
    """

    __slots__ = ("_arity", "_counts", "_edges", "_multi", "_roots", "_row_roots", "_src", "_values")

    def __init__(
        self,
        src: TupleSource,
        values: list[Any],
        roots: list[Id],
        counts: list[int],
        edges: list[Id],
        multi: dict[int, dict[Id, Id]] | None = None,
    ) -> None:
        self._src = src
        self._arity = len(src.fields)
        self._values = values
        self._roots = roots
        self._counts = counts
        self._edges = edges
        self._multi = multi
        self._row_roots: list[Id] | None = None  # _roots expanded, made when asked

    @staticmethod
    def of_tuples(tuples: list[Tuple]) -> Batch:
        """The Batch of ``tuples``, which all come from one source (``Tuple._src``)."""
        src = tuples[0]._src
        values: list[Any] = []
        roots: list[Id] = []
        counts: list[int] = []
        edges: list[Id] = []
        multi: dict[int, dict[Id, Id]] | None = None
        last: Id = -1
        for i, tup in enumerate(tuples):
            values.extend(tup.values)
            root: Id = tup._root
            if tup._roots is not None:
                if multi is None:
                    multi = {}
                multi[i] = tup._roots
            if counts and (root is last or root == last):
                counts[-1] += 1
            else:
                roots.append(root)
                counts.append(1)
                last = root
            edges.append(tup._edge)
        return Batch(src, values, roots, counts, edges, multi)

    def __len__(self) -> int:
        return len(self._edges)

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

    def is_tick(self) -> bool:
        """True for a batch of the system's tick tuples (``topology.tick.tuple.freq.secs``)."""
        return self._src.stream == "__tick" and self._src.component == "__system"

    def column(self, field: Any) -> list[Any]:
        """The values of ``field`` (a name, or a position in the fields), one per row.

        KeyError naming the field and the stream's fields when there is no such field."""
        arity = self._arity
        if type(field) is int:
            if not 0 <= field < arity:
                raise IndexError(
                    f"no field at position {field}; fields are {self._src.fields.to_list()}"
                )
            i: int = field
        else:
            i = self._src.fields.index(field)
        if arity == 1:
            return self._values[:]
        return self._values[i::arity]

    def row(self, i: int) -> list[Any]:
        """The values of row ``i`` (negative counts from the end, as for lists)."""
        n = len(self._edges)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} of a batch of {n} row(s)")
        a = self._arity
        return self._values[i * a : i * a + a]

    def __iter__(self) -> Iterator[list[Any]]:
        a = self._arity
        values = self._values
        for i in range(len(self._edges)):
            yield values[i * a : i * a + a]

    def __repr__(self) -> str:
        src = self._src
        return (
            f"Batch({len(self._edges)} row(s), source={src.component}:{src.task}, "
            f"stream={src.stream!r})"
        )

    # -- for the runtime ------------------------------------------------------------

    def _root_of(self, i: int) -> Id:
        """Row ``i``'s tree (0: untracked, or in several trees: see ``_multi``)."""
        roots = self._roots
        if len(roots) == 1:
            return roots[0]
        row_roots = self._row_roots
        if row_roots is None:
            row_roots = []
            for root, count in zip(roots, self._counts, strict=True):
                row_roots.extend([root] * count)
            self._row_roots = row_roots
        return row_roots[i]

    def _trees_of(self, i: int) -> dict[Id, Id]:
        """``{root: edge}`` for every tree row ``i`` is in (empty when untracked). The
        edge is 0 on a run's later rows in a Batch a BatchBolt emitted to another."""
        multi = self._multi
        if multi is not None:
            edges = multi.get(i)
            if edges is not None:
                return dict(edges)
        root = self._root_of(i)
        return {root: self._edges[i]} if root else {}

    def _all_roots(self) -> list[Id]:
        """Every tree of the batch, each once, in the order of their first row."""
        seen: dict[Id, None] = {}
        for root in self._roots:
            if root:
                seen[root] = None
        if self._multi is not None:
            for edges in self._multi.values():
                for root in edges:
                    seen[root] = None
        return list(seen)

    def _split(self) -> tuple[Batch, Batch] | None:
        """Two Batches holding this one's rows, cut at the run boundary nearest the
        middle; None for a single run. Never inside a run: a run a BatchBolt emitted
        carries its tree's one edge on its first row (the module's notes), so both parts
        of a cut run would be acked with the edge counted once, the second part free
        to be lost. For a frame too large to send (distributed/transport.py)."""
        roots = self._roots
        counts = self._counts
        if len(roots) < 2:
            return None
        half = len(self._edges) // 2
        at = 0  # rows before run j
        j = 0
        while j < len(counts) - 1 and at + counts[j] <= half:
            at += counts[j]
            j += 1
        if j == 0:  # the first run holds the middle: cut after it
            at = counts[0]
            j = 1
        a = self._arity
        multi = self._multi
        first_multi: dict[int, dict[Id, Id]] | None = None
        second_multi: dict[int, dict[Id, Id]] | None = None
        if multi is not None:
            first_multi = {r: t for r, t in multi.items() if r < at} or None
            second_multi = {r - at: t for r, t in multi.items() if r >= at} or None
        src = self._src
        values = self._values
        edges = self._edges
        first = Batch(src, values[: at * a], roots[:j], counts[:j], edges[:at], first_multi)
        second = Batch(src, values[at * a :], roots[j:], counts[j:], edges[at:], second_multi)
        return first, second

    def _rows_per_tree(self) -> dict[Id, int]:
        """How many of the batch's rows each of its trees has."""
        out: dict[Id, int] = {}
        roots = self._roots
        counts = self._counts
        for j in range(len(roots)):
            if roots[j]:
                out[roots[j]] = out.get(roots[j], 0) + counts[j]
        if self._multi is not None:
            for trees in self._multi.values():
                for root in trees:
                    out[root] = out.get(root, 0) + 1
        return out

    def tree_acks(self, acks: dict[Id, Id], skip: set[Id] | None = None) -> None:
        """XOR into ``acks`` (root -> value), per tree, the edges of the batch's rows:
        what acking every row would send, less the children's edges (the collector
        XORs those in as they are emitted). Trees in ``skip`` (failed) get nothing."""
        edges = self._edges
        roots = self._roots
        counts = self._counts
        row = 0
        for j in range(len(roots)):
            root: Id = roots[j]
            stop = row + counts[j]
            if root and (skip is None or root not in skip):
                val: Id = 0
                for k in range(row, stop):
                    edge: Id = edges[k]
                    if edge:  # a Batch a BatchBolt emitted has one edge per run of a tree
                        val ^= edge
                acks[root] = acks.get(root, 0) ^ val
            row = stop
        if self._multi is not None:
            for tree_edges in self._multi.values():
                for root, edge in tree_edges.items():
                    if skip is None or root not in skip:
                        acks[root] = acks.get(root, 0) ^ edge
