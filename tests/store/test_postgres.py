"""The PostgreSQL store's own promises: its table (created once, whoever comes first),
a zombie's compare-and-set refused through a serialization failure, a dropped
connection, no password in its name, errors or logs."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.store.conftest import PG_DSN, Location, postgres_down
from tupletree.store import Expect, Put, StoreError, open_store


@pytest.fixture
def loc(request: pytest.FixtureRequest) -> Iterator[Location]:
    from tests.store.conftest import _postgresql

    made = _postgresql(request)
    location = next(made)
    yield location
    location.close_all()
    next(made, None)


def test_layout_is_one_table_with_code_point_collation(loc: Location) -> None:
    import psycopg

    store = loc.open()
    table = loc.config["prefix"] + "tupletree_store"
    store.apply([Put("counts", "cow", b"3")])
    assert store.name == f"postgresql store postgres@127.0.0.1:5432/test table {table!r}"
    assert store.shared_across_hosts is True
    with psycopg.connect(PG_DSN) as conn:
        rows = conn.execute(f"SELECT namespace, key, value FROM {table}").fetchall()
        assert rows == [("counts", "cow", b"3")]
        collations = conn.execute(
            "SELECT column_name, collation_name FROM information_schema.columns "
            "WHERE table_name = %s AND data_type = 'text' ORDER BY column_name",
            [table],
        ).fetchall()
    assert collations == [("key", "C"), ("namespace", "C")]


def test_stores_opening_at_once_create_the_table_once(loc: Location) -> None:
    """Four tasks start together on a fresh table name: all open, none fails."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        try:
            barrier.wait(timeout=30)
            loc.open()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(loc.opened) == 4


def test_a_zombie_whose_txid_moved_during_its_apply_is_refused(
    loc: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store moves the txid after this apply read it and before it wrote:
    PostgreSQL aborts this one (serialization failure), the retry reads the new txid, and
    the apply returns False, writing nothing."""
    from tupletree.store import postgres

    store, other = loc.open(), loc.open()
    store.apply([Put("p", "txid", b"3")])
    real = postgres.PostgresStore._holds
    tries: list[int] = []

    def holds(self, conn, expect):
        ok = real(self, conn, expect)
        if self is not store:
            return ok
        tries.append(1)
        if len(tries) == 1:
            assert other.apply([Put("p", "txid", b"9")])
        return ok

    monkeypatch.setattr(postgres.PostgresStore, "_holds", holds)
    assert not store.apply(
        [Put("p", "txid", b"4"), Put("p", "meta", b"m")], expect=[Expect("p", "txid", b"3")]
    )
    assert len(tries) == 2
    assert other.get("p", ["txid", "meta"]) == [b"9", None]


def _terminate_store_connections() -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'tupletree store' AND pid <> pg_backend_pid()"
        )


def test_a_dropped_connection_is_opened_again(loc: Location) -> None:
    """The server ends the store's session (a restart, an idle timeout): the next apply
    (its BEGIN fails: nothing was applied) and the next read open a new connection."""
    store = loc.open()
    store.apply([Put("n", "k", b"1")])
    _terminate_store_connections()
    assert store.apply([Put("n", "k", b"2")], expect=[Expect("n", "k", b"1")])
    _terminate_store_connections()
    assert store.get("n", ["k"]) == [b"2"]
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("n", ["k"])


PASSWORD = "s3cret-Pa55"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test", "postgres@127.0.0.1:1/test"),
        (f"host=127.0.0.1 port=1 user=u password={PASSWORD} dbname=x", "u@127.0.0.1:1/x"),
        # a role that does not exist: refused by the server (bad credentials)
        (
            f"postgresql://nobody_{uuid.uuid4().hex[:6]}:{PASSWORD}@127.0.0.1:5432/test",
            "127.0.0.1:5432/test",
        ),
    ],
)
def test_no_password_in_name_error_or_log(
    dsn: str, shown: str, caplog: pytest.LogCaptureFixture
) -> None:
    if "5432" in dsn and postgres_down():
        pytest.skip(postgres_down())
    pytest.importorskip("psycopg")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError, match="cannot connect") as err:
        open_store("postgresql", {"dsn": dsn})
    assert shown in err.value.store
    text = f"{err.value!s} {err.value.store} {err.value!r} {err.value.__cause__!r}"
    assert PASSWORD not in text
    assert PASSWORD not in caplog.text


def test_a_dsn_that_does_not_parse_is_not_shown() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ValueError, match="does not parse") as err:
        open_store("postgresql", {"dsn": f"host=x password=abc {PASSWORD}"})
    assert PASSWORD not in str(err.value)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({}, "needs 'dsn'"),
        ({"dsn": 5432}, "dsn must be a str"),
        ({"dsn": "host=127.0.0.1 port=1", "prefix": "Drop Table"}, "prefix 'Drop Table'"),
    ],
)
def test_bad_config_is_refused_naming_the_key(config, named) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(ValueError, match=named):
        open_store("postgresql", config)
