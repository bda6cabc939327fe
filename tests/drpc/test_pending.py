"""PendingRequests, the DRPC server's request book, without any topology."""

from __future__ import annotations

import threading
import time

import pytest

from tupletree.drpc import DRPCExecutionError, DRPCTimeoutError, DRPCUnknownFunctionError
from tupletree.drpc.pending import PendingRequests


def call_async(book: PendingRequests, function: str, args: str) -> dict:
    """Run book.execute on a thread; the dict gets "result" or "error"."""
    out: dict = {}

    def run() -> None:
        try:
            out["result"] = book.execute(function, args)
        except Exception as exc:
            out["error"] = exc

    out["thread"] = threading.Thread(target=run)
    out["thread"].start()
    return out


def test_fetch_respond_round_trip():
    """A fetched request answered by respond() returns the result to the caller."""
    book = PendingRequests()
    book.register("f")
    call = call_async(book, "f", "x")
    [(rid, args)] = book.fetch("f", 10, 2.0)
    assert args == "x"
    assert book.respond(rid, "X")
    call["thread"].join(2)
    assert call["result"] == "X"
    assert book.pending() == 0
    assert not book.respond(rid, "again")  # answered already: dropped


def test_long_poll_returns_when_a_request_arrives():
    """fetch(wait) blocks until a request is queued, not for the whole wait."""
    book = PendingRequests()
    book.register("f")
    got: list = []
    fetcher = threading.Thread(target=lambda: got.extend(book.fetch("f", 5, 5.0)))
    fetcher.start()
    time.sleep(0.05)
    start = time.monotonic()
    call = call_async(book, "f", "y")
    fetcher.join(3)
    assert time.monotonic() - start < 1
    assert [a for _, a in got] == ["y"]
    book.fail(got[0][0], "nope")
    call["thread"].join(2)
    assert isinstance(call["error"], DRPCExecutionError)
    assert call["error"].reason == "nope"


def test_fetch_batches_in_order():
    """fetch takes up to max_items requests, oldest first; max_items=0 takes none."""
    book = PendingRequests(timeout_secs=5)
    book.register("f")
    calls = [call_async(book, "f", str(i)) for i in range(5)]
    deadline = time.monotonic() + 2
    while book.queued() < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert book.fetch("f", 0, 0.0) == []
    ids = [rid for rid, _ in book.fetch("f", 3)] + [rid for rid, _ in book.fetch("f", 3)]
    assert len(ids) == 5
    for rid in ids:
        book.respond(rid, "ok")
    for c in calls:
        c["thread"].join(2)
    assert sorted(c["result"] for c in calls) == ["ok"] * 5


def test_timeout_forgets_fetched_and_unfetched_requests():
    """A timed-out request leaves no state, fetched or not; its late result is dropped."""
    book = PendingRequests(timeout_secs=0.3)
    book.register("f")
    first = call_async(book, "f", "a")
    time.sleep(0.05)
    [(rid, _)] = book.fetch("f", 1)
    second = call_async(book, "f", "b")  # never fetched
    first["thread"].join(2)
    second["thread"].join(2)
    assert isinstance(first["error"], DRPCTimeoutError)
    assert isinstance(second["error"], DRPCTimeoutError)
    assert book.pending() == 0
    assert book.queued() == 0
    assert not book.respond(rid, "late")


def test_unknown_function_waits_for_a_spout():
    """A request for a function nobody serves yet is served if a spout shows up in time."""
    book = PendingRequests(unknown_function_wait_secs=2.0)
    call = call_async(book, "later", "z")
    time.sleep(0.2)
    [(rid, _)] = book.fetch("later", 1, 1.0)
    book.respond(rid, "Z")
    call["thread"].join(3)
    assert call["result"] == "Z"


def test_unknown_function_fails_after_the_wait():
    """Nobody fetching the function: DRPCUnknownFunctionError and no state left."""
    book = PendingRequests(unknown_function_wait_secs=0.1)
    with pytest.raises(DRPCUnknownFunctionError):
        book.execute("ghost", "x")
    assert book.pending() == 0 and book.queued() == 0


def test_function_known_only_while_served():
    """A remote spout's fetches keep a function known for function_ttl_secs."""
    now = [0.0]
    book = PendingRequests(function_ttl_secs=30, clock=lambda: now[0])
    book.fetch("f", 0)
    assert book._known("f")
    now[0] = 31.0
    assert not book._known("f")
    book.register("f")
    assert book._known("f")
    book.unregister("f")
    assert not book._known("f")


def test_close_fails_waiting_requests():
    """Shutting the server down fails the requests waiting on it."""
    book = PendingRequests()
    book.register("f")
    call = call_async(book, "f", "a")
    time.sleep(0.05)
    book.close("bye")
    call["thread"].join(2)
    assert call["error"].reason == "bye"
    with pytest.raises(DRPCExecutionError, match="shut down"):
        book.execute("f", "b")


def test_a_restarted_server_never_reuses_a_request_id():
    """A topology that outlives its DRPC server may answer the old server's requests:
    the new server's ids differ, so the answer cannot reach the wrong caller."""
    old, new = PendingRequests(timeout_secs=5), PendingRequests(timeout_secs=5)
    for book in (old, new):
        book.register("f")
    first = call_async(old, "f", "for the old server")
    [(old_id, _)] = old.fetch("f", 1, 2.0)
    old.close()
    first["thread"].join(2)
    second = call_async(new, "f", "for the new server")
    [(new_id, _)] = new.fetch("f", 1, 2.0)
    assert new_id != old_id
    assert not new.respond(old_id, "a late answer to the old request")
    assert new.respond(new_id, "the right answer")
    second["thread"].join(2)
    assert second["result"] == "the right answer"
