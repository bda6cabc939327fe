"""The Redis store's own promises: its layout (a hash per namespace), the WATCH retry
that happens only while the expectations still hold, a dropped connection, and no
password in its name, errors or logs."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.store.conftest import REDIS_URL, Location, redis_down
from tupletree.store import Expect, Put, StoreError, open_store

redis = pytest.importorskip("redis")
from tupletree.store import redis as redis_store  # noqa: E402


@pytest.fixture
def loc(request: pytest.FixtureRequest) -> Iterator[Location]:
    from tests.store.conftest import _redis

    made = _redis(request)
    location = next(made)
    yield location
    location.close_all()
    next(made, None)


@pytest.fixture
def raw() -> Iterator[object]:
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def test_layout_is_a_hash_per_namespace(loc: Location, raw) -> None:
    store = loc.open()
    prefix = loc.config["prefix"]
    store.apply([Put("counts", "cow", b"3"), Put("counts", "moon", b"1")])
    assert raw.hgetall(prefix + "counts") == {b"cow": b"3", b"moon": b"1"}
    assert store.name == f"redis store {REDIS_URL} keys {prefix + '*'!r}"
    assert store.shared_across_hosts is True


def test_namespaces_lists_only_this_prefixs_hashes(loc: Location, raw) -> None:
    """A key of another type under the prefix, or another prefix, is not a namespace."""
    store = loc.open()
    prefix = loc.config["prefix"]
    store.apply([Put("a", "k", b"1")])
    raw.set(prefix + "a-string", b"not ours")
    raw.hset(prefix[:-1] + "x:a", "k", b"another prefix")  # shares the text up to ':'
    try:
        assert store.namespaces("a") == ["a"]
        assert store.namespaces("") == ["a"]
    finally:
        raw.delete(prefix[:-1] + "x:a")


def _interfere(monkeypatch: pytest.MonkeyPatch, times: int, change) -> list[int]:
    """After apply reads its expectations (under WATCH), ``change`` writes from another
    client, the first ``times`` tries."""
    real = redis_store.RedisStore._holds
    tries: list[int] = []

    def holds(self, pipe, expect):
        ok = real(self, pipe, expect)
        tries.append(1)
        if len(tries) <= times:
            change()
        return ok

    monkeypatch.setattr(redis_store.RedisStore, "_holds", holds)
    return tries


def test_a_watched_hash_that_changed_elsewhere_is_retried_while_expectations_hold(
    loc: Location, raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another field of the watched hash changes between the check and EXEC: the apply
    retries and applies; the other client's write stays."""
    store = loc.open()
    key = loc.config["prefix"] + "p"
    store.apply([Put("p", "txid", b"3")])
    tries = _interfere(monkeypatch, 2, lambda: raw.hset(key, "other", b"x"))
    assert store.apply([Put("p", "txid", b"4")], expect=[Expect("p", "txid", b"3")])
    assert len(tries) == 3
    assert store.get("p", ["txid", "other"]) == [b"4", b"x"]


def test_a_watched_expectation_that_changed_elsewhere_is_false_not_retried(
    loc: Location, raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zombie coordinator: the txid moves between its check and its EXEC; the apply
    returns False and writes nothing."""
    store = loc.open()
    key = loc.config["prefix"] + "p"
    store.apply([Put("p", "txid", b"3")])
    tries = _interfere(monkeypatch, 1, lambda: raw.hset(key, "txid", b"9"))
    assert not store.apply(
        [Put("p", "txid", b"4"), Put("p", "meta", b"m")], expect=[Expect("p", "txid", b"3")]
    )
    assert len(tries) == 2
    assert store.get("p", ["txid", "meta"]) == [b"9", None]


def test_a_hash_that_changes_on_every_try_gives_up_by_name(
    loc: Location, raw, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = loc.open()
    key = loc.config["prefix"] + "p"
    monkeypatch.setattr(redis_store, "MAX_ATTEMPTS", 3)
    _interfere(monkeypatch, 10**6, lambda: raw.hincrby(key, "noise", 1))
    with pytest.raises(StoreError, match=r"gave up after 3 attempts.*tt-test-.*:p"):
        store.apply([Put("p", "k", b"v")], expect=[Expect("p", "k", None)])
    assert raw.hget(key, "k") is None


def test_a_dropped_connection_is_opened_again_for_reads(loc: Location, raw) -> None:
    store = loc.open()
    store.apply([Put("n", "k", b"1")])
    raw.client_kill_filter(_type="normal", skipme=True)  # the store's connection too
    assert store.get("n", ["k"]) == [b"1"]
    raw.client_kill_filter(_type="normal", skipme=True)
    assert store.apply([Put("n", "k", b"2")], expect=[Expect("n", "k", b"1")])
    assert store.get("n", ["k"]) == [b"2"]


PASSWORD = "s3cret-Pa55"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:1/0",  # nobody listens on port 1
        f"redis://user:{PASSWORD}@127.0.0.1:6379/0",  # no such user here
    ],
)
def test_no_password_in_name_error_or_log(url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Unreachable server or bad credentials: StoreError at open naming the store
    (host, port, db) without the password, and nothing of it logged."""
    if "6379" in url and redis_down():
        pytest.skip(redis_down())
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError, match=r"redis store redis://.*127\.0\.0\.1:\d+/0") as err:
        open_store("redis", {"url": url})
    shown = f"{err.value!s} {err.value.store} {err.value!r} {err.value.__cause__!r}"
    assert "127.0.0.1" in shown
    assert PASSWORD not in shown
    assert PASSWORD not in caplog.text
    if "@" in url:
        assert ":***@" in err.value.store


def test_a_password_parameter_is_not_in_the_name(caplog: pytest.LogCaptureFixture) -> None:
    """Redis here has no password: AUTH with one alone is accepted, the store opens."""
    if redis_down():
        pytest.skip(redis_down())
    caplog.set_level(logging.DEBUG)
    with open_store("redis", {"url": f"{REDIS_URL}?password={PASSWORD}"}) as store:
        assert store.name == f"redis store {REDIS_URL}?password=*** keys 'tupletree:*'"
    assert PASSWORD not in caplog.text


def test_bad_urls_are_refused_without_showing_them() -> None:
    with pytest.raises(ValueError, match=r"bad url") as err:
        open_store("redis", {"url": f"http://u:{PASSWORD}@h/0"})
    assert PASSWORD not in str(err.value)
    for url in (6379, f"user:{PASSWORD}@127.0.0.1:6379"):  # no scheme: cannot be parsed
        with pytest.raises(ValueError, match=r"url must be a redis://") as err:
            open_store("redis", {"url": url})
        assert PASSWORD not in str(err.value)
