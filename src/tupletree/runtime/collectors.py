"""Output collectors: how user code emits, acks and fails. This is the hot path.

Design notes:
- An emit resolves its stream to a precomputed ``StreamRoute``, asks the routers for
  target tasks, and appends one ``Tuple`` per target to that task's inbox. Inside a
  worker nothing is serialized; a remote task's inbox is a transport buffer with the
  same ``append``. The common case (a declared, non-direct stream, a list of the right
  length) is checked in one line; everything else goes to ``_resolve``, which fixes up
  or raises an EmitError naming the component and stream.
- Ids come from the task's IdGenerator buffer (``pop``, a C call), refilled in bulk.
- Acks are not sent one by one: a bolt's acks during one executor turn are XOR-combined
  per root into ``acks`` and flushed once at the end of the turn (exact, because XOR is
  associative and commutative). A combined value of 0 is not sent: it cannot change the
  tree's value, and completion is detected by the message that brings it to zero.
  On a worker, its bolt tasks share one such dict and the worker sends it once per
  round instead (runtime/worker_acks.py): one message a tree a round, whatever number
  of its tasks the tree reached.
  Fails and timeout resets are sent at once.
- A settled tuple (acked or failed) has ``_ack_val = SETTLED`` (-1): acking it again is
  ignored (a double ack would corrupt the tree's XOR), and anchoring to it is an error,
  because the child would be missing from the tree that the ack already closed.
- ``emit`` returns a list of its own (the routers' lists are shared between emits; a
  caller that extended the returned list would change where later tuples go).
- A tuple belongs to the topology instance whose task emitted it (``TupleSource.owner``).
  Acking, failing or anchoring to another topology's tuple raises: its ack would go to
  this topology's ackers, which do not know the tree, and the other topology's tree
  would time out with no error anywhere.
- A collector is built from one ``TaskWiring``: what the task is connected to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Final

from tupletree.errors import EmitError
from tupletree.reliability.anchoring import anchor_child
from tupletree.reliability.ids import Id, IdGenerator
from tupletree.reliability.protocol import FAIL, INIT, RESET
from tupletree.runtime.error_log import safe_repr
from tupletree.runtime.metrics import TaskMetrics
from tupletree.runtime.routing import StreamRoute
from tupletree.runtime.target_kinds import BATCH, TUPLES
from tupletree.runtime.worker_acks import WorkerAcks
from tupletree.topology.batch import Batch
from tupletree.topology.components import DEFAULT_STREAM
from tupletree.topology.tuple import Tuple, in_trees

SETTLED: Final = -1


def _no_report(exc: BaseException) -> None:
    pass


class TaskWiring:
    """What one task's collector is connected to, built once per task by its worker.

    ``routes``: stream -> StreamRoute of this task's component; ``inboxes``: every task
    id of the topology -> something with ``append`` (a local deque or a transport
    buffer); ``acker_tasks``: the acker task ids, a tree's acker being
    ``acker_tasks[root % len(acker_tasks)]``; ``local_ackers``: indexes into
    ``acker_tasks`` of the ackers on this worker (a spout steers its roots to them);
    ``owner``: the topology instance this task belongs to (see ``TupleSource.owner``);
    ``report``: where ``collector.report_error`` goes; ``target_kinds``: task id -> the
    form a BatchBolt's emits take to it (runtime/batch_collector.py); ``worker_acks``:
    the worker's combined acks (runtime/worker_acks.py), which a bolt's collector then
    adds to and the worker sends once a round (None: the collector sends its own at the
    end of each turn).
    """

    __slots__ = (
        "acker_tasks",
        "component",
        "ids",
        "inboxes",
        "local_ackers",
        "metrics",
        "owner",
        "report",
        "routes",
        "target_kinds",
        "task",
        "worker_acks",
    )

    def __init__(
        self,
        component: str,
        task: int,
        routes: dict[str, StreamRoute],
        inboxes: dict[int, Any],
        *,
        acker_tasks: list[int] | None = None,
        ids: IdGenerator | None = None,
        metrics: TaskMetrics | None = None,
        report: Callable[[BaseException], None] | None = None,
        local_ackers: list[int] | None = None,
        owner: str | None = None,
        target_kinds: list[int] | None = None,
        worker_acks: WorkerAcks | None = None,
    ) -> None:
        self.component = component
        self.task = task
        self.routes = routes
        self.inboxes = inboxes
        self.acker_tasks: list[int] = acker_tasks if acker_tasks is not None else []
        self.ids: IdGenerator = ids if ids is not None else IdGenerator()
        self.metrics: TaskMetrics = metrics if metrics is not None else TaskMetrics()
        self.report: Callable[[BaseException], None] = report if report is not None else _no_report
        self.local_ackers: list[int] = local_ackers if local_ackers is not None else []
        self.owner = owner
        self.target_kinds: list[int] = target_kinds if target_kinds is not None else []
        self.worker_acks = worker_acks


def _resolve(
    routes: dict[str, StreamRoute], component: str, stream: str, values: Any, direct: bool
) -> tuple[StreamRoute, list[Any]]:
    """The slow path of an emit's checks, kept out of line; raises EmitError."""
    route = routes.get(stream)
    if route is None:
        raise EmitError(
            f"component {component!r} emitted on undeclared stream {stream!r}; it declares "
            f"{sorted(routes) or 'no streams'}",
            component=component,
            stream=stream,
        )
    if route.direct and not direct:
        raise EmitError(
            f"component {component!r}: stream {stream!r} is direct; use emit_direct",
            component=component,
            stream=stream,
        )
    if direct and not route.direct:
        raise EmitError(
            f"component {component!r}: emit_direct on stream {stream!r}, which is not "
            "declared direct (declare_stream(..., direct=True))",
            component=component,
            stream=stream,
        )
    if isinstance(values, (Mapping, AbstractSet)):
        # A dict would send its keys, a set its members in an arbitrary order: never
        # what was meant. Storm's emit takes a list of values in the declared order.
        raise EmitError(
            f"component {component!r} stream {stream!r}: values must be a list in the "
            f"order of the declared fields {route.src.fields.to_list()}, got a "
            f"{type(values).__name__} ({safe_repr(values)}); for a dict d, emit "
            f"[d[f] for f in {route.src.fields.to_list()}]",
            component=component,
            stream=stream,
        )
    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise EmitError(
            f"component {component!r} stream {stream!r}: values must be a list, got "
            f"{type(values).__name__} {safe_repr(values)} (did you mean [{safe_repr(values)}]?)",
            component=component,
            stream=stream,
        )
    values = list(values)
    if len(values) != route.nfields:
        raise EmitError(
            f"component {component!r} emitted {len(values)} value(s) on stream {stream!r}, "
            f"which declares {route.nfields} field(s) {route.src.fields.to_list()}",
            component=component,
            stream=stream,
        )
    return route, values


