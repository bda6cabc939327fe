"""How a spout's batch is routed (StreamRoute.route_batch, used by ``emit_batch``).

The decision: all and global are asked once a batch and get it whole; a shuffle gets it
in runs of at least SHUFFLE_RUN rows, each run to the next task in turn; fields groupings
(and custom ones) are asked row by row, so a key reaches the same task as it would from
``emit``. And the fields routers' key cache, whose miss path no longer goes through
KeyError: a key of any kind, hashable or not, seen first or again, goes to the task its
stable hash names.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tupletree.runtime.hashing import stable_hash, stable_hash_values
from tupletree.runtime.routing import (
    SHUFFLE_RUN,
    AllRouter,
    FieldsRouter,
    GlobalRouter,
    ShuffleRouter,
    SingleFieldRouter,
    StreamRoute,
)
from tupletree.topology.components import StreamSpec
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import TupleSource

OUT = TupleSource("spout", "default", 0, Fields(["key", "n"]))


def stream_route(routers: list[Any]) -> StreamRoute:
    return StreamRoute(OUT, StreamSpec(OUT.fields, False), routers, frozenset())


class ByValue:
    """A custom grouping's router: the task the row's second value names."""

    def __init__(self, tasks: list[int]) -> None:
        self.tasks = tasks

    def choose(self, values: list[Any]) -> list[int]:
        return [self.tasks[values[1] % len(self.tasks)]]


def make(kind: str, tasks: list[int], seed: int) -> Any:
    if kind == "shuffle":
        return ShuffleRouter(tasks, random.Random(seed))
    if kind == "fields":
        return SingleFieldRouter(tasks, 0)
    if kind == "fields2":
        return FieldsRouter(tasks, [0, 1])
    if kind == "all":
        return AllRouter(tasks)
    if kind == "global":
        return GlobalRouter(tasks)
    return ByValue(tasks)


KINDS = ["shuffle", "fields", "fields2", "all", "global", "custom"]
ONCE = {"all", "global"}
keys = st.one_of(st.integers(-5, 5), st.text(max_size=3))
rows_st = st.lists(st.tuples(keys, st.integers(0, 50)).map(list), max_size=12) | st.integers(
    0, 3 * SHUFFLE_RUN + 7
).map(lambda n: [[i % 7, i] for i in range(n)])


@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=4),
    widths=st.lists(st.integers(1, 4), min_size=4, max_size=4),
    batches=st.lists(rows_st, min_size=1, max_size=8),
    seed=st.integers(0, 1000),
)
def test_each_grouping_gets_what_it_should_from_a_batch(kinds, widths, batches, seed):
    subscribers = []  # (kind, its tasks, the router the route holds, a twin to ask)
    first = 1
    for kind, width in zip(kinds, widths, strict=False):
        tasks = list(range(first, first + width))
        first += width
        subscribers.append((kind, tasks, make(kind, tasks, seed), make(kind, tasks, seed)))
    route = stream_route([s[2] for s in subscribers])
    for rows in batches:
        got = route.route_batch(rows)
        if not rows:
            assert got == {}
            continue
        expected: dict[int, list[list[Any]]] = {}
        for kind, _tasks, _router, twin in subscribers:
            if kind in ONCE:  # the whole batch, where one choice sends it
                for t in twin.choose(rows[0]):
                    expected.setdefault(t, []).extend(rows)
            elif kind == "shuffle":  # even runs of at least SHUFFLE_RUN rows, in turn
                runs = max(1, len(rows) // SHUFFLE_RUN)
                bounds = [len(rows) * i // runs for i in range(runs + 1)]
                for a, b in itertools.pairwise(bounds):
                    assert b - a >= min(SHUFFLE_RUN, len(rows))
                    for t in twin.choose(rows[a]):
                        expected.setdefault(t, []).extend(rows[a:b])
            else:  # row by row, where emit would send each
                for values in rows:
                    for t in twin.choose(values):
                        expected.setdefault(t, []).append(values)
        assert got == expected


def test_a_shuffle_sends_a_big_batch_in_runs_to_each_task_in_turn():
    route = stream_route([ShuffleRouter([1, 2, 3], random.Random(7))])
    rows = [[f"r{i}", i] for i in range(2 * SHUFFLE_RUN)]
    halves = route.route_batch(rows)
    assert sorted(len(r) for r in halves.values()) == [SHUFFLE_RUN, SHUFFLE_RUN]
    assert sorted(v[1] for r in halves.values() for v in r) == list(range(2 * SHUFFLE_RUN))
    for r in halves.values():  # each run is contiguous
        assert [v[1] for v in r] == list(range(r[0][1], r[0][1] + SHUFFLE_RUN))
    big = [[f"r{i}", i] for i in range(9 * SHUFFLE_RUN)]
    spread = route.route_batch(big)  # nine runs over three tasks: three each
    assert sorted(len(r) for r in spread.values()) == [3 * SHUFFLE_RUN] * 3
    for r in spread.values():  # in order within each task
        assert [v[1] for v in r] == sorted(v[1] for v in r)


def test_a_shuffle_sends_successive_small_batches_to_each_task_in_turn():
    route = stream_route([ShuffleRouter([1, 2, 3], random.Random(7))])
    rows = [["a", 1], ["b", 2], ["c", 3]]
    routed = [route.route_batch(rows) for _ in range(6)]
    assert all(len(r) == 1 for r in routed)  # one task a batch
    assert all(got == rows for r in routed for got in r.values())  # whole, in order
    chosen = [next(iter(r)) for r in routed]
    assert sorted(chosen[:3]) == [1, 2, 3]  # every task once in three
    assert chosen[3:] == chosen[:3]


def test_a_fields_grouping_routes_a_batchs_rows_as_emit_would():
    tasks = list(range(10, 17))
    route = stream_route([SingleFieldRouter(tasks, 0)])
    rows = [[f"w{i}", i] for i in range(40)]
    got = route.route_batch(rows)
    assert len(got) > 1  # spread by key, not sent whole
    for t, routed in got.items():
        assert all(tasks[stable_hash(values[0]) % len(tasks)] == t for values in routed)
    assert sorted(v[1] for r in got.values() for v in r) == list(range(40))


@given(key=st.one_of(keys, st.lists(st.integers(), max_size=3), st.dictionaries(keys, keys)))
def test_a_key_goes_where_its_stable_hash_says_first_time_and_again(key):
    tasks = [3, 5, 8, 13, 21]
    single = SingleFieldRouter(tasks, 0)
    multi = FieldsRouter(tasks, [0, 1])
    want_single = [tasks[stable_hash(key) % len(tasks)]]
    want_multi = [tasks[stable_hash_values((key, 1)) % len(tasks)]]
    for _ in range(2):  # a miss (or an unhashable key) first, then the cache (or not)
        assert single.choose([key, 1]) == want_single
        assert multi.choose([key, 1]) == want_multi
