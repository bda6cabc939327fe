"""Components of the persistent-window tests (kept apart so SparkCluster ships them by
value): a durable numbered source whose acks live in the state store, and a persistent
window that records, per window, what it saw."""

from __future__ import annotations

from collections import deque
from typing import Any

from tupletree import TopologyBuilder
from tupletree.state.provider import open_state_store
from tupletree.store import Put
from tupletree.testing.shared import SharedList
from tupletree.topology.components import Spout
from tupletree.windowing import Count, StatefulWindowedBolt


class Numbers(Spout):
    """Emits [n] with message id n for n in 0..total-1 (at most ``limit`` of them in this
    life), in order; acked ids are kept in the state store (namespace ``numbers``), so a
    topology submitted again emits only the unacked ones, in order. A failed one comes
    again first."""

    outputs = ["n"]

    def __init__(self, total: int, limit: int | None = None) -> None:
        self.total = total
        self.limit = limit

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.store = open_state_store(conf)
        acked = {int(k) for k, _ in self.store.items("numbers")}
        self.todo = deque(n for n in range(self.total) if n not in acked)
        self.emitted = 0

    def next_tuple(self) -> None:
        if not self.todo or (self.limit is not None and self.emitted >= self.limit):
            return
        n = self.todo.popleft()
        self.emitted += 1
        self.collector.emit([n], msg_id=n)

    def ack(self, msg_id: int) -> None:
        self.store.apply([Put("numbers", str(msg_id), b"1")])

    def fail(self, msg_id: int) -> None:
        self.todo.appendleft(msg_id)

    def close(self) -> None:
        self.store.close()


class WindowSummary(StatefulWindowedBolt):
    """Records (last n, first n, size, sum) of each window, read through ``iter()``, and
    keeps a count of windows in its state."""

    outputs = ["last", "size"]

    def __init__(self, windows: SharedList) -> None:
        self.windows = windows

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        first = last = None
        size = total = 0
        for tup in window.iter():
            n = tup[0]
            first = n if first is None else min(first, n)
            last = n if last is None else max(last, n)
            size += 1
            total += n
        self.windows.append((last, first, size, total))
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.collector.emit([last, size])


def persistent_window(total: int, windows: SharedList, limit: int | None = None) -> Any:
    """Numbers -> a Count(10,000) window sliding Count(1,000), at most 1,000 tuples in
    memory."""
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(total, limit))
    bolt = (
        WindowSummary(windows)
        .with_window(Count(10_000), Count(1_000))
        .with_persistence()
        .with_max_events_in_memory(1_000)
    )
    b.set_bolt("window", bolt).shuffle_grouping("numbers")
    return b.create_topology()


def reference_windows(total: int) -> dict[int, tuple[int, int, int, int]]:
    """What a Count(10,000)/Count(1,000) window over 0..total-1 fires, by last n."""
    out = {}
    for end in range(1_000, total + 1, 1_000):
        first = max(0, end - 10_000)
        out[end - 1] = (end - 1, first, end - first, sum(range(first, end)))
    return out


class DyingWindowSummary(WindowSummary):
    """WindowSummary whose worker process SIGKILLs itself, once in the topology's life
    (a flag file says it happened), at the first window whose last input is at least
    ``die_at``."""

    def __init__(self, windows: SharedList, flag: str, die_at: int) -> None:
        super().__init__(windows)
        self.flag = flag
        self.die_at = die_at

    def execute(self, window: Any) -> None:
        import os
        import signal

        super().execute(window)
        if self.windows.items()[-1][0] >= self.die_at:
            try:
                os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os.kill(os.getpid(), signal.SIGKILL)


def dying_persistent_window(total: int, windows: SharedList, flag: str, die_at: int) -> Any:
    """Numbers -> a Count(1,000) window sliding Count(100), at most 100 in memory, whose
    worker dies once after ``die_at`` inputs."""
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(total))
    bolt = (
        DyingWindowSummary(windows, flag, die_at)
        .with_window(Count(1_000), Count(100))
        .with_persistence()
        .with_max_events_in_memory(100)
    )
    b.set_bolt("window", bolt).shuffle_grouping("numbers")
    return b.create_topology()


def reference_small_windows(total: int) -> dict[int, tuple[int, int, int, int]]:
    out = {}
    for end in range(100, total + 1, 100):
        first = max(0, end - 1_000)
        out[end - 1] = (end - 1, first, end - first, sum(range(first, end)))
    return out


class CountingWindows(StatefulWindowedBolt):
    """A plain (in-memory) stateful window: keeps how many windows and tuples it saw in
    its state and emits each window's sum."""

    outputs = ["sum"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        values = [t[0] for t in window.get()]
        self.state.put("windows", self.state.get("windows", 0) + 1)
        self.state.put("seen", self.state.get("seen", 0) + len(window.get_new()))
        self.collector.emit([sum(values)])
