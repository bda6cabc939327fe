"""BatchCollector: what a BatchBolt's ``execute_batch`` emits, fails and reports through.

Design notes:
- An emit names the input row it is anchored to (``row=i``), or none (untracked). The
  child's edge is XORed into the row's tree on the spot (a run accumulator, flushed
  into ``children`` when the tree changes: a row's emits come in a row). When the batch
  is acked, each tree's rows' edges are XORed in too (``Batch.tree_acks``) and the sum
  joins the turn's acks (``OutputCollector.acks``, one ACK per tree per turn): exactly
  what acking each row after its emits would send.
- Where the output goes decides its form, per target task (``_kinds``):
  - a BatchBolt's task, on any worker (``BATCH``): the emits are buffered as one Batch,
    delivered when the executor's turn is done (``deliver``). Such a Batch is acked
    whole, never row by row, so the rows of one tree in it need one edge between them,
    not one each: the first row of each run of a tree carries a fresh edge, the others
    0 (which XORs to nothing and allocates nothing). That saves an id, an XOR and the
    int's trip per row; a row in several trees keeps an edge of its own.
  - a task of another worker that takes Tuples (``PEER``): buffered as a Batch too
    (the frame is columnar anyway; the receiver rebuilds a Tuple per row), with an edge
    per row, since each Tuple is acked on its own;
  - a task of this worker that takes Tuples: one Tuple per emit, at once, as from any
    collector.
  Each target always takes one of these paths, so the order of what one task emits to
  another is kept (Storm's promise); a buffer is also delivered before one for the same
  target from another stream, for the same reason.
- Nothing an emit accepted is dropped: the buffers are delivered whether the batch is
  acked or failed (its children are then in failed trees, as a BasicBolt's are).
- Buffers are delivered once per turn (every input batch of it), not once per input
  batch. Why: a task takes one small batch from each task upstream per round (one from
  every peer's frame, one per local task), and emitting each one's rows to N targets
  as N Batches of its own made N objects per input batch: at parallelism 16 (all
  local) the Batches and their buffers were ~25k instructions a sentence of ~97k over
  one task's (notes/performance.md, stop 33). A tree's run of rows may then continue
  across input batches of a turn with no new edge: it stays in one output Batch,
  which is acked whole, and its one edge is in the first batch's ack.
"""

from __future__ import annotations

from typing import Any

from tupletree.errors import EmitError
from tupletree.reliability.ids import Id
from tupletree.reliability.protocol import FAIL, RESET
from tupletree.runtime.collectors import OutputCollector
from tupletree.runtime.routing import StreamRoute
from tupletree.runtime.target_kinds import BATCH, TUPLES
from tupletree.topology.batch import Batch
from tupletree.topology.components import DEFAULT_STREAM
from tupletree.topology.tuple import Tuple, TupleSource


class _Output:
    """Emits buffered for one target task from one route, in a Batch's layout."""

    __slots__ = ("counts", "edges", "last", "multi", "roots", "src", "values")

    def __init__(self, src: TupleSource) -> None:
        self.src = src
        self.values: list[Any] = []
        self.roots: list[Id] = []
        self.counts: list[int] = []
        self.edges: list[Id] = []
        self.multi: dict[int, dict[Id, Id]] | None = None
        self.last: Id = -1  # the root of the last run (-1: no run yet)

    def batch(self) -> Batch:
        return Batch(self.src, self.values, self.roots, self.counts, self.edges, self.multi)


