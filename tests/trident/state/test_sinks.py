"""The exactly-once sinks on real SQLite, PostgreSQL and Redis: a committed txid is
skipped, rows and txid land together or not at all, partitions keep their own txids,
and a restarted task (a new state for the same partition) knows what was committed."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.trident.state.backends import PG_DSN, REDIS_URL
from tupletree.trident.state import BatchBehindError, StateType
from tupletree.trident.state.sinks import (
    Mark,
    PostgresSinkFactory,
    RedisSinkFactory,
    SinkLayoutError,
    SinkUpdater,
    SqliteSinkFactory,
    decide,
    decide_in_layout,
)


@dataclass
class Sink:
    factory: Any
    rows: Any  # () -> list of rows, in write order
    bad_row: list  # a row the store refuses (after the good ones are in the transaction)


def _sqlite(tmp_path) -> Iterator[Sink]:
    path = str(tmp_path / "sink.db")
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE events (word TEXT NOT NULL, n INTEGER)")

    def rows():
        with sqlite3.connect(path) as db:
            return [list(r) for r in db.execute("SELECT word, n FROM events ORDER BY rowid")]

    yield Sink(SqliteSinkFactory(path, "events", ["word", "n"]), rows, [None, 1])


def _postgres(tmp_path) -> Iterator[Sink]:
    psycopg = pytest.importorskip("psycopg")
    try:
        conn = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL at {PG_DSN} is not reachable: {exc}")
    table = f"sink_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE TABLE {table} (id bigserial, word text NOT NULL, n integer)")

    def rows():
        return [list(r) for r in conn.execute(f"SELECT word, n FROM {table} ORDER BY id")]

    yield Sink(PostgresSinkFactory(PG_DSN, table, ["word", "n"]), rows, [None, 1])
    conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM tupletree_sink_txids WHERE sink = %s", [table])
    conn.close()


def _redis(tmp_path) -> Iterator[Sink]:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {REDIS_URL} is not reachable: {exc}")
    stream = f"test-sink-{uuid.uuid4().hex[:8]}"

    def rows():
        return [[f[b"word"].decode(), int(f[b"n"])] for _id, f in client.xrange(stream)]

    yield Sink(RedisSinkFactory(stream, REDIS_URL, ["word", "n"]), rows, [{"no": 1}, 1])
    client.delete(stream, *client.keys(f"{stream}:txid:*"))
    client.close()


OPENERS = {"sqlite": _sqlite, "postgresql": _postgres, "redis": _redis}


@pytest.fixture(params=sorted(OPENERS))
def sink(request, tmp_path) -> Iterator[Sink]:
    opened = OPENERS[request.param](tmp_path)
    yield next(opened)
    next(opened, None)


def commit(state, txid, rows) -> None:
    state.begin_commit(txid)
    state.add(rows)
    state.commit(txid)


def test_a_committed_txid_is_skipped(sink: Sink) -> None:
    """A batch replayed after its commit (its ack lost) writes nothing; so does the same
    txid at a restarted task (a new state for the partition)."""
    state = sink.factory.make_state({}, None, 0, 1)
    commit(state, 1, [["the", 1], ["cow", 2]])
    commit(state, 1, [["the", 1], ["cow", 2]])
    restarted = sink.factory.make_state({}, None, 0, 1)
    assert restarted.last_committed_txid() == 1
    commit(restarted, 1, [["the", 1], ["cow", 2]])
    commit(restarted, 2, [["moon", 3]])
    assert sink.rows() == [["the", 1], ["cow", 2], ["moon", 3]]
    assert state.last_committed_txid() == 2


def test_rows_and_txid_land_together_or_not_at_all(sink: Sink) -> None:
    """The third row is refused inside the transaction: neither the two before it nor
    the txid are seen; the replay then writes the batch."""
    state = sink.factory.make_state({}, None, 0, 1)
    commit(state, 1, [["a", 1]])
    state.begin_commit(2)
    state.add([["b", 2], ["c", 3], sink.bad_row])
    with pytest.raises((RuntimeError, TypeError), match=r"sink .*"):
        state.commit(2)
    assert sink.rows() == [["a", 1]]
    assert state.last_committed_txid() == 1
    commit(state, 2, [["b", 2], ["c", 3]])
    assert sink.rows() == [["a", 1], ["b", 2], ["c", 3]]
    assert state.last_committed_txid() == 2


def test_partitions_keep_their_own_txids(sink: Sink) -> None:
    p0, p1 = (sink.factory.make_state({}, None, p, 2) for p in range(2))
    commit(p0, 1, [["p0", 1]])
    commit(p0, 2, [["p0", 2]])
    commit(p1, 1, [["p1", 1]])  # not skipped for partition 0's txid 2
    commit(p1, 1, [["p1", 1]])
    assert (p0.last_committed_txid(), p1.last_committed_txid()) == (2, 1)
    assert sorted(sink.rows()) == [["p0", 1], ["p0", 2], ["p1", 1]]


def test_a_batch_behind_the_last_commit_is_refused(sink: Sink) -> None:
    """A zombie's late commit of an older txid: refused, nothing written."""
    state = sink.factory.make_state({}, None, 0, 1)
    commit(state, 5, [["x", 5]])
    with pytest.raises(BatchBehindError, match=r"Current batch \(4\) is behind .*partition 0"):
        commit(state, 4, [["x", 4]])
    commit(state, None, [["drpc", 0]])  # no txid: written, nothing recorded
    assert sink.rows() == [["x", 5], ["drpc", 0]]
    assert state.last_committed_txid() == 5


