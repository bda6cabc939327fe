"""persistent_aggregate's state updaters over a map state: Storm's transactional worked
vector through a Count combiner, a reducer per key, the global forms, and what they
emit on the new-values stream."""

from __future__ import annotations

import pytest

from tests.trident.state.dict_backing import DictBacking
from tupletree.trident.state import (
    MemoryMapState,
    TransactionalMap,
    TransactionalValue,
)
from tupletree.trident.state.aggregate_updaters import (
    CombinerAggStateUpdater,
    MapCombinerAggStateUpdater,
    MapReducerAggStateUpdater,
    ReducerAggStateUpdater,
)


class T:
    """A Trident tuple as the updaters read it: by field name."""

    def __init__(self, **values):
        self.fields = list(values)
        self.values = list(values.values())

    def get(self, name):
        return self.values[self.fields.index(name)]


class Emitted(list):
    def emit(self, values):
        self.append(values)


class Count:
    def init(self, tup):
        return 1

    def combine(self, a, b):
        return a + b

    def zero(self):
        return 0


class Concat:
    def init(self):
        return ""

    def reduce(self, curr, tup):
        return curr + tup[0]


def test_transactional_worked_vector_through_a_count() -> None:
    """Storm's docs vector end to end: the batch [man, man, dog] of txid 3 as Count's
    per-tuple inputs (init 1 each)."""
    db = DictBacking(
        {
            ("man",): TransactionalValue(1, 3),
            ("dog",): TransactionalValue(3, 4),
            ("apple",): TransactionalValue(2, 10),
        }
    )
    state = TransactionalMap.build(db)
    updater = MapCombinerAggStateUpdater(Count(), ["word"], ["count"])
    batch = [T(word="man", count=1), T(word="man", count=1), T(word="dog", count=1)]
    out = Emitted()
    state.begin_commit(3)
    updater.update_state(state, batch, out)
    state.commit(3)
    assert out == [["man", 4], ["man", 5], ["dog", 4]]
    assert db.data == {
        ("man",): TransactionalValue(3, 5),
        ("dog",): TransactionalValue(3, 4),
        ("apple",): TransactionalValue(2, 10),
    }
    assert db.calls() == (1, 1)


def test_reducer_per_key_and_global_forms() -> None:
    state = MemoryMapState.Factory().make_state({}, None, 0, 1)
    out = Emitted()
    state.begin_commit(1)
    MapReducerAggStateUpdater(Concat(), ["k"], ["s"]).update_state(
        state, [T(k=1, s="a", x=0), T(k=2, s="b", x=0), T(k=1, s="c", x=0)], out
    )
    CombinerAggStateUpdater(Count()).update_state(state, [T(n=5)], out)
    state.commit(1)
    state.begin_commit(2)
    CombinerAggStateUpdater(Count(), ["n"]).update_state(state, [T(n=2)], out)
    state.commit(2)
    assert out == [[1, "ac"], [2, "b"], [5], [7]]
    assert state.get() == 7
    text = MemoryMapState.Factory().make_state({}, None, 0, 1)
    for txid, batch in ((1, [T(s="a", n=0), T(s="b", n=0)]), (2, [T(s="c", n=0)])):
        text.begin_commit(txid)
        ReducerAggStateUpdater(Concat(), ["s"]).update_state(text, batch, out)
        text.commit(txid)
    assert out[-2:] == [["ab"], ["abc"]]
    assert text.get() == "abc"


def test_refusals_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"single input field, got \['a', 'b'\]"):
        MapCombinerAggStateUpdater(Count(), ["k"], ["a", "b"])
    state = MemoryMapState.Factory().make_state({}, None, 0, 1)
    with pytest.raises(ValueError, match="one partial aggregate, got 2 tuples"):
        CombinerAggStateUpdater(Count()).update_state(state, [T(n=1), T(n=2)], Emitted())
    with pytest.raises(TypeError, match="needs a MapState state, got DictBacking"):
        MapCombinerAggStateUpdater(Count(), ["k"], ["n"]).update_state(DictBacking(), [], Emitted())
