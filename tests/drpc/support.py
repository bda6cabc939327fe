"""Bolts shared by the DRPC tests (module level, so every task's pickled copy finds
its class), and a journal that those copies can write to."""

from __future__ import annotations

from typing import Any

from tupletree import BasicBolt, Bolt, FailedException
from tupletree.drpc import DRPCServer, FinishedCallback, TimeoutCallback

from ..registry import entries as entries  # re-exported for the DRPC tests
from ..registry import record


def remote_conf(server: DRPCServer, **extra: Any) -> dict[str, Any]:
    """Topology config pointing a remote DRPC topology at ``server``."""
    return {"drpc.servers": [server.host], "drpc.http.port": server.port, **extra}


class ExclamationBolt(BasicBolt):
    """Storm's exclamation-bolt for the raw flow: [args, return-info] -> [args!!!, info]."""

    outputs = ["result", "return-info"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0] + "!!!", tup[1]])


class ExclamationDRPC(BasicBolt):
    """Storm's exclamation-bolt-drpc: [request, args] -> [request, args!!!]."""

    outputs = ["request", "result"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], tup[1] + "!!!"])


class CreateTuples(Bolt):
    """Storm's create-tuples: for argument N, N*N tuples [request] (anchored)."""

    outputs = ["request"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        n = int(tup[1])
        for _ in range(n * n):
            self.collector.emit([tup[0]], tup)
        self.collector.ack(tup)


class PartialCount(Bolt, FinishedCallback):
    """Storm's partial-count: counts its tuples per request, emits the count when done."""

    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


class BasicPartialCount(BasicBolt, FinishedCallback):
    """PartialCount as a BasicBolt: its finished_id gets an (unanchored) collector."""

    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1

    def finished_id(self, request_id: Any, collector: Any = None) -> None:
        collector.emit([request_id, self.counts.pop(request_id, 0)])


class CountAggregator(Bolt, FinishedCallback):
    """Storm's count-aggregator: sums partial counts per request, emits when done."""

    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}

    def execute(self, tup: Any) -> None:
        self.counts[tup[0]] = self.counts.get(tup[0], 0) + tup[1]
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


class IdBolt(Bolt):
    """Storm's id-bolt: passes every tuple on unchanged (anchored)."""

    outputs = ["request", "val"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.emit(list(tup.values), tup)
        self.collector.ack(tup)


class EmitFinish(Bolt, FinishedCallback):
    """Storm's emit-finish: acks everything, emits [request, "done"] when finished."""

    outputs = ["request", "result"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, "done"])


class FailFinish(Bolt, FinishedCallback):
    """Storm's fail-finish-bolt: finished_id raises FailedException."""

    outputs = ["request", "result"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        raise FailedException(f"cannot finish {request_id}")


class NeverFinish(Bolt):
    """Holds every tuple without acking it: its requests never complete."""

    outputs = ["request", "result"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.held.append(tup)


class FailOn(BasicBolt):
    """Passes [request, args] on, but fails the tuple when args == "fail"."""

    outputs = ["request", "args"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1] == "fail":
            raise FailedException("asked to fail")
        collector.emit([tup[0], tup[1]])


class ExitOn(BasicBolt):
    """Passes [request, args] on, but calls sys.exit when args == "exit" (a user's
    SystemExit, which is not an Exception)."""

    outputs = ["request", "args"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1] == "exit":
            raise SystemExit(3)
        collector.emit([tup[0], tup[1]])


class Reverse(BasicBolt):
    """[request, args] -> [request, reversed args]."""

    outputs = ["request", "result"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0], tup[1][::-1]])


class TimeoutRecorder(Bolt, TimeoutCallback):
    """Acks its input, never finishes (no count reports reach it in the test) and
    records ``timeout_id`` calls in the journal named by ``key``."""

    outputs = ["request", "result"]

    def __init__(self, key: str) -> None:
        self.key = key

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        self.collector.ack(tup)

    def timeout_id(self, request_id: Any) -> None:
        record(self.key, request_id)


class CountOnTick(Bolt, FinishedCallback):
    """Holds its tuples and counts and acks them only at the next tick tuple, so the
    count report from upstream arrives before the tuples are acked."""

    outputs = ["request", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        if not tup.is_tick():
            self.held.append(tup)
            return
        for held in self.held:
            self.counts[held[0]] = self.counts.get(held[0], 0) + 1
            self.collector.ack(held)
        self.held.clear()
        self.collector.ack(tup)

    def finished_id(self, request_id: Any) -> None:
        self.collector.emit([request_id, self.counts.pop(request_id, 0)])


class RaiseOn(BasicBolt):
    """[request, args] -> [request, args], but raises for some args: "bad..." a
    ValueError naming them, "long" a RuntimeError of 100,000 characters."""

    outputs = ["request", "result"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[1].startswith("bad"):
            raise ValueError(f"cannot take {tup[1]!r}")
        if tup[1] == "long":
            raise RuntimeError("y" * 100_000)
        collector.emit([tup[0], tup[1]])