def test_the_updater_hands_tuples_over_as_rows(sink: Sink) -> None:
    class T:
        def __init__(self, *values):
            self.values = list(values)
            self.fields = ["word", "n"]

    state = sink.factory.make_state({}, None, 0, 1)
    state.begin_commit(1)
    SinkUpdater().update_state(state, [T("a", 1), T("b", 2)], collector=None)
    state.commit(1)
    assert sink.rows() == [["a", 1], ["b", 2]]
    state.begin_commit(2)
    with pytest.raises(ValueError, match=r"a row of 1 values \['a'\] for the 2 columns"):
        state.add([["a"]])


def test_a_redis_transaction_that_fails_before_exec_leaves_nothing(tmp_path) -> None:
    """Redis has no rollback: the XADDs of a batch are queued behind MULTI and sent with
    EXEC; a failure while queueing (here, the txid SET) sends none of them."""
    opened = _redis(tmp_path)
    sink = next(opened)
    try:
        state = sink.factory.make_state({}, None, 0, 1)
        commit(state, 1, [["a", 1]])
        real = state.client.pipeline

        def failing_pipeline(*args, **kwargs):
            pipe = real(*args, **kwargs)

            def refuse(*_a, **_k):
                raise ConnectionError("killed between the XADDs and EXEC")

            pipe.set = refuse
            return pipe

        state.client.pipeline = failing_pipeline
        with pytest.raises(ConnectionError):
            commit(state, 2, [["b", 2], ["c", 3]])
        state.client.pipeline = real
        assert sink.rows() == [["a", 1]]
        assert state.last_committed_txid() == 1
    finally:
        next(opened, None)


def test_sink_factories_declare_what_the_planner_checks() -> None:
    for factory in (
        SqliteSinkFactory("x.db", "t", ["a"]),
        PostgresSinkFactory(PG_DSN, "t", ["a"]),
        RedisSinkFactory("s"),
    ):
        assert factory.state_type is StateType.TRANSACTIONAL
        assert factory.requires_deterministic_batches is True
        assert factory.shared_across_hosts is (not isinstance(factory, SqliteSinkFactory))
    with pytest.raises(ValueError, match=r"SQLite sink table 'bad name' must be letters"):
        SqliteSinkFactory("x.db", "bad name")
    with pytest.raises(ValueError, match=r"maxlen must be None or an int >= 1, got 0"):
        RedisSinkFactory("s", maxlen=0)


def test_decide() -> None:
    assert decide(1, None, partition=0) and decide(3, 2, partition=0)
    assert decide(None, 7, partition=0)
    assert not decide(2, 2, partition=0)
    with pytest.raises(BatchBehindError):
        decide(1, 2, partition=0)


def test_a_changed_partition_count_skips_what_the_old_layout_committed_and_refuses_a_part(
    sink: Sink,
) -> None:
    """A topology resubmitted with the sink at 3 partitions, where 2 had committed txid 1
    and only partition 0 had committed txid 2 when it died: txid 2's rows are dealt to
    other partitions now, so writing them would duplicate partition 0's and skipping
    would lose partition 1's. Refused, saying how to finish it; once the old layout
    committed all of txid 2, the new one skips it whole and writes txid 3."""
    old = [sink.factory.make_state({}, None, p, 2) for p in range(2)]
    commit(old[0], 1, [["a", 1]])
    commit(old[1], 1, [])  # an empty partition records its txid too
    assert old[1].last_committed_txid() == 1
    commit(old[0], 2, [["b", 2]])
    new = [sink.factory.make_state({}, None, p, 3) for p in range(3)]
    for p in (0, 2):
        with pytest.raises(
            SinkLayoutError,
            match=r"batch 2 was committed by partitions \[0\] of the earlier layout of 2 "
            r"partitions .*Submit the topology with the sink's earlier parallelism",
        ):
            commit(new[p], 2, [["b", 2]] if p == 2 else [])
    commit(old[1], 2, [["c", 2]])  # the old layout finishes it
    for p in range(3):
        commit(new[p], 2, [["b", 2], ["c", 2]] if p == 1 else [])
    commit(new[2], 3, [["d", 3]])
    assert sorted(sink.rows()) == [["a", 1], ["b", 2], ["c", 2], ["d", 3]]
    assert [s.last_committed_txid() for s in new] == [2, 2, 3]


