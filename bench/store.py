"""Store backends, one command: ``python bench/store.py [--repeat N] [backend ...]``.

For each backend (memory, sqlite, redis, postgresql; a server that cannot be had is
skipped, saying why), on data of its own (a temporary file, a unique key prefix, a
unique table, removed afterwards), the costs the users of the store size their batches
by:

- ``get 100``: one multi-get of 100 keys that exist (Trident's multi_get per batch);
- ``apply 1``: one apply of one Put: what any apply costs, however small;
- ``apply 100``: one atomic apply of 100 Puts (a batch's multi_put, a checkpoint);
- ``apply 100 +cas``: the same guarded by one Expect that holds (a commit that moves
  the txid in the same apply).

Each is timed ``--repeat`` times (200); prints the median and the 90th percentile in
microseconds per key (the call's time / 100) and per call. The servers are this
machine's: TUPLETREE_TEST_REDIS and TUPLETREE_TEST_PG name others, as in the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from tupletree.store import Clear, Expect, Put, Store, StoreError, open_store

KEYS = 100
REDIS_URL = os.environ.get("TUPLETREE_TEST_REDIS", "redis://127.0.0.1:6379/0")
PG_DSN = os.environ.get("TUPLETREE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@contextlib.contextmanager
def memory() -> Iterator[Store]:
    yield open_store("memory")


@contextlib.contextmanager
def sqlite() -> Iterator[Store]:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("sqlite", {"path": os.path.join(tmp, "bench.db")})
        yield store
        store.close()


@contextlib.contextmanager
def redis() -> Iterator[Store]:
    prefix = f"tt-bench-{uuid.uuid4().hex[:8]}:"
    store = open_store("redis", {"url": REDIS_URL, "prefix": prefix})
    try:
        yield store
    finally:
        for ns in store.namespaces(""):
            store.apply([Clear(ns)])
        store.close()


@contextlib.contextmanager
def postgresql() -> Iterator[Store]:
    prefix = f"bench_{uuid.uuid4().hex[:8]}_"
    store = open_store("postgresql", {"dsn": PG_DSN, "prefix": prefix})
    try:
        yield store
    finally:
        store.close()
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{prefix}tupletree_store"')


BACKENDS: dict[str, Callable[[], contextlib.AbstractContextManager[Store]]] = {
    "memory": memory,
    "sqlite": sqlite,
    "redis": redis,
    "postgresql": postgresql,
}


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    for _ in range(min(20, repeat)):  # warm up: connections, prepared statements
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def run(store: Store, repeat: int) -> dict[str, list[float]]:
    keys = [f"word-{i:03}" for i in range(KEYS)]
    store.apply([Put("bench", k, b'{"txid":1,"val":5}') for k in keys])
    counter = iter(range(10**9))

    def apply_plain() -> None:
        n = next(counter)
        assert store.apply([Put("bench", k, b'{"txid":%d,"val":5}' % n) for k in keys])

    txid = [b"0"]
    store.apply([Put("bench-meta", "txid", txid[0])])

    def apply_cas() -> None:
        # the coordinator knows the txid it moves from: no read before the apply
        n = b"%d" % next(counter)
        writes = [Put("bench", k, b'{"txid":%s,"val":5}' % n) for k in keys]
        writes.append(Put("bench-meta", "txid", n))
        assert store.apply(writes, expect=[Expect("bench-meta", "txid", txid[0])])
        txid[0] = n

    def apply_one() -> None:
        assert store.apply([Put("bench", keys[0], b'{"txid":%d,"val":5}' % next(counter))])

    return {
        "get 100": timed(lambda: store.get("bench", keys), repeat),
        "apply 1": timed(apply_one, repeat),
        "apply 100": timed(apply_plain, repeat),
        "apply 100 +cas": timed(apply_cas, repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("backends", nargs="*", help=f"any of {list(BACKENDS)} (default: all)")
    args = parser.parse_args()
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown:
        parser.error(f"no backend {unknown}; choose from {list(BACKENDS)}")
    head = ("backend", "operation", "us/key p50", "us/key p90", "ms/call p50")
    print(f"{head[0]:<11} {head[1]:<15} {head[2]:>10} {head[3]:>10} {head[4]:>11}")
    for name in args.backends or list(BACKENDS):
        try:
            ctx = BACKENDS[name]()
            store = ctx.__enter__()
        except (StoreError, ImportError) as exc:
            print(f"{name:<11} skipped: {exc}")
            continue
        try:
            results = run(store, args.repeat)
        finally:
            ctx.__exit__(None, None, None)
        for op, times in results.items():
            keys = int(op.split()[1])
            p50 = statistics.median(times)
            p90 = statistics.quantiles(times, n=10)[-1]
            print(
                f"{name:<11} {op:<15} {p50 / keys * 1e6:>10.2f} {p90 / keys * 1e6:>10.2f} "
                f"{p50 * 1e3:>11.2f}"
            )


if __name__ == "__main__":
    main()
