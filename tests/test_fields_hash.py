"""Fields grouping must route a key to the same task in every process, whatever
PYTHONHASHSEED says (Python's str hash is salted per process, so it cannot be used)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tupletree import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.testing import MockedSources, complete_topology, read_tuples

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = TESTS_DIR.parent / "src"

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
        cwd=str(TESTS_DIR.parent),
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
