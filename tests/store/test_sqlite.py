"""The SQLite store's own promises: its layout, WAL mode for several processes, a writer
that cannot get the lock told so by name (nothing written), bad config refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tupletree.store import Expect, Put, StoreError, open_store
from tupletree.store import sqlite as sqlite_store


def test_layout_is_one_table_an_operator_can_read(tmp_path: Path) -> None:
    """docs/state-backends.md's SELECT works on the file: one row per key."""
    path = tmp_path / "s.db"
    with open_store("sqlite", {"path": str(path), "prefix": "wc_"}) as store:
        store.apply([Put("counts", "cow", b"3"), Put("counts", "moon", b"1")])
        assert store.name == f"sqlite store {str(path)!r} table 'wc_tupletree_store'"
        assert store.shared_across_hosts is False
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    rows = conn.execute(
        "SELECT namespace, key, value FROM wc_tupletree_store ORDER BY key"
    ).fetchall()
    assert rows == [("counts", "cow", b"3"), ("counts", "moon", b"1")]


def test_two_prefixes_share_a_file_apart(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    a = open_store("sqlite", {"path": path, "prefix": "a_"})
    b = open_store("sqlite", {"path": path})
    a.apply([Put("n", "k", b"a")])
    assert b.get("n", ["k"]) == [None]
    assert b.namespaces("") == []
    a.close()
    b.close()


def test_a_writer_that_cannot_get_the_lock_fails_by_name_writing_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds the write lock past the busy timeout: StoreError naming
    the file and the lock; reads go on meanwhile (WAL); the write goes in afterwards."""
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_SECS", 0.2)
    path = str(tmp_path / "s.db")
    store = open_store("sqlite", {"path": path})
    store.apply([Put("n", "k", b"1")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE tupletree_store SET value = x'39'")  # uncommitted
    with pytest.raises(StoreError, match=r"s\.db'.*apply failed.*write lock") as err:
        store.apply([Put("n", "k", b"2"), Put("n", "j", b"2")])
    assert err.value.store == store.name
    assert store.get("n", ["k", "j"]) == [b"1", None]  # the reader does not wait
    holder.execute("ROLLBACK")
    assert store.apply([Put("n", "k", b"2")], expect=[Expect("n", "k", b"1")])
    store.close()


def test_a_file_that_cannot_be_opened_is_a_store_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "s.db"
    with pytest.raises(StoreError, match=r"sqlite store '.*no-such-dir/s\.db': cannot open"):
        open_store("sqlite", {"path": str(missing)})
    # SQLite says only "unable to open database file": the error says why.
    with pytest.raises(StoreError, match=r"its folder '.*no-such-dir' does not exist"):
        open_store("sqlite", {"path": str(missing)})
    not_sqlite = tmp_path / "text.db"
    not_sqlite.write_text("this is not a database" * 100)
    with pytest.raises(StoreError, match=r"text\.db'"):
        open_store("sqlite", {"path": str(not_sqlite)})


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({}, "needs 'path'"),
        ({"path": ""}, "path must be a file name"),
        ({"path": 3}, "path must be a file name"),
        ({"path": "x.db", "prefix": "Bad-Prefix"}, "prefix 'Bad-Prefix'"),
        ({"path": "x.db", "prefix": "1a"}, "prefix '1a'"),
        ({"path": "x.db", "prefix": "a" * 60}, "60 characters"),
    ],
)
def test_bad_config_is_refused_naming_the_key(config, named, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=named):
        open_store("sqlite", config)
    assert not (tmp_path / "x.db").exists()
