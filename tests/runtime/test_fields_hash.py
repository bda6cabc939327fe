"""Fields grouping must route a key to the same task in every process, whatever
PYTHONHASHSEED says (Python's str hash is salted per process, so it cannot be used)."""

from __future__ import annotations

import base64
import collections
import enum
import json
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.runtime.hashing import stable_hash
from tupletree.runtime.routing import SingleFieldRouter
from tupletree.testing import MockedSources, complete_topology, read_tuples

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = TESTS_DIR.parents[1] / "src"

KEYS: list[Any] = [
    "nathan",
    "bob",
    "joey",
    "apple",
    "pear",
    "plum",
    "kiwi",
    "fig",
    "grüße",
    "日本語",
    "",
    "a much longer key with spaces in it",
    0,
    1,
    -7,
    2**40 + 3,
    2.5,
    None,
    True,
    b"bytes-key",
    ("tu", "ple"),
]


class KeySpout(Spout):
    outputs = ["key", "other"]


class WhereBolt(BasicBolt):
    """Emits [repr(key), repr(other), its task id]."""

    outputs = ["key", "other", "task"]

    def prepare(self, conf, context):
        self.task = context.task_id

    def execute(self, tup, collector):
        collector.emit([repr(tup[0]), repr(tup[1]), self.task])


def route_keys() -> dict[str, dict[str, int]]:
    """Run one topology; return {"one": {repr(key): task}, "two": {repr((key, other)):
    task}} for a one-field and a two-field fields grouping."""
    b = TopologyBuilder()
    b.set_spout("keys", KeySpout(), parallelism=2)
    b.set_bolt("one", WhereBolt(), parallelism=5).fields_grouping("keys", ["key"])
    b.set_bolt("two", WhereBolt(), parallelism=3).fields_grouping("keys", ["key", "other"])
    rows = [[k, i % 3] for i, k in enumerate(KEYS)] * 2
    with LocalCluster(simulate_time=True) as cluster:
        results = complete_topology(
            cluster,
            b.create_topology(),
            mocked_sources=MockedSources({"keys": rows}),
            conf={Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10},
        )
    out: dict[str, dict[str, int]] = {"one": {}, "two": {}}
    for name, key_of in (("one", lambda k, o: k), ("two", lambda k, o: f"({k}, {o})")):
        for key, other, task in read_tuples(results, name):
            where = key_of(key, other)
            # The same key seen twice (from either spout task) lands on the same task.
            assert out[name].setdefault(where, task) == task, (name, where)
    return out


def route_in_subprocess(hash_seed: str) -> dict[str, dict[str, int]]:
    code = (
        "import json, sys; "
        f"sys.path.insert(0, {str(TESTS_DIR)!r}); "
        "import test_fields_hash as m; "
        "print(json.dumps(m.route_keys()))"
    )
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = hash_seed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=str(TESTS_DIR.parents[1]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_fields_grouping_is_stable_across_processes():
    """Fields grouping routes keys identically here and under other PYTHONHASHSEEDs."""
    here = route_keys()
    assert len(here["one"]) == len(KEYS)
    assert len(here["two"]) == len(KEYS)
    assert len(set(here["one"].values())) > 1, "all keys went to one task"
    seed_a = route_in_subprocess("1")
    seed_b = route_in_subprocess("4242")
    assert seed_a == here
    assert seed_b == here


def test_python_hash_really_differs_between_those_seeds():
    """Setup check: str hash() differs under the two seeds, so a hash()-based router fails."""
    code = "print(hash('nathan'))"
    outs = set()
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outs.add(proc.stdout.strip())
    assert len(outs) == 2


# -- keys that are not plain values (issue 13, items 8 and 9) ------------------------------


class Level(enum.IntEnum):
    ONE = 1


class Colour(enum.StrEnum):
    RED = "red"


Pair = collections.namedtuple("Pair", ["a", "b"])

EQUAL_KEYS = [
    (Level.ONE, 1),
    (Colour.RED, "red"),
    (Decimal(1), 1),
    (Decimal("2.5"), 2.5),
    (Fraction(1, 2), 0.5),
    (True, 1),
    (1.0, 1),
    (Pair(1, "x"), (1, "x")),
    (collections.OrderedDict(a=1, b=2), {"b": 2, "a": 1}),
    (frozenset({"a", "b"}), {"b", "a"}),
]


@pytest.mark.parametrize(("a", "b"), EQUAL_KEYS, ids=[type(a).__name__ for a, _ in EQUAL_KEYS])
def test_equal_keys_hash_alike(a, b):
    assert a == b  # the rule: equal keys, one task (the routers' key cache goes by ==)
    assert stable_hash(a) == stable_hash(b)


def test_the_key_cache_and_the_hash_agree_whatever_comes_first():
    """1 == IntEnum(1): the task a router picks for 1 must not depend on which came
    first (the cache keeps the first one's task for both)."""
    one_first = SingleFieldRouter(list(range(7)), 0)
    enum_first = SingleFieldRouter(list(range(7)), 0)
    a = one_first.choose([1])
    b = enum_first.choose([Level.ONE])
    assert a == b == one_first.choose([Level.ONE]) == enum_first.choose([1])


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=8))
def test_dict_keys_hash_the_same_in_any_insertion_order(d):
    reordered = dict(reversed(list(d.items())))
    assert stable_hash(d) == stable_hash(reordered)
    assert stable_hash([d, 1]) == stable_hash([reordered, 1])


def test_a_key_that_contains_itself_is_a_clear_type_error():
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(TypeError, match="nested deeper than"):
        stable_hash(loop)


# A class of "the topology file": its module cannot be imported where the key is hashed
# (on a Spark executor it exists only as cloudpickle rebuilt it), so plain pickle cannot
# name it; the hash must not need to.
_BY_VALUE = """
class Point:
    def __init__(self, x, tags):
        self.x = x
        self.tags = tags
        self.meta = {"z": 1, "a": [1.5, None], "m": frozenset(tags)}

    def __eq__(self, other):
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self):
        return hash(self.x)
"""


def by_value_point() -> Any:
    namespace: dict[str, Any] = {"__name__": "my_topology_file"}
    exec(_BY_VALUE, namespace)  # a class from a module nobody can import
    return namespace["Point"](3, frozenset({"alpha", "beta", "gamma", "delta"}))


def test_a_by_value_class_hashes_the_same_in_other_processes():
    import pickle

    from pyspark import cloudpickle

    point = by_value_point()
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(point)  # setup check: plain pickle cannot name the class
    blob = base64.b64encode(cloudpickle.dumps(point)).decode()
    code = (
        "import base64, pickle; "
        "from tupletree.runtime.hashing import stable_hash; "
        f"print(stable_hash(pickle.loads(base64.b64decode({blob!r}))))"
    )
    hashes = set()
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        hashes.add(int(proc.stdout.strip()))
    assert hashes == {stable_hash(point)}
    other = by_value_point()
    other.x = 4
    assert stable_hash(other) != stable_hash(point)
