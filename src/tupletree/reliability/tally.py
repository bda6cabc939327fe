"""Tally: whether a task has seen every tuple of one request or batch.

Linear DRPC (CoordinatedBolt) and every Trident bolt (Storm's TridentBoltExecutor) have
the same problem: the tuples of one id (a DRPC request, a Trident batch) reach a task
from several upstream tasks, and nothing in the tuples says which one is the last. So
each upstream task, once it is done with the id, reports to every downstream task how
many tuples of the id it sent there (0 included). A task's Tally of one id holds

- ``received``: tuples of the id this task got;
- ``reports`` / ``expected``: the reports heard so far, and the sum of their counts;
- ``sent``: tuples of the id this task sent, per downstream task (what it reports in
  turn, ``counts_for``).

``status(needed)`` says where the id stands once ``needed`` reports are due:
WAITING (reports missing, or tuples still on their way), COMPLETE (every report heard
and ``received == expected``), OVER (every report heard and more tuples than reported:
a duplicate delivery; the id cannot be trusted). With every report heard and fewer
tuples than reported it stays WAITING: a tuple may still be queued behind the report
(delivery between two tasks is in order, so only a lost tuple leaves it waiting for
good; its tree then times out).

Pure: plain counters, no I/O, no clock. Cost: O(1) per event; ``sent`` holds one entry
per downstream task the id went to.
"""

from __future__ import annotations

from collections.abc import Iterable

WAITING = 0
COMPLETE = 1
OVER = 2


class Tally:
    __slots__ = ("expected", "received", "reports", "sent")

    def __init__(self) -> None:
        self.reports = 0
        self.expected = 0
        self.received = 0
        self.sent: dict[int, int] = {}

    def count_sent(self, tasks: Iterable[int]) -> None:
        """One tuple went to each of ``tasks`` (what an emit returned)."""
        sent = self.sent
        for task in tasks:
            sent[task] = sent.get(task, 0) + 1

    def report(self, count: int) -> None:
        """An upstream task says it sent this task ``count`` tuples of the id."""
        if count < 0:
            raise ValueError(f"a tally report must count 0 or more tuples, got {count}")
        self.reports += 1
        self.expected += count

    def status(self, needed: int) -> int:
        """WAITING, COMPLETE or OVER, once ``needed`` reports are due (see the module)."""
        if self.reports < needed:
            return WAITING
        if self.received == self.expected:
            return COMPLETE
        return OVER if self.received > self.expected else WAITING

    def counts_for(self, tasks: Iterable[int]) -> list[tuple[int, int]]:
        """(task, tuples sent to it) for every task in ``tasks``, 0 where none went."""
        sent = self.sent
        return [(task, sent.get(task, 0)) for task in tasks]

    def __repr__(self) -> str:
        return (
            f"Tally(received={self.received}, reports={self.reports}, "
            f"expected={self.expected}, sent={self.sent})"
        )