class _Base:
    __slots__ = (
        "_acker_tasks",
        "_all_routes",
        "_component",
        "_deliver",
        "_id_pop",
        "_metrics",
        "_n_ackers",
        "_next_id",
        "_owner",
        "_report",
        "_routes",
        "_task",
    )

    def __init__(self, wiring: TaskWiring) -> None:
        routes = wiring.routes
        self._component = wiring.component
        self._task = wiring.task
        self._owner = wiring.owner
        self._all_routes = routes
        # ``emit`` looks up only non-direct streams; a direct one falls to _resolve.
        self._routes = {s: r for s, r in routes.items() if not r.direct}
        # Task id -> its inbox's bound ``append``: calling it skips a method lookup per
        # delivery (measured: notes/performance.md).
        # A worker's inboxes never change once it is built.
        self._deliver: dict[int, Callable[[Any], None]] = {
            t: box.append for t, box in wiring.inboxes.items()
        }
        acker_tasks = wiring.acker_tasks
        self._acker_tasks = acker_tasks
        self._n_ackers = len(acker_tasks)
        ids = wiring.ids
        self._id_pop = ids.pop
        self._next_id = ids.next_id
        self._metrics = wiring.metrics
        self._report = wiring.report

    def report_error(self, exc: BaseException) -> None:
        """Report an error to the cluster (visible in ``cluster.errors(name)``)."""
        self._report(exc)

    def _new_id(self) -> Id:
        """A fresh id from the task's buffer. The per-tuple paths (``_send``, the bolt
        collectors' emits, BatchCollector._child_edge) inline these four lines rather
        than pay a method call per id."""
        try:
            return self._id_pop()
        except IndexError:
            return self._next_id()

    def _checked(self, stream: str, values: Any) -> tuple[StreamRoute, list[Any]]:
        return _resolve(self._all_routes, self._component, stream, values, False)

    def _direct_route(self, task: int, values: Any, stream: str) -> tuple[StreamRoute, list[Any]]:
        route, values = _resolve(self._all_routes, self._component, stream, values, True)
        if task not in route.direct_tasks:
            raise EmitError(
                f"component {self._component!r}: emit_direct to task {task}, which does not "
                f"subscribe to stream {stream!r} with a direct grouping (subscribers: "
                f"{sorted(route.direct_tasks)})",
                component=self._component,
                stream=stream,
            )
        return route, values


