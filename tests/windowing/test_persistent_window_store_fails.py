"""A persistent window whose store refuses a write of an evicted partition (the memory
allowance is full, the oldest partition goes to the store to make room). The partition
was taken out of memory before the write, so its tuples were gone from both, and the
next PREPARE's flush, which writes the partitions still marked unsaved, failed with a
bare ``KeyError: 0``. Now the partition leaves memory only once written: the input that
needed the room fails (its spout replays it) with the store's error naming the window's
namespace, and the next checkpoint writes the partition and commits every tuple
accepted, or, while the store still refuses, fails with that error and rolls back."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from tupletree import Config, TopologyBuilder
from tupletree.store import BACKENDS, MemoryStore, Put, Store, StoreError, Write
from tupletree.store.memory import forget
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.testing.shared import SharedList
from tupletree.topology.fields import Fields
from tupletree.windowing import Count
from tupletree.windowing.stored import WindowTuples
from tupletree.windowing.window import DetachedTuple

from .persistent_components import WindowSummary

# How many more writes of window tuples to refuse, per store name.
_REFUSE: dict[str, int] = {}


class RefusingStore(MemoryStore):
    """A MemoryStore that refuses the next ``_REFUSE[name]`` writes of window tuples."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.refuse_name = name

    def apply(self, writes: Sequence[Write], expect: Sequence[Any] = ()) -> bool:
        left = _REFUSE.get(self.refuse_name, 0)
        if left and any(isinstance(w, Put) and w.namespace.endswith("-tuples") for w in writes):
            _REFUSE[self.refuse_name] = left - 1
            raise StoreError("no space left on device", store="refusing")
        return super().apply(writes, expect)


def tup(n: int) -> DetachedTuple:
    return DetachedTuple([n], Fields(["n"]), "numbers", "default", 1)


def test_an_evicted_partition_stays_in_memory_until_it_is_written():
    name = f"refusing-{uuid.uuid4().hex}"
    store = RefusingStore(name)
    stored = WindowTuples(store, "w-0-window-tuples", in_memory=8)  # 4 partitions of 2
    refs = [stored.add(tup(n)) for n in range(8)]
    _REFUSE[name] = 1
    with pytest.raises(StoreError, match=r"'w-0-window-tuples'.*no space left") as caught:
        stored.add(tup(8))  # evicts partition 0, whose write is refused
    assert caught.value.store == "refusing"
    assert stored.next_ref == 8  # the refused input took no reference
    stored.flush()  # was: KeyError: 0
    assert [t[0] for t in stored.iter(refs)] == list(range(8))
    assert stored.add(tup(8)) == 8
    assert [t[0] for t in stored.iter([*refs, 8])] == list(range(9))
    forget(name)


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"refusing-{uuid.uuid4().hex}"
    accepted = BACKENDS["memory"][1]

    def opener(config: Any) -> Store:
        return RefusingStore(config.get("name") or name)

    monkeypatch.setitem(BACKENDS, "memory", (opener, accepted))
    yield name
    _REFUSE.pop(name, None)
    forget(name)


def _run(sim_cluster: Any, store: str, refusals: int) -> tuple[AckFailTracker, FeederSpout, Any]:
    tracker = AckFailTracker()
    feeder = FeederSpout(["n"], tracker=tracker)
    windows = SharedList("windows")
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    bolt = (
        WindowSummary(windows)
        .with_tumbling_window(Count(4))
        .with_persistence()
        .with_max_events_in_memory(8)  # 4 partitions of 2 in memory
    )
    b.set_bolt("w", bolt).shuffle_grouping("feed")
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": store},
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    }
    sim_cluster.submit_topology("refused", conf, b.create_topology())
    assert sim_cluster.wait_idle()
    for n in range(8):
        feeder.feed([n], msg_id=n)
    assert sim_cluster.wait_idle()
    _REFUSE[store] = refusals
    feeder.feed([8], msg_id=8)  # needs room: partition 0 goes to the store, refused
    assert sim_cluster.wait_idle()
    assert tracker.failed == {8} and tracker.acked == set()
    return tracker, feeder, windows


def test_a_refused_partition_write_fails_the_input_and_the_checkpoint_saves_the_rest(
    sim_cluster, refusing
):
    tracker, feeder, windows = _run(sim_cluster, refusing, refusals=1)
    for n in range(8, 12):  # 8 again, as its spout would replay it
        feeder.feed([n], msg_id=n)
    assert sim_cluster.wait_idle()
    sim_cluster.advance_time(1)  # a checkpoint: the flush writes partition 0 now
    assert sim_cluster.wait_idle()
    assert tracker.acked == set(range(12)) and tracker.failed == {8}
    assert [w[:3] for w in windows.items()] == [(3, 0, 4), (7, 4, 4), (11, 8, 4)]
    errors = sim_cluster.errors("refused")
    assert len(errors) == 1, errors
    assert "StoreError" in errors[0] and "'w-0-window-tuples'" in errors[0]
    assert "no space left on device" in errors[0]
    stored = {k for k, _ in MemoryStore(refusing).items("w-0-window-tuples")}
    assert "0" not in stored  # written, then deleted: no committed window needs it


def test_while_the_store_refuses_the_checkpoint_fails_with_its_error_and_rolls_back(
    sim_cluster, refusing
):
    tracker, _feeder, _windows = _run(sim_cluster, refusing, refusals=1_000)
    sim_cluster.advance_time(1)  # PREPARE: the flush is refused, the checkpoint fails
    assert sim_cluster.wait_idle()
    sim_cluster.advance_time(1)  # the checkpoint spout's recovery: ROLLBACK
    assert sim_cluster.wait_idle()
    # Nothing committed, and every input accepted before is failed for replay.
    assert tracker.acked == set() and tracker.failed == set(range(9))
    errors = sim_cluster.errors("refused")
    assert len(errors) == 2, errors  # the input's, then the PREPARE's
    assert all("StoreError" in e and "no space left on device" in e for e in errors), errors
    assert "'w-0-window-tuples', partition(s) [0, 1, 2, 3]" in errors[1]
    assert not any("KeyError" in e for e in errors)
