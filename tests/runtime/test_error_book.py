"""Error records and the ErrorBook that keeps them, with plain values: a flood of task
errors never pushes a restart out; every kind is bounded; the texts come back in the
order reported and render as ``cluster.errors`` always did; a record pickles."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.records.errors import ERROR, RESTART, TaskError, WorkerEvent
from tupletree.runtime.error_book import ErrorBook
from tupletree.runtime.error_log import MAX_ERROR_CHARS, format_error, task_error


def _task(i: int) -> TaskError:
    return TaskError("count", 3, "execute", "ValueError", f"bad {i}", "Traceback\n", float(i))


def _event(kind: str, i: int) -> WorkerEvent:
    return WorkerEvent(kind, f"restarted (restart {i})" if kind == RESTART else f"e{i}", i, 1, i)


def test_a_flood_of_task_errors_leaves_the_restarts_in_place():
    book = ErrorBook(task_limit=10, event_limit=3)
    book.add(_event(RESTART, 0))
    for i in range(10_000):
        book.add(_task(i))
    book.add(_event(RESTART, 1))
    assert [e.message for e in book.events()] == ["restarted (restart 0)", "restarted (restart 1)"]
    assert len(book.task_errors()) == 10 and book.task_errors()[-1].message == "bad 9999"
    texts = book.texts()
    assert texts[0] == "worker 1 restarted (restart 0)" and texts[-1].startswith(
        "worker 1 restarted"
    )
    assert book.added == 10_002


def test_worker_errors_cannot_push_restarts_out_either():
    book = ErrorBook(task_limit=5, event_limit=2)
    book.add(_event(RESTART, 0))
    for i in range(50):
        book.add(_event(ERROR, i))
    assert [e.kind for e in book.events()] == [RESTART, ERROR, ERROR]


records = st.one_of(
    st.integers(0, 10**6).map(_task),
    st.tuples(st.sampled_from([ERROR, RESTART]), st.integers(0, 10**6)).map(lambda ki: _event(*ki)),
)


@given(st.lists(records, max_size=60), st.integers(1, 8), st.integers(1, 8), st.data())
def test_each_kind_keeps_its_newest_in_the_order_reported(added, task_limit, event_limit, data):
    added = [dataclasses.replace(r, time=float(i)) for i, r in enumerate(added)]  # distinct
    book = ErrorBook(task_limit, event_limit)
    for record in added:
        book.add(record)
    # What an unbounded list per kind would hold, cut to each kind's newest.
    kind = [r.kind if isinstance(r, WorkerEvent) else "task" for r in added]
    keep = []
    for i, r in enumerate(added):
        later = sum(1 for k in kind[i + 1 :] if k == kind[i])
        if later < (task_limit if kind[i] == "task" else event_limit):
            keep.append(r)
    assert book.records() == keep
    assert book.texts() == [r.render() for r in keep]
    assert book.task_errors() == [r for r in keep if isinstance(r, TaskError)]
    assert book.events() == [r for r in keep if isinstance(r, WorkerEvent)]
    mark = data.draw(st.integers(0, len(added) + 2))
    assert book.since(mark) == [r for r in keep if added.index(r) >= mark]


def test_since_gives_what_came_after_a_mark():
    book = ErrorBook()
    book.add(_task(0))
    mark = book.added
    book.add(_event(ERROR, 1))
    book.add(_task(2))
    assert book.since(mark) == [_event(ERROR, 1), _task(2)]
    assert book.since(book.added) == []


def test_renders_as_cluster_errors_always_showed():
    try:
        raise ValueError("bad")
    except ValueError as exc:
        record = task_error("count", 3, "execute", exc, 12.5)
        text = format_error("count", 3, "execute", exc)
    assert record.render() == text
    # A report's lines after its first are indented (runtime/error_log.py's CONTINUATION).
    assert text.startswith("count[task 3] execute: ValueError: bad\n  Traceback")
    assert record.on_worker(1, 2).render() == f"worker 1: {text}"
    assert (record.exception, record.message, record.time) == ("ValueError", "bad", 12.5)
    assert WorkerEvent(ERROR, "lost a frame", 0.0, 2, 4, "tb").render() == (
        "worker 2 (attempt 4): lost a frame\ntb"
    )
    assert WorkerEvent(ERROR, "lost a frame", 0.0, 2).render() == "worker 2: lost a frame"
    assert WorkerEvent(ERROR, "the job ended", 0.0).render() == "the job ended"


def test_a_huge_exception_makes_a_record_within_the_bound():
    record = task_error("c", 1, "execute", ValueError("x" * 100_000), 0.0)
    assert len(record.render()) <= MAX_ERROR_CHARS
    assert "more characters]" in record.message


def test_records_pickle_and_refuse_an_unknown_kind():
    record = _task(1).on_worker(3, 7)
    assert pickle.loads(pickle.dumps(record)) == record
    event = _event(RESTART, 2)
    assert pickle.loads(pickle.dumps(event)) == event
    with pytest.raises(ValueError, match="kind"):
        WorkerEvent("reboot", "x", 0.0)
    with pytest.raises(TypeError, match="not an error record"):
        ErrorBook().add("a text")  # type: ignore[arg-type]