class SpoutOutputCollector(_Base):
    """``emit(values, msg_id=None, stream="default")`` and friends, for spouts.

    Acker affinity: a tree's acker is ``acker_tasks[root % n]`` (Storm's rule), and the
    spout chooses the root. When some ackers run on this worker, the random root's low
    residue is set to one of theirs, so the init and the verdict never leave the worker.
    The root stays a random non-zero 64-bit id; only which acker tracks it is steered.
    """

    __slots__ = ("_executor", "_kinds", "_local_ackers", "_next_local")

    def __init__(self, wiring: TaskWiring, executor: Any) -> None:
        super().__init__(wiring)
        self._executor = executor
        self._kinds = wiring.target_kinds  # empty when wired by hand: Tuples for all
        n = self._n_ackers
        local = sorted(wiring.local_ackers)
        # Only worth steering when there is a choice to make.
        self._local_ackers = local if n and 0 < len(local) < n else None
        self._next_local = 0

    def emit(self, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        route = self._routes.get(stream)
        if route is None or type(values) is not list or len(values) != route.nfields:
            route, values = self._checked(stream, values)
        targets: list[int] = route.choose(values)
        self._send(route, values, targets, msg_id)
        return targets[:]

    def emit_direct(
        self, task: int, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        route, values = self._direct_route(task, values, stream)
        self._send(route, values, [task], msg_id)
        return [task]

    def emit_batch(self, rows: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``rows`` (a list of value lists) as one tuple tree: one root, one pending
        entry, one verdict. The spout's ``ack(msg_id)`` comes when every row's tree is
        done, ``fail(msg_id)`` when any part of it fails or times out, and the whole
        batch is then the unit of replay. Returns the tasks that got at least one row.

        Rows are routed by the stream's groupings, with one difference from ``emit``: a
        shuffle sends the rows in runs of at least 50, each run to the next task in turn,
        and all and global route the batch whole (StreamRoute.route_batch). A BatchBolt's
        task gets its rows as one Batch with one edge (it acks a batch whole); any other
        task gets one Tuple per row, each with an edge of its own. Every row is checked
        before anything is sent: a bad row raises EmitError and nothing of the batch is
        emitted. ``msg_id=None``: the rows are not tracked. Max spout pending counts
        trees, so a batch is one (as Trident's max spout pending counts batches).
        """
        if type(rows) is not list:
            if isinstance(rows, str | bytes | Mapping | AbstractSet) or not hasattr(
                rows, "__iter__"
            ):
                raise EmitError(
                    f"component {self._component!r} stream {stream!r}: emit_batch takes a "
                    f"list of rows (each a list of values), got {type(rows).__name__} "
                    f"{safe_repr(rows)}",
                    component=self._component,
                    stream=stream,
                )
            rows = list(rows)
        route = self._routes.get(stream)
        checked: list[list[Any]] = []
        for i, values in enumerate(rows):
            if route is None or type(values) is not list or len(values) != route.nfields:
                refused: str | None = None
                try:
                    route, values = self._checked(stream, values)
                except EmitError as exc:
                    refused = str(exc)
                if refused is not None:
                    # Raised here, not in the except: the compiled build would keep the
                    # row's own EmitError as the context despite ``from None``.
                    raise EmitError(
                        f"emit_batch, row {i} of {len(rows)}: {refused}",
                        component=self._component,
                        stream=stream,
                    )
            checked.append(values)
        if route is None:  # no rows, and not a declared non-direct stream: raises
            route = self._checked(stream, [])[0]
        per_task = route.route_batch(checked)
        metrics = self._metrics
        metrics.emitted += len(checked)
        # A tree that reaches no task (no rows, or no subscriber) is complete at once:
        # acked right after next_tuple, as Storm acks a spout tuple with no targets.
        tracked = msg_id is not None and self._n_ackers > 0 and bool(per_task)
        root: Id = 0
        if tracked:
            root = self._new_id()
            local = self._local_ackers
            if local is not None:
                root = self._steer(root, local)
        init = 0
        kinds = self._kinds
        n_kinds = len(kinds)
        deliver = self._deliver
        src = route.src
        for t, got in per_task.items():
            metrics.transferred += len(got)
            kind = kinds[t] if t < n_kinds else TUPLES
            if kind != TUPLES:  # a Batch, to a BatchBolt or over the wire
                n = len(got)
                flat: list[Any] = []
                for values in got:
                    flat.extend(values)
                edges: list[Id]
                if not tracked:
                    edges = [0] * n
                elif kind == BATCH:  # acked whole: one edge for the run
                    edges = [0] * n
                    edges[0] = edge = self._new_id()
                    init ^= edge
                else:  # each row rebuilt as a Tuple and acked on its own
                    edges = []
                    for _ in range(n):
                        edge = self._new_id()
                        init ^= edge
                        edges.append(edge)
                deliver[t](Batch(src, flat, [root], [n], edges))
            elif tracked:
                put = deliver[t]
                for values in got:
                    edge = self._new_id()
                    init ^= edge
                    put(Tuple(values, src, root, edge))
            else:
                put = deliver[t]
                for values in got:
                    put(Tuple(values, src))
        if tracked:
            self._executor.track(root, msg_id)
            deliver[self._acker_tasks[root % self._n_ackers]]((INIT, root, init, self._task))
        elif msg_id is not None:  # at-most-once, or no task reached: acked after next_tuple
            self._executor.immediate_acks.append(msg_id)
        return list(per_task)

    def _send(self, route: StreamRoute, values: list[Any], targets: list[int], msg_id: Any) -> None:
        deliver = self._deliver
        src = route.src
        metrics = self._metrics
        metrics.emitted += 1
        metrics.transferred += len(targets)
        if msg_id is None:
            for t in targets:
                deliver[t](Tuple(values, src))
            return
        if not self._n_ackers:
            # At-most-once: nothing is tracked; the spout hears ack right after next_tuple.
            for t in targets:
                deliver[t](Tuple(values, src))
            self._executor.immediate_acks.append(msg_id)
            return
        pop = self._id_pop
        try:
            root = pop()
        except IndexError:
            root = self._next_id()
        local = self._local_ackers
        if local is not None:
            root = self._steer(root, local)
        init = 0
        for t in targets:
            try:
                edge = pop()
            except IndexError:
                edge = self._next_id()
            init ^= edge
            deliver[t](Tuple(values, src, root, edge))
        self._executor.track(root, msg_id)
        deliver[self._acker_tasks[root % self._n_ackers]]((INIT, root, init, self._task))

    def _steer(self, root: Id, local: list[int]) -> Id:
        n = self._n_ackers
        i = self._next_local
        self._next_local = i + 1 if i + 1 < len(local) else 0
        steered = root - root % n + local[i]
        if steered >= 1 << 64:
            steered -= n
        return steered or n + local[i]


class OutputCollector(_Base):
    """``emit(values, anchors=None, stream="default")``, ``ack``, ``fail``,
    ``reset_timeout``, ``report_error``, for bolts.

    Deferred acks (for a bolt that may ack an input only later, as a stateful bolt at
    its checkpoint's commit): ``defer_ack(tup)`` settles the tuple now (it can no
    longer be acked, failed or anchored to) and keeps its ack value, XOR-combined per
    tree, in ``deferred``; ``take_deferred()`` hands that over as a batch
    ``({root: value}, tuples)``; ``release_deferred(batch)`` acks the batch's trees (as
    the tuples' acks would have, at the end of the turn) and ``fail_deferred(batch)``
    fails them. A batch is one int per tree, not the tuples: holding a checkpoint
    interval's tuples alive cost a stateful word count a quarter of its time in the
    cyclic GC (notes/performance.md).
    """

    __slots__ = ("_own_acks", "acks", "deferred", "deferred_count")

    def __init__(self, wiring: TaskWiring) -> None:
        super().__init__(wiring)
        shared = wiring.worker_acks
        # With the worker's combined acks, ``acks`` is the worker's dict and ``flush``
        # leaves the sending to the worker's round (runtime/worker_acks.py); without,
        # the collector sends its own at the end of each turn.
        self._own_acks: WorkerAcks | None = None
        if shared is None:
            shared = self._own_acks = WorkerAcks(self._deliver, self._acker_tasks)
        self.acks: dict[Id, Id] = shared.acks
        self.deferred: dict[Id, Id] = {}
        self.deferred_count = 0

    def defer_ack(self, tup: Any) -> None:
        try:
            t: Tuple = tup  # a cast on the compiled build: TypeError
            ack_val = t._ack_val
        except (AttributeError, TypeError):
            pass  # raised below, outside the except (see _not_a_tuple)
        else:
            if ack_val < 0:
                return
            if t._src.owner is not self._owner:
                self._check_owner(t, "acked")
            t._ack_val = SETTLED
            self.deferred_count += 1
            deferred = self.deferred
            root = t._root
            if root:
                deferred[root] = deferred.get(root, 0) ^ t._edge ^ ack_val
            elif t._roots:
                for root, edge in t._roots.items():
                    deferred[root] = deferred.get(root, 0) ^ edge ^ ack_val
            return
        raise self._not_a_tuple("ack", tup)

    def take_deferred(self) -> tuple[dict[Id, Id], int]:
        batch = (self.deferred, self.deferred_count)
        self.deferred = {}
        self.deferred_count = 0
        return batch

    def release_deferred(self, batch: tuple[dict[Id, Id], int]) -> None:
        values, count = batch
        acks = self.acks
        for root, val in values.items():
            acks[root] = acks.get(root, 0) ^ val
        self._metrics.acked += count

    def fail_deferred(self, batch: tuple[dict[Id, Id], int]) -> None:
        values, count = batch
        deliver, ackers, n = self._deliver, self._acker_tasks, self._n_ackers
        for root in values:
            deliver[ackers[root % n]]((FAIL, root, 0, 0))
        self._metrics.failed += count

    def emit(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        route = self._routes.get(stream)
        if route is None or type(values) is not list or len(values) != route.nfields:
            route, values = self._checked(stream, values)
        targets: list[int] = route.choose(values)
        if type(anchors) is Tuple:
            if anchors._src.owner is not self._owner:
                self._check_owner(anchors, "anchored an emit to")
            self._send_anchored(route, values, targets, anchors)
        else:
            self._send(route, values, targets, anchors)
        return targets[:]

    def emit_direct(
        self, task: int, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        route, values = self._direct_route(task, values, stream)
        if type(anchors) is Tuple:
            if anchors._src.owner is not self._owner:
                self._check_owner(anchors, "anchored an emit to")
            self._send_anchored(route, values, [task], anchors)
        else:
            self._send(route, values, [task], anchors)
        return [task]

    def _send_anchored(
        self, route: StreamRoute, values: list[Any], targets: list[int], anchor: Tuple
    ) -> None:
        """One anchor, the common case: anchor_child inlined. The one implementation of
        an anchored emit: BasicOutputCollector.emit calls it too. Counted once the
        anchor is checked: a refused emit counts nothing."""
        if anchor._ack_val < 0:
            self._settled_anchor(anchor)
        metrics = self._metrics
        metrics.emitted += 1
        metrics.transferred += len(targets)
        deliver = self._deliver
        src = route.src
        pop = self._id_pop
        root = anchor._root
        if root:
            # One tree: the common case (Tuple's design note).
            for t in targets:
                try:
                    edge = pop()
                except IndexError:
                    edge = self._next_id()
                anchor._ack_val ^= edge
                deliver[t](Tuple(values, src, root, edge))
            return
        roots = anchor._roots
        if roots is None:
            for t in targets:
                deliver[t](Tuple(values, src))
            return
        for t in targets:
            try:
                edge = pop()
            except IndexError:
                edge = self._next_id()
            anchor._ack_val ^= edge
            deliver[t](Tuple(values, src, 0, 0, dict.fromkeys(roots, edge)))

    def _send(
        self, route: StreamRoute, values: list[Any], targets: list[int], anchors: Any
    ) -> None:
        """No anchor, or a list of anchors (multi-anchoring). Counted once the anchors
        are checked: an emit refused for them (TypeError, EmitError, ValueError) counts
        nothing, as it sends nothing."""
        metrics = self._metrics
        deliver = self._deliver
        src = route.src
        if anchors is None:
            metrics.emitted += 1
            metrics.transferred += len(targets)
            for t in targets:
                deliver[t](Tuple(values, src))
            return
        listed: list[Any] | None = None
        try:
            listed = list(anchors)
        except TypeError:  # the error is built only on this path
            kind = type(anchors)
            if hasattr(kind, "__iter__") or hasattr(kind, "__getitem__"):
                raise  # iterable: the TypeError came from iterating it, left as it is
        if listed is None:
            # Raised here, not in the except: the compiled build keeps the context
            # ("'int' object is not iterable") despite ``from None``.
            raise TypeError(
                f"component {self._component!r}: anchors must be Tuples (a Tuple or a list "
                f"of them), got {type(anchors).__name__} {safe_repr(anchors)}"
            )
        anchors = listed
        for a in anchors:
            if not isinstance(a, Tuple):
                raise TypeError(
                    f"component {self._component!r}: anchors must be Tuples, got {type(a).__name__}"
                )
            if a._ack_val < 0:
                self._settled_anchor(a)
            if a._src.owner is not self._owner:
                self._check_owner(a, "anchored an emit to")
        metrics.emitted += 1
        metrics.transferred += len(targets)
        for t in targets:
            deliver[t](in_trees(values, src, anchor_child(anchors, self._next_id)))

    def _settled_anchor(self, anchor: Tuple) -> None:
        raise EmitError(
            f"component {self._component!r} anchored an emit to a tuple it already acked "
            f"or failed ({anchor!r}); emit anchored tuples before acking the input",
            component=self._component,
            stream=anchor.source_stream,
        )

    def _check_owner(self, tup: Tuple, what: str) -> None:
        """Raise unless ``tup`` belongs to this topology (or to none: ticks, a tuple a
        test made by hand, one rebuilt from another worker's frame)."""
        owner = tup._src.owner
        if owner is None or owner == self._owner:
            return
        raise ValueError(
            f"component {self._component!r} {what} a tuple of another topology "
            f"({owner}, stream {tup._src.stream!r} of {tup._src.component!r}); this task "
            f"belongs to {self._owner}. Its acker would never hear of it and its tree "
            "would time out: keep tuples in the topology that delivered them (state "
            "shared between topologies, such as a class attribute, is the usual cause)"
        )

    def _not_a_tuple(self, what: str, thing: Any) -> TypeError:
        """The error of ``ack``/``fail``/``reset_timeout`` given something else than a
        Tuple; built only once the call failed, so the normal path pays nothing.

        They raise it after their ``try``, not in its ``except``: the compiled build
        ignores ``from None`` and would keep the failed cast's "Tuple object expected"
        as the context, printed above this error. The Tuple's path is the ``else``, where
        ``t`` is surely bound (a ``t`` the except left unbound would cost a NULL check
        at each of its uses in the compiled build)."""
        if thing is None:
            got = "None"
        elif isinstance(thing, (list, tuple, set, frozenset)):
            got = f"a {type(thing).__name__} ({safe_repr(thing)}); call {what} once per tuple"
        else:
            got = f"{type(thing).__name__} {safe_repr(thing)}"
        return TypeError(f"component {self._component!r}: {what} takes one Tuple, got {got}")

    def ack(self, tup: Any) -> None:
        try:
            t: Tuple = tup  # a cast on the compiled build: TypeError
            ack_val = t._ack_val
        except (AttributeError, TypeError):
            pass  # raised below, outside the except (see _not_a_tuple)
        else:
            if ack_val < 0:
                return
            if t._src.owner is not self._owner:
                self._check_owner(t, "acked")
            t._ack_val = SETTLED
            self._metrics.acked += 1
            acks = self.acks
            root = t._root
            if root:
                acks[root] = acks.get(root, 0) ^ t._edge ^ ack_val
            elif t._roots:
                for root, edge in t._roots.items():
                    acks[root] = acks.get(root, 0) ^ edge ^ ack_val
            return
        raise self._not_a_tuple("ack", tup)

    def fail(self, tup: Any) -> None:
        try:
            t: Tuple = tup  # a cast on the compiled build: TypeError
            ack_val = t._ack_val
        except (AttributeError, TypeError):
            pass  # raised below, outside the except (see _not_a_tuple)
        else:
            if ack_val < 0:
                return
            if t._src.owner is not self._owner:
                self._check_owner(t, "failed")
            t._ack_val = SETTLED
            self._metrics.failed += 1
            deliver, ackers, n = self._deliver, self._acker_tasks, self._n_ackers
            for root in t._tree_edges():
                deliver[ackers[root % n]]((FAIL, root, 0, 0))
            return
        raise self._not_a_tuple("fail", tup)

    def reset_timeout(self, tup: Any) -> None:
        """Keep ``tup``'s trees alive: restart their timeout at the acker and the spout."""
        try:
            t: Tuple = tup  # a cast on the compiled build: TypeError
            ack_val = t._ack_val
        except (AttributeError, TypeError):
            pass  # raised below, outside the except (see _not_a_tuple)
        else:
            if ack_val >= 0:
                if t._src.owner is not self._owner:
                    self._check_owner(t, "reset the timeout of")
                deliver, ackers, n = self._deliver, self._acker_tasks, self._n_ackers
                for root in t._tree_edges():
                    deliver[ackers[root % n]]((RESET, root, 0, 0))
            return
        raise self._not_a_tuple("reset_timeout", tup)

    def flush(self) -> None:
        """Send this turn's XOR-combined acks, one message per root (unless they are
        the worker's combined acks: the worker sends those at the end of its round)."""
        own = self._own_acks
        if own is not None:
            own.flush()


class BasicOutputCollector:
    """What a BasicBolt's ``execute`` gets: every emit is anchored to the current input
    (``input``, set by the executor before each ``execute``)."""

    __slots__ = ("_out", "_routes", "input")

    def __init__(self, out: OutputCollector) -> None:
        self._out = out
        self._routes = out._routes
        self.input: Tuple | None = None

    def emit(self, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        out = self._out
        route = self._routes.get(stream)
        if route is None or type(values) is not list or len(values) != route.nfields:
            route, values = out._checked(stream, values)
        targets: list[int] = route.choose(values)
        anchor = self.input
        assert anchor is not None
        out._send_anchored(route, values, targets, anchor)
        return targets[:]

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit_direct(task, values, self.input, stream)

    def reset_timeout(self, tup: Tuple | None = None) -> None:
        self._out.reset_timeout(tup if tup is not None else self.input)  # type: ignore[arg-type]

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)
