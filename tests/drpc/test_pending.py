"""PendingRequests, the DRPC server's request book, without any topology."""

from __future__ import annotations

import threading
import time

import pytest

from tupletree.drpc import (
    DRPCBusyError,
    DRPCExecutionError,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)
from tupletree.drpc.pending import PendingRequests, held_bytes


def wait_until(condition, what: str, deadline: float = 30.0) -> None:
    """Poll ``condition`` (generous deadline: the machine is shared)."""
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, f"still not true after {deadline:g} s: {what}"
        time.sleep(0.01)


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
    [(rid, args)] = book.fetch("f", 10, 30.0)
    assert args == "x"
    assert book.respond(rid, "X")
    call["thread"].join(30)
    assert call["result"] == "X"
    assert book.pending() == 0
    assert not book.respond(rid, "again")  # answered already: dropped


def test_long_poll_returns_when_a_request_arrives():
    """fetch(wait) blocks until a request is queued, not for the whole wait."""
    book = PendingRequests()
    book.register("f")
    got: list = []
    fetcher = threading.Thread(target=lambda: got.extend(book.fetch("f", 5, 60.0)))
    fetcher.start()
    time.sleep(0.05)  # a head start only: a late fetcher finds the request queued
    call = call_async(book, "f", "y")
    fetcher.join(30)  # well before the fetch's own 60 s wait ends
    assert not fetcher.is_alive()
    assert [a for _, a in got] == ["y"]
    book.fail(got[0][0], "nope")
    call["thread"].join(30)
    assert isinstance(call["error"], DRPCExecutionError)
    assert call["error"].reason == "nope"


def test_fetch_batches_in_order():
    """fetch takes up to max_items requests, oldest first; max_items=0 takes none."""
    book = PendingRequests(timeout_secs=5)
    book.register("f")
    calls = [call_async(book, "f", str(i)) for i in range(5)]
    wait_until(lambda: book.queued() == 5, "5 requests queued")
    assert book.fetch("f", 0, 0.0) == []
    ids = [rid for rid, _ in book.fetch("f", 3)] + [rid for rid, _ in book.fetch("f", 3)]
    assert len(ids) == 5
    for rid in ids:
        book.respond(rid, "ok")
    for c in calls:
        c["thread"].join(30)
    assert sorted(c["result"] for c in calls) == ["ok"] * 5


def test_timeout_forgets_fetched_and_unfetched_requests():
    """A timed-out request leaves no state, fetched or not; its late result is dropped."""
    now = [0.0]
    book = PendingRequests(timeout_secs=0.3, clock=lambda: now[0])
    book.register("f")
    first = book.submit("f", "a")
    [(rid, _)] = book.fetch("f", 1)
    second = book.submit("f", "b")  # never fetched
    assert book.check(first) == pytest.approx(0.3)
    now[0] = 0.3
    with pytest.raises(DRPCTimeoutError, match=r"within 0\.3 s"):
        book.check(first)
    with pytest.raises(DRPCTimeoutError):
        book.check(second)
    assert book.pending() == 0
    assert book.queued() == 0
    assert not book.respond(rid, "late")


def test_unknown_function_waits_for_a_spout():
    """A request for a function nobody serves yet is served if a spout shows up in time."""
    now = [0.0]
    book = PendingRequests(unknown_function_wait_secs=2.0, clock=lambda: now[0])
    req = book.submit("later", "z")
    now[0] = 1.9
    assert book.check(req) == pytest.approx(0.1)  # still waiting for a spout
    [(rid, _)] = book.fetch("later", 1)
    now[0] = 5.0
    assert book.check(req) == pytest.approx(600 - 5.0)  # fetched: only the deadline
    book.respond(rid, "Z")
    assert book.check(req) is None
    assert req.outcome() == "Z"


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
    wait_until(lambda: book.pending() == 1, "the caller waiting")
    book.close("bye")
    call["thread"].join(30)
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
    [(old_id, _)] = old.fetch("f", 1, 30.0)
    old.close()
    first["thread"].join(30)
    second = call_async(new, "f", "for the new server")
    [(new_id, _)] = new.fetch("f", 1, 30.0)
    assert new_id != old_id
    assert not new.respond(old_id, "a late answer to the old request")
    assert new.respond(new_id, "the right answer")
    second["thread"].join(30)
    assert second["result"] == "the right answer"


