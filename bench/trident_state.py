"""Trident map states, one command: ``python bench/trident_state.py [--batches N]
[--keys K] [backend ...]``.

For each backend (memory, sqlite, redis, postgresql; a server that cannot be had is
skipped, saying why), an opaque map state (the default layout) on data of its own, and
``--batches`` batches (30) of one ``multi_update`` over ``--keys`` distinct keys (1000),
each batch framed by begin_commit/commit as the committer does; every second batch is
replayed once (a second attempt of the same txid), as a failure would. Prints the
median and 90th percentile per batch in ms and per key in us: what one batch's
one multi-get and one multi-put cost, the opaque arithmetic and the batch record
included.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import contextlib

from tupletree.trident.state import (
    MemoryMapState,
    PostgresMapState,
    RedisMapState,
    SqliteMapState,
)

PG = os.environ.get("TUPLETREE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TUPLETREE_TEST_REDIS", "redis://127.0.0.1:6379/0")


def factories(tmp: str, tag: str):
    yield "memory", MemoryMapState.Factory(), lambda: None
    yield "sqlite", SqliteMapState.opaque(os.path.join(tmp, "s.db")), lambda: None

    def drop_redis():
        import redis

        redis.Redis.from_url(REDIS).delete(f"bench-{tag}:trident_map")

    yield "redis", RedisMapState.opaque(REDIS, f"bench-{tag}:"), drop_redis

    def drop_pg():
        import psycopg

        with psycopg.connect(PG, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS bench_{tag}")

    yield "postgresql", PostgresMapState.opaque(PG, f"bench_{tag}"), drop_pg


def run(factory, batches: int, keys: int) -> list[float]:
    state = factory.make_state({}, None, 0, 1)
    ks = [(f"word-{i}",) for i in range(keys)]
    ups = [lambda old: (old or 0) + 1] * keys
    times = []
    for txid in range(1, batches + 1):
        for _attempt in range(2 if txid % 2 == 0 else 1):
            t = time.perf_counter()
            state.begin_commit(txid)
            state.multi_update(ks, ups)
            state.commit(txid)
            times.append(time.perf_counter() - t)
    assert state.multi_get(ks[:1]) == [batches]
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("backends", nargs="*")
    args = ap.parse_args()
    tag = uuid.uuid4().hex[:8]
    print(f"opaque map state, batches of {args.keys} keys, one multi_update each")
    with tempfile.TemporaryDirectory() as tmp:
        for name, factory, drop in factories(tmp, tag):
            if args.backends and name not in args.backends:
                continue
            try:
                times = run(factory, args.batches, args.keys)
            except Exception as exc:
                print(f"{name:>10}: skipped ({exc})")
                continue
            finally:
                with contextlib.suppress(Exception):
                    drop()
            med = statistics.median(times)
            p90 = statistics.quantiles(times, n=10)[-1]
            print(
                f"{name:>10}: batch median {med * 1e3:7.2f} ms, p90 {p90 * 1e3:7.2f} ms; "
                f"{med / args.keys * 1e6:6.2f} us/key"
            )


if __name__ == "__main__":
    main()
