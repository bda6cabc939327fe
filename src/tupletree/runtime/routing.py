"""Routing: turn each subscription's grouping into a router that picks target tasks.

Every emitting task gets, per declared stream, a ``StreamRoute`` precomputed at start:
the shared TupleSource, the field count, and one router per subscribing bolt, so an
emit costs one dict lookup plus one ``choose`` per subscriber.

Routers return shared, preallocated lists (``[task]`` singletons, the all-tasks list)
instead of building one per emit; callers must not mutate what ``choose`` returns (the
collectors hand the user a copy).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Mapping
from typing import Any, Final

from tupletree.config import Config
from tupletree.errors import InvalidTopologyError
from tupletree.runtime.context import TaskLayout, TopologyContext
from tupletree.runtime.error_log import describe
from tupletree.runtime.hashing import stable_hash, stable_hash_values
from tupletree.topology import groupings as g
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.groupings import Grouping
from tupletree.topology.tuple import TupleSource

_KEY_CACHE_LIMIT = 1 << 16
# A shuffle sends a spout's batch in runs of at least this many rows (route_batch).
SHUFFLE_RUN: Final = 50


class ShuffleRouter:
    """Round-robin over a shuffled task list: even load, no per-emit randomness."""

    __slots__ = ("_i", "_n", "_singles")

    def __init__(self, tasks: list[int], rng: random.Random) -> None:
        order = list(tasks)
        rng.shuffle(order)
        self._singles = [[t] for t in order]
        self._n = len(order)
        self._i = 0

    def choose(self, values: list[Any]) -> list[int]:
        i = self._i
        self._i = i + 1 if i + 1 < self._n else 0
        return self._singles[i]


# How many choices a load-aware shuffle makes between two looks at its local targets'
# load (Storm refreshes load once a second; a count needs no clock on the emit path).
LOAD_CHECK_EVERY = 256


class LoadAwareShuffleRouter:
    """Shuffle grouping as Storm 2 does it when some targets are on this worker and some are
    not (LoadAwareShuffleGrouping with locality awareness,
    https://storm.apache.org/releases/current/LocalityAwareness.html): round-robin over the
    worker-local targets while their average load stays under
    ``topology.localityaware.higher.bound``; over every target from then until it falls
    under ``topology.localityaware.lower.bound``. A tuple that stays in its worker is handed
    over in memory; one that crosses is encoded, sent and rebuilt (its cost:
    bench/transport.py, notes/performance.md).

    Load is Storm's: queued tuples over the receive buffer size
    (``topology.executor.receive.buffer.size``), averaged over the local targets.
    Storm has two scopes in between (host, rack); a worker here knows no such thing
    about its peers, so it goes from its own worker to everything. Storm also weighs
    targets by load inside a scope; this keeps the round-robin (the load of remote
    targets is not known here).

    Decision: off unless ``topology.disable.loadaware.messaging`` is False (Storm 2's
    default is on). Shuffle's contract, in Storm's documents and on LocalCluster, is an
    equal share for every task, and the issue that brought SparkCluster asks groupings
    to behave as on LocalCluster. And the load signal rarely fires here: in-worker
    backpressure and ``topology.max.spout.pending`` keep queues far under 80% of the
    receive buffer, so a topology with one spout task would run all of a shuffled
    bolt's work on the spout's worker while the other workers' tasks idle. Where spouts
    run in every worker it can be worth turning on: the 2-worker word count then keeps
    spout -> split in the worker. There it saves little (notes/performance.md): the
    words crossing workers cost far more than the sentence it keeps local.
    """

    __slots__ = (
        "_all",
        "_capacity",
        "_countdown",
        "_higher",
        "_i",
        "_inboxes",
        "_local",
        "_lower",
        "_singles",
    )

    def __init__(
        self,
        tasks: list[int],
        local_inboxes: dict[int, Any],
        buffer_size: int,
        higher: float,
        lower: float,
        rng: random.Random,
    ) -> None:
        order = list(tasks)
        rng.shuffle(order)
        self._all = [[t] for t in order]
        self._local = [[t] for t in order if t in local_inboxes]
        self._inboxes = [local_inboxes[t] for t in order if t in local_inboxes]
        self._capacity = float(buffer_size * len(self._inboxes))
        self._higher = higher
        self._lower = lower
        self._singles = self._local
        self._i = 0
        self._countdown = LOAD_CHECK_EVERY

    def choose(self, values: list[Any]) -> list[int]:
        countdown = self._countdown - 1
        if countdown == 0:
            self.rescope()
            countdown = LOAD_CHECK_EVERY
        self._countdown = countdown
        singles = self._singles
        i = self._i
        if i >= len(singles):
            i = 0
        self._i = i + 1
        return singles[i]

    @property
    def wide(self) -> bool:
        """True while sending to every target, not only the local ones."""
        return self._singles is self._all

    def load(self) -> float:
        """Average load of the local targets: queued tuples / receive buffer size."""
        return sum([len(inbox) for inbox in self._inboxes]) / self._capacity

    def rescope(self) -> None:
        """Widen or narrow the targets by the local load (Storm's bang-bang control)."""
        load = self.load()
        if not self.wide and load > self._higher:
            self._singles = self._all
        elif self.wide and load < self._lower:
            self._singles = self._local


class FieldsRouter:
    """Equal key values -> same task, in every process (stable hash, not ``hash``).

    The task for a key is cached per process (bounded), since keys repeat a lot.
    """

    __slots__ = ("_cache", "_idx", "_n", "_singles")

    def __init__(self, tasks: list[int], key_indexes: list[int]) -> None:
        self._singles = [[t] for t in tasks]
        self._n = len(tasks)
        self._idx = key_indexes
        self._cache: dict[Any, list[int]] = {}

    def choose(self, values: list[Any]) -> list[int]:
        idx = self._idx
        key = values[idx[0]] if len(idx) == 1 else tuple([values[i] for i in idx])
        try:
            target = self._cache.get(key)
        except TypeError:  # an unhashable key (a list, a dict): hash it each time
            return self._singles[stable_hash(key) % self._n]
        if target is not None:
            return target
        h = stable_hash(key) if len(idx) == 1 else stable_hash_values(key)
        target = self._singles[h % self._n]
        if len(self._cache) >= _KEY_CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = target
        return target


class SingleFieldRouter:
    """FieldsRouter for the common one-field key: one index, no key tuple."""

    __slots__ = ("_cache", "_i", "_n", "_singles")

    def __init__(self, tasks: list[int], key_index: int) -> None:
        self._singles = [[t] for t in tasks]
        self._n = len(tasks)
        self._i = key_index
        self._cache: dict[Any, list[int]] = {}

    def choose(self, values: list[Any]) -> list[int]:
        key = values[self._i]
        # get, not [] and KeyError: a miss raised and caught an exception, which cost more
        # than the hash. Keys of high cardinality miss often, and every task's cache
        # misses on each key once as it warms up: in the word count at parallelism 16
        # (16 caches warming), choose cost 4.6k instructions a sentence less (stop 36).
        try:
            target = self._cache.get(key)
        except TypeError:  # an unhashable key (a list, a dict): hash it each time
            return self._singles[stable_hash(key) % self._n]
        if target is not None:
            return target
        target = self._singles[stable_hash(key) % self._n]
        if len(self._cache) >= _KEY_CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = target
        return target


class PartialKeyRouter:
    """Partial key grouping: each key may go to one of two tasks (two hashes), whichever
    this emitter has sent fewer tuples to. Splits hot keys over two tasks."""

    __slots__ = ("_counts", "_idx", "_n", "_singles")

    def __init__(self, tasks: list[int], key_indexes: list[int]) -> None:
        self._singles = [[t] for t in tasks]
        self._n = len(tasks)
        self._idx = key_indexes
        self._counts = [0] * len(tasks)

    def choose(self, values: list[Any]) -> list[int]:
        key = [values[i] for i in self._idx]
        h1 = stable_hash_values(key) % self._n
        h2 = stable_hash_values([*key, "\x00pkg"]) % self._n
        counts = self._counts
        pick = h1 if counts[h1] <= counts[h2] else h2
        counts[pick] += 1
        return self._singles[pick]


class AllRouter:
    __slots__ = ("_tasks",)

    def __init__(self, tasks: list[int]) -> None:
        self._tasks = list(tasks)

    def choose(self, values: list[Any]) -> list[int]:
        return self._tasks


class GlobalRouter:
    """Everything to the lowest task id, as in Storm."""

    __slots__ = ("_single",)

    def __init__(self, tasks: list[int]) -> None:
        self._single = [min(tasks)]

    def choose(self, values: list[Any]) -> list[int]:
        return self._single


class CustomRouter:
    __slots__ = ("_grouping", "_task")

    def __init__(self, grouping: Any, task_id: int) -> None:
        self._grouping = grouping
        self._task = task_id

    def choose(self, values: list[Any]) -> list[int]:
        return list(self._grouping.choose_tasks(self._task, values))


_NO_TARGETS: list[int] = []


class StreamRoute:
    """Everything an emit on one stream of one task needs, computed once.

    ``choose(values)`` is bound at construction to the single router's own ``choose``
    when there is one subscriber (the common case), saving a call per emit.
    """

    __slots__ = (
        "choose",
        "component",
        "direct",
        "direct_tasks",
        "nfields",
        "routers",
        "src",
        "stream",
    )

    def __init__(
        self,
        src: TupleSource,
        spec: StreamSpec,
        routers: list[Any],
        direct_tasks: frozenset[int],
    ) -> None:
        self.src = src
        self.component = src.component
        self.stream = src.stream
        self.nfields = len(spec.fields)
        self.direct = spec.direct
        self.routers = routers
        self.direct_tasks = direct_tasks
        if len(routers) == 1:
            self.choose = routers[0].choose
        elif not routers:
            self.choose = _no_targets
        else:
            self.choose = self._choose_all

    def _choose_all(self, values: list[Any]) -> list[int]:
        out: list[int] = []
        for router in self.routers:
            out.extend(router.choose(values))
        return out

    def route_batch(self, rows: list[list[Any]]) -> dict[int, list[list[Any]]]:
        """The rows each task gets when ``rows`` are emitted as one tree (a spout's
        ``emit_batch``), in the rows' order.

        Decision: fields, partial-key and custom groupings are asked row by row, so a
        key reaches the task ``emit`` would send it to. All and global are asked once a
        batch (their choice does not look at the values). A shuffle sends the batch in
        runs of at least SHUFFLE_RUN rows, each run to the next task in turn: a
        batch of 100 goes to two tasks, one of 1,000 to up to 20.

        Why runs, not rows and not the whole batch: asked row by row, a shuffle spread a
        tree of 100 rows over all 16 tasks of a bolt, and each fanned its few rows out to
        every task after it, each pair a Batch, an edge and an ack: in the word count at
        parallelism 16 on one worker, parallelism cost 17.4k instructions a sentence
        that way, 4.7k with the batch whole. But whole, one task does all of a tree's
        work: two workers then lost every one of eleven clock pairs to row by row, by
        ~11% at the median, with the same instructions (notes/performance.md, "A
        spout's batch routed whole"). Runs of SHUFFLE_RUN bound the fan-out by the
        batch's size (~7k at parallelism 16) and still split a tree of 100 over two
        tasks. Storm's shuffle promises each task an equal share of tuples; equal runs
        keep that over time. (A load-aware shuffle looks at its targets' load every
        256 choices, so every 256 runs here.)
        """
        per_task: dict[int, list[list[Any]]] = {}
        n = len(rows)
        if not n:
            return per_task
        for router in self.routers:
            kind = type(router)
            if kind is AllRouter or kind is GlobalRouter:
                for t in router.choose(rows[0]):
                    _add_rows(per_task, t, rows)
            elif kind is ShuffleRouter or kind is LoadAwareShuffleRouter:
                runs = max(1, n // SHUFFLE_RUN)
                start = 0
                for i in range(1, runs + 1):
                    end = n * i // runs
                    run = rows[start:end]
                    start = end
                    for t in router.choose(run[0]):
                        _add_rows(per_task, t, run)
            else:
                choose = router.choose
                for values in rows:
                    for t in choose(values):
                        got = per_task.get(t)
                        if got is None:
                            per_task[t] = [values]
                        else:
                            got.append(values)
        return per_task


def _add_rows(per_task: dict[int, list[list[Any]]], task: int, rows: list[list[Any]]) -> None:
    got = per_task.get(task)
    if got is None:
        per_task[task] = list(rows)
    else:  # the task's earlier run, or an all grouping's task that another also chose
        got.extend(rows)


def _no_targets(values: list[Any]) -> list[int]:
    return _NO_TARGETS


def make_router(
    grouping: Grouping,
    tasks: list[int],
    fields: Fields,
    context: TopologyContext,
    stream: str,
    local_tasks: Collection[int],
    rng: random.Random,
    inboxes: Mapping[int, Any] | None = None,
) -> Any:
    kind = grouping.kind
    if kind == g.SHUFFLE or kind == g.NONE:
        return _shuffle_router(tasks, local_tasks, inboxes, context.conf, rng)
    if kind == g.LOCAL_OR_SHUFFLE:
        local = [t for t in tasks if t in local_tasks]
        return ShuffleRouter(local or tasks, rng)
    if kind == g.FIELDS:
        indexes = [fields.index(f) for f in grouping.fields or []]
        if len(indexes) == 1:
            return SingleFieldRouter(tasks, indexes[0])
        return FieldsRouter(tasks, indexes)
    if kind == g.PARTIAL_KEY:
        return PartialKeyRouter(tasks, [fields.index(f) for f in grouping.fields or []])
    if kind == g.ALL:
        return AllRouter(tasks)
    if kind == g.GLOBAL:
        return GlobalRouter(tasks)
    if kind == g.CUSTOM:
        # Each emitting task prepares its own copy, as Storm does. A deep copy, not a
        # pickle round trip: on Spark the grouping's class may exist only by value.
        custom = copy.deepcopy(grouping.custom)
        custom.prepare(context, stream, list(tasks))
        return CustomRouter(custom, context.task_id)
    raise ValueError(f"no router for grouping {kind!r}")


def _shuffle_router(
    tasks: list[int],
    local_tasks: Collection[int],
    inboxes: Mapping[int, Any] | None,
    conf: Mapping[str, Any],
    rng: random.Random,
) -> Any:
    """Load-aware when it is turned on and some targets are local and some not;
    otherwise plain round-robin over every target. ``conf`` is a task's validated config
    (every key present)."""
    local = {t: inboxes[t] for t in tasks if t in local_tasks} if inboxes is not None else {}
    if 0 < len(local) < len(tasks) and not conf[Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING]:
        return LoadAwareShuffleRouter(
            tasks,
            local,
            conf[Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE],
            conf[Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND],
            conf[Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND],
            rng,
        )
    return ShuffleRouter(tasks, rng)


def build_routes(
    layout: TaskLayout,
    context: TopologyContext,
    streams: dict[str, StreamSpec],
    local_tasks: Collection[int],
    inboxes: Mapping[int, Any] | None = None,
    owner: str | None = None,
    shared: dict[Any, Any] | None = None,
) -> dict[str, StreamRoute]:
    """Routes for every stream the task's component declares. ``inboxes`` (task ->
    inbox) lets a shuffle prefer local targets by their load; without it, plain shuffle.
    ``owner`` goes into the routes' TupleSources (the topology instance).

    ``shared`` (one dict per worker) lets the worker's tasks share their fields
    routers: a fields router keeps no state of its emitter, only its cache of key ->
    task, which is the same function of the key for every task that sends to the same
    targets by the same key positions. With a cache each, 16 split tasks on one worker
    each warmed a cache of every word (~0.6k instructions a sentence at parallelism 16
    in the word count, and 16 times the memory: notes/performance.md, stop 42)."""
    component = context.component_id
    rng = random.Random(context.task_id * 7919 + 17)
    routes: dict[str, StreamRoute] = {}
    for stream, spec in streams.items():
        routers = []
        direct_tasks: set[int] = set()
        for target, grouping in layout.topology.subscribers(component, stream):
            tasks = layout.component_to_tasks[target]
            if grouping.kind == g.DIRECT:
                direct_tasks.update(tasks)
                continue
            share_key = None
            if shared is not None and grouping.kind == g.FIELDS:
                share_key = (
                    tuple(tasks),
                    tuple(spec.fields.index(f) for f in grouping.fields or []),
                )
                router = shared.get(share_key)
                if router is not None:
                    routers.append(router)
                    continue
            try:
                router = make_router(
                    grouping, tasks, spec.fields, context, stream, local_tasks, rng, inboxes
                )
            except Exception as exc:
                if grouping.kind != g.CUSTOM:
                    raise
                raise InvalidTopologyError(
                    f"bolt {target!r}: the custom grouping on stream {stream!r} of "
                    f"{component!r} could not be copied or prepared for task "
                    f"{context.task_id}: {describe(exc)}",
                    component=target,
                    stream=stream,
                ) from exc
            if shared is not None and share_key is not None:
                shared[share_key] = router
            routers.append(router)
        src = TupleSource(component, stream, context.task_id, spec.fields, owner)
        routes[stream] = StreamRoute(src, spec, routers, frozenset(direct_tasks))
    return routes
