"""Storm 2's load-aware shuffle across workers, when turned on: worker-local targets
first while their load is low, every target while it is high (runtime/routing.py)."""

from __future__ import annotations

import random
from collections import Counter, deque
from typing import Any

import pytest

from tupletree import Config, TopologyBuilder
from tupletree.config import validate
from tupletree.errors import InvalidConfigError
from tupletree.runtime.routing import LOAD_CHECK_EVERY, LoadAwareShuffleRouter, ShuffleRouter
from tupletree.runtime.worker import Worker, make_layout
from tupletree.topology.components import BasicBolt, Spout

LOCAL = [1, 3]
REMOTE = [2, 4]


def router(buffer_size: int = 100) -> tuple[LoadAwareShuffleRouter, dict[int, deque]]:
    inboxes = {t: deque() for t in LOCAL}
    r = LoadAwareShuffleRouter(LOCAL + REMOTE, inboxes, buffer_size, 0.8, 0.2, random.Random(1))
    return r, inboxes


def choices(r: LoadAwareShuffleRouter, n: int) -> Counter[int]:
    return Counter(r.choose(["x"])[0] for _ in range(n))


def fill(inboxes: dict[int, deque], per_task: int) -> None:
    for inbox in inboxes.values():
        inbox.clear()
        inbox.extend([None] * per_task)


def test_low_load_keeps_every_tuple_in_the_worker_evenly() -> None:
    r, _ = router()
    assert choices(r, 4 * LOAD_CHECK_EVERY) == {1: 2 * LOAD_CHECK_EVERY, 3: 2 * LOAD_CHECK_EVERY}
    assert not r.wide


def test_high_load_spreads_over_every_target_until_it_falls_under_the_lower_bound() -> None:
    r, inboxes = router(buffer_size=100)
    fill(inboxes, 81)  # average load 0.81 > 0.8
    choices(r, LOAD_CHECK_EVERY)  # the next look at the load widens the scope
    assert r.wide
    spread = choices(r, 4 * LOAD_CHECK_EVERY)
    assert set(spread) == set(LOCAL + REMOTE)
    assert max(spread.values()) - min(spread.values()) <= 4  # round-robin, not skewed
    fill(inboxes, 50)  # between the bounds: stays wide (no flapping)
    choices(r, LOAD_CHECK_EVERY)
    assert r.wide
    fill(inboxes, 19)  # under 0.2: back to local targets
    choices(r, LOAD_CHECK_EVERY)
    assert not r.wide
    assert set(choices(r, 2 * LOAD_CHECK_EVERY)) == set(LOCAL)


class Emit(Spout):
    outputs = ["w"]


class Sink(BasicBolt):
    def execute(self, tup: Any, collector: Any) -> None:
        pass


def shuffle_router(conf: dict[str, Any], local_bolts: int) -> tuple[Any, list[int]]:
    """The router a worker hosting the spout and ``local_bolts`` of 4 bolt tasks builds
    for the spout's shuffle subscription; and the bolt tasks."""
    b = TopologyBuilder()
    b.set_spout("s", Emit(), parallelism=1)
    b.set_bolt("b", Sink(), parallelism=4).shuffle_grouping("s")
    topology = b.create_topology()
    full = validate({Config.TOPOLOGY_ACKER_EXECUTORS: 0, **conf})
    tasks = make_layout(topology, full).component_to_tasks
    local = tasks["s"] + tasks["b"][:local_bolts]
    worker = Worker("t", topology, full, lambda: 0.0, local, remote_inbox=lambda task: [])
    worker.start(active=False)
    return worker.spouts[0].collector._routes["default"].routers[0], tasks["b"]


def test_a_worker_builds_the_load_aware_router_only_when_asked_and_locality_matters() -> None:
    r, bolts = shuffle_router({}, local_bolts=2)  # the default: an equal share for all
    assert type(r) is ShuffleRouter
    assert {r.choose([0])[0] for _ in range(50)} == set(bolts)
    on = {Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: False}
    r, bolts = shuffle_router(on, local_bolts=2)  # on, some targets local, some not
    assert isinstance(r, LoadAwareShuffleRouter)
    assert {r.choose([0])[0] for _ in range(50)} == set(bolts[:2])
    r, bolts = shuffle_router(on, local_bolts=4)  # on, all local (LocalCluster): plain
    assert type(r) is ShuffleRouter
    assert {r.choose([0])[0] for _ in range(50)} == set(bolts)


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        ({Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND: 1.5}, "topology.localityaware.higher.bound"),
        ({Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND: "low"}, "topology.localityaware.lower.bound"),
        (
            {
                Config.TOPOLOGY_LOCALITYAWARE_LOWER_BOUND: 0.9,
                Config.TOPOLOGY_LOCALITYAWARE_HIGHER_BOUND: 0.5,
            },
            "topology.localityaware.lower.bound",
        ),
        ({Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: 1}, "topology.disable.loadaware.messaging"),
    ],
)
def test_bad_locality_settings_are_refused_by_name(conf: dict[str, Any], key: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        validate(conf)
