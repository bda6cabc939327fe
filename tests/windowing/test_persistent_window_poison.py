"""A persistent window given a tuple whose value does not pickle. The value was only
pickled when its partition was written, at the next checkpoint's PREPARE: every
checkpoint failed, its rollback replayed the same tuple, and the topology looped on it
forever (nothing was ever acked). Now a tuple's values are pickled, as a check, when it
joins the window: that tuple alone is failed, with an error naming the component, the field and
the value's type, and every other input is acked at the next checkpoint."""

from __future__ import annotations

import threading
import uuid

import pytest

from tupletree import Config, TopologyBuilder
from tupletree.store import MemoryStore
from tupletree.store.memory import forget
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.testing.shared import SharedList
from tupletree.topology.fields import Fields
from tupletree.windowing import Count
from tupletree.windowing.stored import UnpicklableTupleError, WindowTuples
from tupletree.windowing.window import DetachedTuple

from .persistent_components import WindowSummary


def tup(*values) -> DetachedTuple:
    return DetachedTuple(list(values), Fields(["n", "extra"][: len(values)]), "feed", "default", 3)


def test_a_value_that_does_not_pickle_is_refused_when_added_and_takes_no_reference():
    store = MemoryStore()
    stored = WindowTuples(store, "w-0-window-tuples", in_memory=8, component="w")
    assert stored.add(tup(0, "a")) == 0
    with pytest.raises(UnpicklableTupleError) as caught:
        stored.add(tup(1, threading.Lock()))
    text = str(caught.value)
    assert "windowed bolt 'w'" in text and "field 'extra'" in text and "lock" in text
    assert "'feed'" in text and "'default'" in text
    assert caught.value.component == "w" and caught.value.field == "extra"
    assert caught.value.value_type == type(threading.Lock()).__name__
    assert stored.next_ref == 1  # nothing kept
    assert stored.add(tup(2, "b")) == 1
    stored.flush()  # was: ValueError at every flush
    assert [t[0] for t in stored.iter([0, 1])] == [0, 2]


def test_the_error_names_the_first_field_that_does_not_pickle_not_the_last():
    """The field named is the one whose value does not pickle, wherever it sits among
    the tuple's values, and the error survives pickling (it crosses workers)."""
    import pickle

    stored = WindowTuples(MemoryStore(), "w-0-window-tuples", in_memory=8, component="w")
    with pytest.raises(UnpicklableTupleError) as caught:
        stored.add(tup(threading.Lock(), "fine"))
    assert caught.value.field == "n" and "field 'n'" in str(caught.value)
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.component, again.field, again.value_type) == ("w", "n", caught.value.value_type)


def test_one_unpicklable_tuple_fails_alone_and_the_rest_goes_on(sim_cluster):
    store = f"poison-{uuid.uuid4().hex}"
    tracker = AckFailTracker()
    feeder = FeederSpout(["n", "extra"], tracker=tracker)
    windows = SharedList(f"windows-{uuid.uuid4().hex}")
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    bolt = (
        WindowSummary(windows)
        .with_tumbling_window(Count(4))
        .with_persistence()
        .with_max_events_in_memory(8)
    )
    b.set_bolt("w", bolt).shuffle_grouping("feed")
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": store},
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    }
    sim_cluster.submit_topology("poison", conf, b.create_topology())
    assert sim_cluster.wait_idle()
    for n in range(4):
        feeder.feed([n, "x"], msg_id=n)
    feeder.feed([100, threading.Lock()], msg_id="lock")
    for n in range(4, 8):
        feeder.feed([n, "x"], msg_id=n)
    assert sim_cluster.wait_idle()
    for _ in range(3):  # checkpoints: each commits (was: each failed and rolled back)
        sim_cluster.advance_time(1)
        assert sim_cluster.wait_idle()
    assert tracker.failed == {"lock"}
    assert tracker.acked == set(range(8))
    assert [w[:3] for w in windows.items()] == [(3, 0, 4), (7, 4, 4)]
    errors = sim_cluster.errors("poison")
    assert len(errors) == 1, errors
    assert "UnpicklableTupleError" in errors[0] and "windowed bolt 'w'" in errors[0]
    assert "field 'extra'" in errors[0] and "lock" in errors[0]
    forget(store)
