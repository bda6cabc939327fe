"""Tally (the per-id counting CoordinatedBolt and Trident's bolts share): complete exactly
when every report arrived and every reported tuple did, in any order that keeps each
upstream task's tuples ahead of its report."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tupletree.reliability.tally import COMPLETE, OVER, WAITING, Tally


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[int, list[tuple[int, str]]]:
    """Per upstream task some tuples then its report, the tasks' streams interleaved at
    random (order within one task's stream kept: delivery between two tasks is FIFO)."""
    counts = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    streams = [[(i, "tuple")] * n + [(i, "report")] for i, n in enumerate(counts)]
    order: list[tuple[int, str]] = []
    while any(streams):
        live = [s for s in streams if s]
        pick = draw(st.integers(0, len(live) - 1))
        order.append(live[pick].pop(0))
    return len(counts), order


@given(deliveries())
def test_complete_exactly_at_the_last_event(case: tuple[int, list[tuple[int, str]]]) -> None:
    """WAITING after every event but the last, COMPLETE after the last."""
    needed, order = case
    counts: dict[int, int] = {}
    for task, kind in order:
        if kind == "tuple":
            counts[task] = counts.get(task, 0) + 1
    tally = Tally()
    seen = []
    for task, kind in order:
        if kind == "tuple":
            tally.received += 1
        else:
            tally.report(counts.get(task, 0))
        seen.append(tally.status(needed))
    assert seen[-1] == COMPLETE
    assert all(s == WAITING for s in seen[:-1])


def test_a_duplicate_tuple_is_over() -> None:
    tally = Tally()
    tally.received = 3
    tally.report(2)
    assert tally.status(1) == OVER


def test_fewer_tuples_than_reported_waits() -> None:
    """A tuple may still be queued behind the report: wait (its tree's timeout ends it)."""
    tally = Tally()
    tally.received = 1
    tally.report(2)
    assert tally.status(1) == WAITING
    tally.received += 1
    assert tally.status(1) == COMPLETE


def test_counts_for_names_every_task_with_zero_default() -> None:
    tally = Tally()
    tally.count_sent([4, 5])
    tally.count_sent([5])
    assert tally.counts_for([3, 4, 5]) == [(3, 0), (4, 1), (5, 2)]


def test_a_negative_report_is_refused() -> None:
    with pytest.raises(ValueError, match="-1"):
        Tally().report(-1)