def test_a_function_whose_spouts_stop_fetching_answers_404():
    """A function fetched once (a made-up name, a killed topology) is known for
    function_ttl_secs; a request for it gets DRPCUnknownFunctionError once it has been
    unknown for unknown_function_wait_secs, not at the request timeout."""
    now = [0.0]
    book = PendingRequests(unknown_function_wait_secs=5, function_ttl_secs=30, clock=lambda: now[0])
    book.fetch("ghost", 0)  # one fetch, then nothing
    now[0] = 10.0
    req = book.submit("ghost", "x")
    assert book.check(req) == pytest.approx(30 + 5 - 10)
    now[0] = 34.9
    assert book.check(req) == pytest.approx(0.1)
    now[0] = 35.0
    with pytest.raises(DRPCUnknownFunctionError, match="no topology serves function 'ghost'"):
        book.check(req)
    assert book.pending() == 0 and book.queued() == 0


def test_a_served_function_never_goes_unknown():
    """Spouts that keep fetching (here with max=0: deactivated, or full) keep their
    function known, however long a request waits; a local spout's registration too."""
    now = [0.0]
    book = PendingRequests(timeout_secs=600, unknown_function_wait_secs=5, clock=lambda: now[0])
    req = book.submit("f", "x")
    book.register("local")
    local = book.submit("local", "y")
    for t in range(1, 600):
        now[0] = float(t)
        book.fetch("f", 0)
        assert book.check(req) is not None
        assert book.check(local) is not None
    now[0] = 600.0
    with pytest.raises(DRPCTimeoutError):
        book.check(req)


def test_requests_and_their_arguments_are_bounded():
    """Past max_pending requests, or max_pending_bytes of argument memory, submit raises
    DRPCBusyError and keeps nothing; answered requests make room again."""
    a, b = "x" * 100, "y" * 50
    book = PendingRequests(max_pending=2, max_pending_bytes=held_bytes(a) + held_bytes(b))
    book.register("f")
    book.submit("f", a)
    book.submit("f", b)
    with pytest.raises(DRPCBusyError, match="max_pending=2"):
        book.submit("f", "")
    [(rid, args), _] = book.fetch("f", 2)
    assert args == a
    book.respond(rid, "done")
    with pytest.raises(DRPCBusyError, match=f"max_pending_bytes={book.max_pending_bytes}"):
        book.submit("f", "z" * 101)
    assert book.pending() == 1 and book.pending_bytes() == held_bytes(b)
    book.submit("f", "z" * 100)
    assert book.pending() == 2


def test_wide_characters_count_the_memory_they_take():
    """A str takes the width of its widest character for every character: one emoji
    makes 1,000 characters take 4,000 bytes. The bound counts that (it counted
    characters, so 4-byte text held 4x its bound)."""
    narrow, wide = "x" * 1000, "x" * 999 + "\U0001f600"
    assert held_bytes(wide) >= 4000 > 2 * held_bytes(narrow)
    book = PendingRequests(max_pending_bytes=3 * held_bytes(narrow))
    book.register("f")
    book.submit("f", narrow)
    with pytest.raises(DRPCBusyError, match="max_pending_bytes"):
        book.submit("f", wide)
    book.submit("f", narrow)
    book.submit("f", narrow)
    assert book.pending() == 3


def test_request_ids_are_unguessable():
    """Ids are 128 random bits: a caller who learns its own request's id (or a
    thousand of them) learns nothing of the next one's (they were
    "<8 hex>-<counter>", so a stranger could answer another caller's request)."""
    book = PendingRequests()
    book.register("f")
    ids = [book.submit("f", "x").id for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(len(i) >= 22 for i in ids)
    # No shared structure: random ids share no 6-character prefix or suffix (a chance
    # of about 1000**2 / 64**6 / 2 = 7e-6), a counter's share its prefix.
    assert len({i[:6] for i in ids}) == 1000
    assert len({i[-6:] for i in ids}) == 1000


def test_function_table_is_bounded_and_stale_names_make_room():
    """At most max_functions names with a fetch on record: a new name is refused while
    all are fresh; names not fetched for function_ttl_secs make room, and a name that
    keeps being fetched keeps its place."""
    now = [0.0]
    book = PendingRequests(max_functions=3, function_ttl_secs=30, clock=lambda: now[0])
    for name in ("a", "b", "served"):
        book.fetch(name, 0)
    with pytest.raises(DRPCBusyError, match="max_functions=3"):
        book.fetch("d", 0)
    now[0] = 20.0
    book.fetch("served", 0)
    now[0] = 31.0
    book.fetch("d", 0)  # "a" and "b" are stale
    book.fetch("e", 0)
    assert book.functions() == 3
    assert book._known("served") and book._known("d") and book._known("e")
    with pytest.raises(DRPCBusyError):
        book.fetch("f", 0)


def test_abandoned_request_leaves_nothing():
    """A caller that goes away (an HTTP client hanging up) leaves no state."""
    book = PendingRequests()
    book.register("f")
    req = book.submit("f", "x")
    book.abandon(req)
    assert book.pending() == 0 and book.queued() == 0
    assert book.fetch("f", 5) == []