@given(
    old=st.integers(1, 5),
    now=st.integers(1, 5),
    done=st.sets(st.integers(0, 4)),
    own_ahead=st.booleans(),
)
def test_decide_in_layout_writes_skips_or_refuses_by_what_the_old_layout_committed(
    old: int, now: int, done: set[int], own_ahead: bool
) -> None:
    """Partitions ``done`` of an ``old``-partition layout committed txid 5, the others 4;
    a partition of ``now`` partitions decides txid 5. Same count: each its own txid. Else
    all done: skipped; some: refused; none: written."""
    done = {q for q in done if q < old}
    marks = {q: Mark(5 if q in done else 4, old) for q in range(old)}
    for partition in range(now):
        mine = dict(marks)
        if own_ahead and old != now and partition >= old:
            mine[partition] = Mark(5, now)  # this layout already committed it here
        args = {"partition": partition, "partitions": now, "where": "sink"}
        if old == now:
            assert decide_in_layout(5, mine, **args) is (partition not in done)
        elif len(done) == old:
            assert decide_in_layout(5, mine, **args) is False
        elif done:
            with pytest.raises(SinkLayoutError, match="batch 5 was committed by partitions"):
                decide_in_layout(5, mine, **args)
        else:
            assert decide_in_layout(5, mine, **args) is (mine.get(partition, marks[0]).txid < 5)


def test_decide_in_layout_takes_records_without_a_count_as_this_layouts() -> None:
    """Records written before partition counts were kept: the old per-partition rule."""
    marks = {0: Mark(3, None), 1: Mark(2, None)}
    args = {"partitions": 4, "where": "sink"}
    assert decide_in_layout(3, marks, partition=0, **args) is False
    assert decide_in_layout(3, marks, partition=1, **args) is True
    assert decide_in_layout(3, marks, partition=3, **args) is True
    assert decide_in_layout(None, marks, partition=0, **args) is True


def test_redis_sink_back_to_fewer_partitions_sees_a_part_committed_by_a_high_partition() -> None:
    """A Redis sink runs at 2 partitions through txid 1. The user resubmits it at 4;
    the worker dies in txid 2's commit after partition 3 committed its row and before
    partitions 0-2 did. The user goes back to 2 partitions. docs/trident-state.md
    ('Changing parallelism'): a txid the old layout committed in part is refused with
    SinkLayoutError (as the SQLite and PostgreSQL sinks do here), never written twice.
    Seen before the fix: the Redis sink wrote txid 2's row again (``partition 3's`` row is in the
    stream twice): ``RedisSinkState._marks`` read the keys of partitions 0..count-1 and
    looked further only up to the largest count *those* keys named; here they still
    named 2 (from the first layout), so key 3's ``2/4`` was never read. Now the widest
    layout's count is kept."""
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {REDIS_URL} is not reachable: {exc}")
    stream = f"adv-sink-{uuid.uuid4().hex[:8]}"
    factory = RedisSinkFactory(stream, REDIS_URL, ["word"])
    try:
        first = [factory.make_state({}, None, p, 2) for p in range(2)]
        commit(first[0], 1, [["a"]])
        commit(first[1], 1, [["b"]])
        wide = factory.make_state({}, None, 3, 4)
        commit(wide, 2, [["c"]])  # only partition 3 of 4 committed txid 2, then a kill
        back = [factory.make_state({}, None, p, 2) for p in range(2)]
        for p, rows in ((0, [["c"]]), (1, [])):  # txid 2's row now goes to partition 0
            with pytest.raises(SinkLayoutError, match="batch 2 was committed by partitions"):
                commit(back[p], 2, rows)
    finally:
        words = [f[b"word"].decode() for _id, f in client.xrange(stream)]
        client.delete(stream, *client.keys(f"{stream}:txid:*"))
        client.close()
    assert sorted(words) == ["a", "b", "c"]
