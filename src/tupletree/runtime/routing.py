"""Routing: turn each subscription's grouping into a router that picks target tasks.

Every emitting task gets, per declared stream, a ``StreamRoute`` precomputed at start:
the shared TupleSource, the field count, and one router per subscribing bolt, so an
emit costs one dict lookup plus one ``choose`` per subscriber.

Routers return shared, preallocated lists (``[task]`` singletons, the all-tasks list)
instead of building one per emit; callers must not mutate what ``choose`` returns.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Collection
from typing import Any

from tupletree.runtime.context import TaskLayout, TopologyContext
from tupletree.runtime.hashing import stable_hash, stable_hash_values
from tupletree.topology import groupings as g
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.groupings import Grouping
from tupletree.topology.tuple import TupleSource

_KEY_CACHE_LIMIT = 1 << 16


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
            return self._cache[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable key (a list, a dict): hash it each time
            return self._singles[stable_hash(key) % self._n]
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
        try:
            return self._cache[key]
        except KeyError:
            pass
        except TypeError:
            return self._singles[stable_hash(key) % self._n]
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
) -> Any:
    kind = grouping.kind
    if kind == g.SHUFFLE or kind == g.NONE:
        return ShuffleRouter(tasks, rng)
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
        # Each emitting task prepares its own copy, as Storm does.
        custom = pickle.loads(pickle.dumps(grouping.custom))
        custom.prepare(context, stream, list(tasks))
        return CustomRouter(custom, context.task_id)
    raise ValueError(f"no router for grouping {kind!r}")


def build_routes(
    layout: TaskLayout,
    context: TopologyContext,
    streams: dict[str, StreamSpec],
    local_tasks: Collection[int],
) -> dict[str, StreamRoute]:
    """Routes for every stream the task's component declares."""
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
            routers.append(
                make_router(grouping, tasks, spec.fields, context, stream, local_tasks, rng)
            )
        src = TupleSource(component, stream, context.task_id, spec.fields)
        routes[stream] = StreamRoute(src, spec, routers, frozenset(direct_tasks))
    return routes
