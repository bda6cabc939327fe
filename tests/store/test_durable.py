"""What the durable backends (SQLite, Redis, PostgreSQL) promise beyond the contract:
several stores on one file or server (the tasks of several worker processes) see one
another's writes; of two compare-and-sets racing, exactly one wins; an apply that stops
half-way, by an exception or a killed process, leaves nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tupletree
from tests.store.conftest import Location
from tupletree.store import Clear, Delete, Expect, Put, StoreError

# the child imports the tupletree this test runs (the source tree or the installed build)
IMPORTED_FROM = str(Path(tupletree.__file__).resolve().parents[1])


def test_two_stores_on_one_location_see_each_others_writes(durable: Location) -> None:
    """Two stores, two connections: what one applies the other reads, at once."""
    a, b = durable.open(), durable.open()
    assert a.apply([Put("shared", "k", b"from a"), Put("shared-2", "x", b"1")])
    assert b.get("shared", ["k"]) == [b"from a"]
    assert b.namespaces("shared") == ["shared", "shared-2"]
    assert b.apply([Put("shared", "k", b"from b")], expect=[Expect("shared", "k", b"from a")])
    assert a.get("shared", ["k"]) == [b"from b"]
    b.apply([Clear("shared-2")])
    assert a.namespaces("shared") == ["shared"]
    # and a store opened afterwards (a restarted worker) finds it all
    a.close()
    assert list(durable.open().items("shared")) == [("k", b"from b")]


def test_of_racing_compare_and_sets_exactly_one_wins(durable: Location) -> None:
    """Four stores (threads, each its own connection) move the same txid from the same
    value at the same moment, round after round (the first from absent): every round
    exactly one applies, and only its writes are there."""
    racers = 4
    stores = [durable.open() for _ in range(racers)]
    barrier = threading.Barrier(racers)
    won: list[list[bool]] = [[] for _ in range(racers)]
    errors: list[BaseException] = []

    def race(i: int) -> None:
        try:
            prev: bytes | None = None
            for rnd in range(8):
                barrier.wait(timeout=60)
                ok = stores[i].apply(
                    [Put("txn", "txid", b"%d" % rnd), Put("txn", f"by-{rnd}", b"%d" % i)],
                    expect=[Expect("txn", "txid", prev)],
                )
                won[i].append(ok)
                prev = b"%d" % rnd
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    check = durable.open()
    for rnd in range(8):
        winners = [i for i in range(racers) if won[i][rnd]]
        assert len(winners) == 1, f"round {rnd}: {winners} applied"
        assert check.get("txn", [f"by-{rnd}"]) == [b"%d" % winners[0]]
    assert check.get("txn", ["txid"]) == [b"7"]


def test_an_exception_inside_apply_leaves_nothing_written(
    durable: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second run of writes raises after the first was written (SQL) or queued
    (Redis): the apply raises, nothing of it is seen, and the store works on."""
    store, other = durable.open(), durable.open()
    store.apply([Put("n", "a", b"before"), Put("gone", "k", b"kept")])
    cls = type(store)
    real = cls._write
    calls = []

    def failing(self, *args):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("injected in the middle of apply")
        return real(self, *args)

    monkeypatch.setattr(cls, "_write", failing)
    with pytest.raises(RuntimeError, match="injected"):
        store.apply([Put("n", "a", b"after"), Put("n", "b", b"new"), Clear("gone")])
    monkeypatch.setattr(cls, "_write", real)
    for reader in (store, other):
        assert reader.get("n", ["a", "b"]) == [b"before", None]
        assert reader.get("gone", ["k"]) == [b"kept"]
    assert store.apply([Put("n", "b", b"later")])
    assert other.get("n", ["b"]) == [b"later"]


# A worker killed half-way through apply: this child stops after the first run of writes.
_CHILD = """
import json, sys, time
from tupletree.store import Delete, Put, open_store
kind, config = json.loads(sys.argv[1])
store = open_store(kind, config)
cls = type(store)
real = cls._write
def stall(self, *args):
    real(self, *args)
    print("half-way", flush=True)
    time.sleep(120)
cls._write = stall
store.apply([Put("n", f"k{i}", b"x") for i in range(50)] + [Delete("n", "pre")])
"""


def test_a_process_killed_inside_apply_leaves_nothing_written(durable: Location) -> None:
    """SIGKILL between two statements of one apply: the store shows none of it, and
    another store writes the same keys at once (no lock outlives the process)."""
    store = durable.open()
    store.apply([Put("n", "pre", b"kept")])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([IMPORTED_FROM, *sys.path])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps([durable.kind, durable.config])],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "half-way"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert store.get("n", ["pre", "k0", "k49"]) == [b"kept", None, None]
    assert [k for k, _ in store.items("n")] == ["pre"]
    assert store.apply([Put("n", "k0", b"y"), Delete("n", "pre")])
    assert list(durable.open().items("n")) == [("k0", b"y")]


def test_a_closed_store_refuses_calls_by_name(durable: Location) -> None:
    """close() closes: nothing reconnects behind the caller's back."""
    store = durable.open()
    store.apply([Put("n", "k", b"1")])
    store.close()
    for call in (
        lambda: store.get("n", ["k"]),
        lambda: store.apply([Put("n", "k", b"2")]),
        lambda: list(store.items("n")),
    ):
        with pytest.raises(StoreError) as err:
            call()
        assert err.value.store == store.name
    assert durable.open().get("n", ["k"]) == [b"1"]
