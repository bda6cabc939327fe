"""Per-tuple cost of windowed bolts beside a plain bolt, on one worker driven directly
(no LocalCluster thread): ``python bench/windowing.py [tuples] [--only NAME]`` (with
tupletree installed, or ``PYTHONPATH=src``).

Each topology is a spout emitting ``tuples`` tracked one-field tuples into one bolt
task (and the acker): ``plain`` a Bolt that sums and acks each input; ``quiet`` a
WindowedBolt with Count(100) sliding Count(10) that sums each window and emits
nothing (the window's own cost: queue, scans, acks on expiry); ``sliding`` the same
emitting each sum, anchored to the window's 100 tuples, to a sink that acks it (what
Storm's anchoring costs: each input is in 10 windows, so in 10 emitted tuples' trees,
each acked by the sink with one acker message per input tuple); ``tumbling``
Count(100), emitting;
``event`` a Duration(1000)
sliding Duration(100) window in event time (the timestamps one ms apart, the
watermark every 10 ms of the real clock). Printed: microseconds per input tuple for
the whole topology (spout, bolt, acker), and the windowed bolts' difference from
``plain``. ``bench/instructions_windowing.sh`` counts instructions instead (callgrind).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tupletree import Bolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.runtime.clock import RealClock
from tupletree.runtime.worker import Worker
from tupletree.windowing import Count, Duration, WindowedBolt


class Numbers(Spout):
    outputs = ["n", "ts"]

    def __init__(self, total: int) -> None:
        self.total = total

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.n = 0

    def next_tuple(self) -> None:
        n = self.n
        if n < self.total:
            self.n = n + 1
            self.emit([n, n], n)

    def fail(self, msg_id: Any) -> None:
        raise RuntimeError(f"benchmark tuple {msg_id} failed")


class Plain(Bolt):
    outputs = ["sum"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.sum = 0

    def execute(self, tup: Any) -> None:
        self.sum += tup.values[0]
        self.collector.ack(tup)


class Sink(Bolt):
    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.ack = collector.ack

    def execute(self, tup: Any) -> None:
        self.ack(tup)


class Sum(WindowedBolt):
    outputs = ["sum"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        self.collector.emit([sum(t.values[0] for t in window.get())])


class Quiet(WindowedBolt):
    """Sums each window and emits nothing: the window machinery alone."""

    outputs = ["sum"]

    def execute(self, window: Any) -> None:
        self.total = sum(t.values[0] for t in window.get())


def bolts() -> dict[str, Any]:
    return {
        "plain": Plain,
        "quiet": lambda: Quiet().with_window(Count(100), Count(10)),
        "sliding": lambda: Sum().with_window(Count(100), Count(10)),
        "tumbling": lambda: Sum().with_tumbling_window(Count(100)),
        "event": lambda: (
            Sum()
            .with_window(Duration(1000), Duration(100))
            .with_timestamp_field("ts")
            .with_watermark_interval(Duration(10))
        ),
    }


def run(name: str, total: int) -> float:
    """Microseconds per tuple for ``total`` tuples through topology ``name``."""
    b = TopologyBuilder()
    b.set_spout("src", Numbers(total))
    b.set_bolt("bolt", bolts()[name]()).shuffle_grouping("src")
    # A sink downstream, so the windows' anchored emits do their anchoring.
    b.set_bolt("sink", Sink()).shuffle_grouping("bolt")
    conf = validate({Config.TOPOLOGY_ACKER_EXECUTORS: 1, Config.TOPOLOGY_MAX_SPOUT_PENDING: 5000})
    worker = Worker("bench", b.create_topology(), conf, RealClock().now)
    worker.start()
    spout = worker.spouts[0]
    start = time.perf_counter()
    idle = 0
    while idle < 3:  # a windowed bolt keeps its last window's tuples: run until quiet
        idle = 0 if worker.step(worker.now()) else idle + 1
        if spout.spout.n >= total and not worker.step(worker.now()):
            break
    elapsed = time.perf_counter() - start
    return elapsed / total * 1e6


def main() -> None:
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i : i + 2]
    total = int(args[0]) if args else 200_000
    names = [only] if only else list(bolts())
    results = {}
    for name in names:
        results[name] = run(name, total)
        extra = ""
        if name != "plain" and "plain" in results:
            extra = f"  ({results[name] - results['plain']:+.2f} us beside plain)"
        print(f"{name:9s} {results[name]:6.2f} us/tuple{extra}")


if __name__ == "__main__":
    main()
