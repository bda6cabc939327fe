"""RotatingMap: put/get/remove semantics and the expiry bound in its docstring."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.reliability.rotating_map import CappedRotatingMap, RotatingMap


def test_put_get_remove():
    """A put value is found until removed."""
    m = RotatingMap(3)
    m.put("a", 1)
    assert m.get("a") == 1 and "a" in m and len(m) == 1
    assert m.remove("a") == 1
    assert m.get("a") is None and len(m) == 0 and m.remove("a") is None


def test_rotate_expires_oldest_cohort_only():
    """With 3 buckets an untouched entry expires on the 3rd rotation, not before."""
    m = RotatingMap(3)
    m.put("a", 1)
    assert m.rotate() == {}
    assert m.rotate() == {}
    assert m.rotate() == {"a": 1}
    assert "a" not in m


def test_put_moves_to_nursery_and_resets_countdown():
    """Re-putting a key restarts its countdown and keeps a single copy."""
    m = RotatingMap(2)
    m.put("a", 1)
    m.rotate()
    m.put("a", 2)
    assert len(m) == 1
    assert m.rotate() == {}
    assert m.rotate() == {"a": 2}


def test_needs_two_buckets():
    """A single bucket could not tell old from new; it is refused."""
    import pytest

    with pytest.raises(ValueError, match="at least 2"):
        RotatingMap(1)


@given(
    buckets=st.integers(2, 5),
    ops=st.lists(st.tuples(st.sampled_from(["put", "rotate"]), st.integers(0, 4)), max_size=60),
)
def test_expiry_bound(buckets, ops):
    """An entry expires exactly when `buckets` rotations passed since its last put."""
    m = RotatingMap(buckets)
    rotations_since_put: dict[int, int] = {}
    for op, key in ops:
        if op == "put":
            m.put(key, key)
            rotations_since_put[key] = 0
        else:
            expired = m.rotate()
            for k in list(rotations_since_put):
                rotations_since_put[k] += 1
            expected = {k for k, n in rotations_since_put.items() if n == buckets}
            assert set(expired) == expected
            for k in expected:
                del rotations_since_put[k]
        assert set(m) == set(rotations_since_put)


def test_capped_map_rotates_early_and_never_exceeds_its_capacity():
    """A put into a full nursery drops death row first: the newest entries survive and
    the map never holds more than its capacity."""
    m = CappedRotatingMap(3, capacity=7)  # 2 per bucket
    assert m.capacity == 6
    for k in range(100):
        m.put_new(k, k)
        assert len(m) <= 6
        assert k in m
    assert sorted(m) == list(range(94, 100))
    m.put(94, "again")  # re-put moves it to the nursery, within the cap
    assert len(m) <= 6 and m.get(94) == "again"


def test_capped_map_expires_by_rotation_like_a_rotating_map():
    """Below the cap it behaves as a RotatingMap: expiry after num_buckets rotations."""
    m = CappedRotatingMap(2, capacity=10)
    m.put(1, "a")
    assert m.rotate() == {}
    assert m.rotate() == {1: "a"}
    assert len(m) == 0


def test_capped_map_refuses_a_capacity_below_its_buckets():
    """Each bucket must hold at least one entry; the error gives both numbers."""
    with pytest.raises(ValueError, match=r"3 buckets.*at least 3, got 2"):
        CappedRotatingMap(3, capacity=2)


def test_put_counts_each_new_key_once():
    """len counts distinct keys through puts of new keys and re-puts of old ones."""
    m = RotatingMap(3)
    for key in "abc":
        m.put(key, 1)
    m.rotate()
    m.put("a", 2)  # from an older bucket back to the nursery
    m.put("b", 3)
    m.put("b", 4)  # already in the nursery
    assert len(m) == 3
    assert m.rotate() == {} and m.rotate() == {"c": 1}


def test_capped_put_of_a_held_key_moves_it_without_dropping_others():
    """Re-putting a key into a full nursery drops nothing (it takes its own place), and
    re-putting a key from an older bucket leaves one copy of it."""
    m = CappedRotatingMap(2, capacity=4)  # 2 per bucket
    m.put_new("old", 0)
    m.rotate()
    m.put_new("x", 1)
    m.put_new("y", 2)  # the nursery is full
    m.put("x", 3)
    assert sorted(m) == ["old", "x", "y"] and len(m) == 3
    m2 = CappedRotatingMap(2, capacity=4)
    m2.put_new("k", 1)
    m2.rotate()
    m2.put("k", 2)
    assert len(m2) == 1 and m2.rotate() == {} and m2.rotate() == {"k": 2}


OPS = st.lists(
    st.tuples(st.sampled_from(["put", "touch", "remove", "get", "rotate"]), st.integers(0, 5)),
    max_size=80,
)


@given(buckets=st.integers(2, 4), ops=OPS)
def test_touch_remove_and_get_agree_with_a_model_of_ages(buckets, ops):
    """Against a model (key -> value and rotations since its last put or touch): touch
    returns the value and restarts the countdown as a put would, remove takes the key
    out, get only reads, and rotate expires exactly the keys that reach ``buckets``."""
    m = RotatingMap(buckets)
    model: dict[int, list[int]] = {}  # key -> [value, age]
    for step, (op, key) in enumerate(ops):
        if op == "put":
            m.put(key, step)
            model[key] = [step, 0]
        elif op == "touch":
            got = m.touch(key)
            assert got == (model[key][0] if key in model else None)
            if key in model:
                model[key][1] = 0
        elif op == "remove":
            got = m.remove(key)
            assert got == (model.pop(key)[0] if key in model else None)
        elif op == "get":
            assert m.get(key, -1) == (model[key][0] if key in model else -1)
        else:
            expired = m.rotate()
            for entry in model.values():
                entry[1] += 1
            gone = {k: e[0] for k, e in model.items() if e[1] == buckets}
            assert expired == gone
            for k in gone:
                del model[k]
        assert len(m) == len(model) and set(m) == set(model)


@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "touch", "remove", "rotate"]), st.integers(0, 11)),
        max_size=120,
    )
)
def test_capped_touch_keeps_the_cap_and_the_touched_key(ops):
    """A touch that brings a key back to a full nursery makes room as a put does: the
    map stays within its capacity, the touched key is kept, and len counts what is
    held."""
    m = CappedRotatingMap(3, capacity=6)  # 2 per bucket
    for step, (op, key) in enumerate(ops):
        if op == "put":
            m.put(key, step)
        elif op == "touch":
            held = key in m
            assert (m.touch(key) is not None) == held
            assert (key in m) == held
        elif op == "remove":
            m.remove(key)
            assert key not in m
        elif op == "rotate":
            m.rotate()
        assert len(m) <= m.capacity and len(m) == len(list(m))


def test_capped_touch_into_a_full_nursery_makes_room_first():
    """Touching a key of an older bucket while the nursery is full rotates first, as a
    put does. Were the nursery let overfull, a rotation would keep the surplus and the
    next puts would take the map past its capacity."""
    m = CappedRotatingMap(3, capacity=6)  # 2 per bucket
    for k in range(6):
        m.put(k, k)  # buckets, newest first: [4, 5], [2, 3], [0, 1]
    assert m.touch(0) == 0  # the nursery is full: death row [0, 1] goes first
    assert 0 in m and 1 not in m
    m.rotate()
    for k in range(6, 12):
        m.put(k, k)
        assert len(m) <= m.capacity


def test_touch_keeps_a_stored_none_in_the_map():
    """None is a value like any other: a touch that moves it to the nursery puts it
    back, though touch (like remove) answers None for it."""
    m = RotatingMap(2)
    m.put("k", None)
    m.rotate()  # "k" is on death row
    assert m.touch("k") is None
    assert "k" in m and len(m) == 1
    assert m.rotate() == {}  # the touch restarted its countdown
