"""A worker's tasks share their fields routers (routing.build_routes' ``shared``): a
fields router holds no state of its emitter, only a cache of key -> task, the same for
every task that sends to the same targets by the same key positions. Shared, the tasks
of one component warm one cache, not one each; routers that differ in targets or key
positions stay apart, and every key still goes where its stable hash says."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.runtime.hashing import stable_hash
from tupletree.runtime.routing import FieldsRouter, SingleFieldRouter
from tupletree.runtime.worker import Worker


class Pairs(Spout):
    outputs = ["word", "n"]

    def next_tuple(self) -> None:
        pass


class Pass(BasicBolt):
    outputs = ["word", "n"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit(list(tup.values))


def started_worker() -> Worker:
    b = TopologyBuilder()
    b.set_spout("pairs", Pairs(), parallelism=2)
    b.set_bolt("split", Pass(), parallelism=4).shuffle_grouping("pairs")
    b.set_bolt("count", Pass(), parallelism=3).fields_grouping("split", ["word"])
    b.set_bolt("by_n", Pass(), parallelism=3).fields_grouping("split", ["n"])
    b.set_bolt("both", Pass(), parallelism=2).fields_grouping("split", ["word", "n"])
    b.set_bolt("again", Pass(), parallelism=3).fields_grouping("count", ["word"])
    conf = validate({Config.TOPOLOGY_WORKERS: 1})
    w = Worker("w", b.create_topology(), conf, lambda: 0.0)
    w.start(active=False)
    return w


def routers_of(w: Worker, component: str) -> list[list[Any]]:
    """Each task's routers on its default stream, in task order."""
    out = []
    for task in sorted(w.layout.component_to_tasks[component]):
        route = w.executors[task].collector._routes["default"]  # type: ignore[union-attr]
        out.append(route.routers)
    return out


def test_the_tasks_of_a_component_share_each_fields_router() -> None:
    w = started_worker()
    per_task = routers_of(w, "split")
    assert len(per_task) == 4
    first = per_task[0]
    assert [type(r) for r in first] == [SingleFieldRouter, SingleFieldRouter, FieldsRouter]
    for routers in per_task[1:]:
        assert all(a is b for a, b in zip(routers, first, strict=True))
    # Different targets or key positions: a router of their own.
    assert len({id(r) for r in first}) == 3
    # "count" sends to "again" by position 0 as "split" sends to "count": other targets.
    (again,) = routers_of(w, "count")[0]
    assert all(again is not r for r in first)


def test_a_shared_router_sends_each_key_where_its_stable_hash_says() -> None:
    w = started_worker()
    count_tasks = sorted(w.layout.component_to_tasks["count"])
    per_task = routers_of(w, "split")
    for word in ["a", "b", "zebra", "", "ü"] * 3:
        expected = [count_tasks[stable_hash(word) % len(count_tasks)]]
        for routers in per_task:
            assert routers[0].choose([word, 1]) == expected