class BatchCollector:
    """``emit(values, row=None, stream="default")``, ``emit_direct``, ``fail(row)``,
    ``reset_timeout(row)``, ``report_error(exc)``, for BatchBolts."""

    __slots__ = (
        "_batch",
        "_failed",
        "_failed_rows",
        "_kinds",
        "_out",
        "_outputs",
        "_routes",
        "_row",
        "_row_root",
        "_row_trees",
        "_run_root",
        "_run_val",
        "children",
    )

    def __init__(self, out: OutputCollector, kinds: list[int]) -> None:
        self._out = out
        self._routes = out._routes
        self._kinds = kinds  # task id -> TUPLES, PEER or BATCH
        self._batch: Batch | None = None
        self.children: dict[Id, Id] = {}  # root -> XOR of the edges anchored in it
        self._run_root: Id = 0  # the tree of the last anchored emits, and their XOR
        self._run_val: Id = 0
        self._row = -1  # the row of the last anchored emit, its tree(s)
        self._row_root: Id = 0
        self._row_trees: dict[Id, Id] | None = None
        self._failed: set[Id] = set()  # trees failed by fail(row) in this batch
        self._failed_rows: set[int] = set()
        self._outputs: dict[int, _Output] = {}

    # -- for the executor ------------------------------------------------------------

    def begin(self, batch: Batch) -> None:
        self._batch = batch
        self._row = -1

    def finish(self, ok: bool) -> int:
        """End the current batch: ack its trees (``ok``) or fail them all; return how
        many of its rows failed. Its emits stay buffered for ``deliver``."""
        batch = self._batch
        assert batch is not None
        out = self._out
        failed = self._failed
        children = self.children
        if self._run_root:
            children[self._run_root] = children.get(self._run_root, 0) ^ self._run_val
            self._run_root = 0
            self._run_val = 0
        n = len(batch)
        failed_rows = len(self._failed_rows)
        metrics = out._metrics
        if ok:
            acks = out.acks
            for root, val in children.items():
                if root not in failed:
                    acks[root] = acks.get(root, 0) ^ val
            batch.tree_acks(acks, failed if failed else None)
            metrics.acked += n - failed_rows
        else:
            self._fail_trees([r for r in batch._all_roots() if r not in failed])
            metrics.failed += n - failed_rows
            failed_rows = n
        children.clear()
        failed.clear()
        self._failed_rows.clear()
        self._batch = None
        self._row = -1
        return failed_rows

    def deliver(self) -> None:
        """Hand the buffered emits to their tasks: one Batch per target task (and
        stream) for the whole turn. The executor calls it once a turn, after the last
        ``finish``. Before or after the turn's acks makes no difference: a tree's ack
        carries its children's edges, so it cannot read zero before they are acked."""
        outputs = self._outputs
        if outputs:
            deliver = self._out._deliver
            for task, output in outputs.items():
                deliver[task](output.batch())
            outputs.clear()

    def _fail_trees(self, roots: list[Id]) -> None:
        out = self._out
        deliver, ackers, n = out._deliver, out._acker_tasks, out._n_ackers
        for root in roots:
            deliver[ackers[root % n]]((FAIL, root, 0, 0))

    # -- for the bolt ----------------------------------------------------------------

    def emit(self, values: Any, row: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` on ``stream``, anchored to input row ``row`` (an int; None:
        untracked). Returns the target task ids."""
        route = self._routes.get(stream)
        if route is None or type(values) is not list or len(values) != route.nfields:
            route, values = self._out._checked(stream, values)
        targets: list[int] = route.choose(values)
        self._send(route, values, targets, row, stream)
        return targets[:]

    def emit_direct(
        self, task: int, values: Any, row: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        route, values = self._out._direct_route(task, values, stream)
        self._send(route, values, [task], row, stream)
        return [task]

    def _send(
        self, route: StreamRoute, values: list[Any], targets: list[int], row: Any, stream: str
    ) -> None:
        out = self._out
        metrics = out._metrics
        metrics.emitted += 1
        metrics.transferred += len(targets)
        src = route.src
        root: Id = 0
        trees: dict[Id, Id] | None = None
        if row is not None:
            if type(row) is int and row == self._row:  # the last emit's row: known
                root = self._row_root
                trees = self._row_trees
            else:
                self._anchor_row(row, stream)
                root = self._row_root
                trees = self._row_trees
            if self._failed_rows:
                root, trees = self._live_anchors(row, root, trees, stream)
        kinds = self._kinds
        pop = out._id_pop
        for t in targets:
            kind = kinds[t]
            if kind == BATCH and trees is None:
                self._buffer_run(t, src, values, root)
                continue
            edge: Id = 0
            if root:
                edge = self._child_edge(root)
            elif trees is not None:
                try:
                    edge = pop()
                except IndexError:
                    edge = out._next_id()
                children = self.children
                for r in trees:
                    children[r] = children.get(r, 0) ^ edge
            if kind != TUPLES:
                self._buffer_row(t, src, values, root, edge, trees)
            elif trees is not None:
                out._deliver[t](Tuple(values, src, 0, 0, dict.fromkeys(trees, edge)))
            else:
                out._deliver[t](Tuple(values, src, root, edge))

    def _child_edge(self, root: Id) -> Id:
        """A fresh edge for a child in ``root``'s tree, XORed into that tree's run."""
        out = self._out
        try:
            edge: Id = out._id_pop()
        except IndexError:
            edge = out._next_id()
        if root is self._run_root or root == self._run_root:
            self._run_val ^= edge
        else:
            self._new_run(root, edge)
        return edge

    def _new_run(self, root: Id, edge: Id) -> None:
        """Start accumulating the edges of ``root``'s tree, keeping the previous one's."""
        if self._run_root:
            children = self.children
            children[self._run_root] = children.get(self._run_root, 0) ^ self._run_val
        self._run_root = root
        self._run_val = edge

    def _output(self, task: int, src: TupleSource, values: list[Any]) -> _Output:
        """The buffer for ``task`` from ``src``, with a row of ``values`` added."""
        output = self._outputs.get(task)
        if output is None or output.src is not src:
            if output is not None:  # another stream's emits to this task go first
                self._out._deliver[task](output.batch())
            output = self._outputs[task] = _Output(src)
        if len(values) == 1:
            output.values.append(values[0])
        else:
            output.values.extend(values)
        return output

    def _buffer_run(self, task: int, src: TupleSource, values: list[Any], root: Id) -> None:
        """A row for a BatchBolt's task: one edge per run of a tree's rows."""
        output = self._output(task, src, values)
        counts = output.counts
        if counts and (root is output.last or root == output.last):
            counts[-1] += 1
            output.edges.append(0)
            return
        edge: Id = self._child_edge(root) if root else 0
        output.roots.append(root)
        counts.append(1)
        output.last = root
        output.edges.append(edge)

    def _buffer_row(
        self,
        task: int,
        src: TupleSource,
        values: list[Any],
        root: Id,
        edge: Id,
        trees: dict[Id, Id] | None,
    ) -> None:
        """A row with an edge of its own (for a peer's task that takes Tuples, or a row
        in several trees)."""
        output = self._output(task, src, values)
        if trees is not None:
            if output.multi is None:
                output.multi = {}
            output.multi[len(output.edges)] = dict.fromkeys(trees, edge)
            root = 0
            edge = 0
            output.last = -1  # the rows after it start a run of their own
        counts = output.counts
        if counts and (root is output.last or root == output.last):
            counts[-1] += 1
        else:
            output.roots.append(root)
            counts.append(1)
            output.last = root
        output.edges.append(edge)

    def _anchor_row(self, row: Any, stream: str) -> None:
        """Check ``row`` and note its tree(s) for this and the next emits."""
        batch = self._input_row(row, stream)
        self._row = row
        multi = batch._multi
        trees = multi.get(row) if multi is not None else None
        self._row_trees = trees
        self._row_root = 0 if trees is not None else batch._root_of(row)

    def _live_anchors(
        self, row: int, root: Id, trees: dict[Id, Id] | None, stream: str
    ) -> tuple[Id, dict[Id, Id] | None]:
        """An emit's anchors to ``row`` less the trees this batch already failed.

        Decision: an emit anchored to a row the bolt failed itself raises EmitError (the
        emit came too late, a bug to hear of). One anchored to a row whose tree was
        failed through another row goes out without that tree, untracked if no tree is
        left: a spout's ``emit_batch`` puts many rows in one tree, and a bolt that fails
        a bad row and goes on with the others is doing the expected thing. The failed
        tree is replayed whole; in Storm a tuple anchored to a failed tree is processed
        and its ack does nothing, and here it is simply not tracked.
        """
        if row in self._failed_rows:
            out = self._out
            raise EmitError(
                f"component {out._component!r} anchored an emit to row {row}, which it "
                "already failed; emit anchored tuples before failing the row",
                component=out._component,
                stream=stream,
            )
        failed = self._failed
        if trees is None:
            return (0, None) if root in failed else (root, None)
        live = {r: edge for r, edge in trees.items() if r not in failed}
        if not live:
            return 0, None
        return 0, live

    def _input_row(self, row: Any, stream: str) -> Batch:
        """The current batch, once ``row`` is checked to be one of its rows."""
        batch = self._batch
        out = self._out
        if batch is None:
            raise EmitError(
                f"component {out._component!r}: emit anchored to row {row!r} outside "
                "execute_batch (the batch is done; emit unanchored, row=None)",
                component=out._component,
                stream=stream,
            )
        if type(row) is not int or not 0 <= row < len(batch):
            raise EmitError(
                f"component {out._component!r}: row must be the index of an input row "
                f"(0 to {len(batch) - 1}), got {row!r}",
                component=out._component,
                stream=stream,
            )
        return batch

    def fail(self, row: int) -> None:
        """Fail the trees of input row ``row`` now (the other rows are acked when
        execute_batch returns; a row of a failed tree is acked to no effect, as a
        tuple of a failed tree is in Storm). Failing a row twice fails it once."""
        batch = self._input_row(row, DEFAULT_STREAM)
        if row in self._failed_rows:
            return
        self._failed_rows.add(row)
        self._out._metrics.failed += 1
        failed = self._failed
        trees = [r for r in batch._trees_of(row) if r not in failed]
        failed.update(trees)
        self._fail_trees(trees)

    def reset_timeout(self, row: int) -> None:
        """Keep the trees of input row ``row`` alive: restart their timeout at the
        acker and the spout."""
        batch = self._input_row(row, DEFAULT_STREAM)
        out = self._out
        deliver, ackers, n = out._deliver, out._acker_tasks, out._n_ackers
        for root in batch._trees_of(row):
            if root not in self._failed:
                deliver[ackers[root % n]]((RESET, root, 0, 0))

    def report_error(self, exc: BaseException) -> None:
        """Report an error to the cluster (visible in ``cluster.errors(name)``)."""
        self._out.report_error(exc)
