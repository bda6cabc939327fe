"""TridentDRPCSpout: a DRPC function's requests as batches of one (Storm's
RichSpoutBatchTriggerer around its DRPCSpout).

Each request the DRPC spout (tupletree.drpc) takes becomes a batch of its own, id
``DRPCBatch(random id, 0, return info)``: its one tuple ``[batch, args]`` goes out
unanchored, then every task of the bolts subscribed to it gets a report of how many of
the batch's tuples it was sent (1 or 0), each report a tracked tree of its own. When
every report's tree completed, the request is done (its answer went out from the end of
the stream: processors.ReturnResults) and the DRPC spout hears ``ack``; when one fails
or times out, ``fail``, and the caller gets the error at once.

Bounds: one entry per request in flight (its trees), failed with them on timeout.
"""

from __future__ import annotations

import random
from typing import Any

from tupletree.drpc.spout import DRPCSpout
from tupletree.topology.components import Spout
from tupletree.trident.attempt import DRPCBatch
from tupletree.trident.bolt import BATCH_FIELD, coord_stream


class _Capture:
    def __init__(self) -> None:
        self.got: list[tuple[list[Any], Any]] = []

    def emit(self, values: Any, msg_id: Any = None, stream: str = "default") -> list[int]:
        self.got.append((list(values), msg_id))
        return []

    def report_error(self, exc: BaseException) -> None:
        self.outer.report_error(exc)


class TridentDRPCSpout(Spout):
    def __init__(self, function: str, drpc: Any, stream: str, group: str) -> None:
        self.inner = DRPCSpout(function, drpc)
        self.stream = stream
        self.group = group

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(self.stream, [BATCH_FIELD, "args"])
        declarer.declare_stream(coord_stream(self.group), [BATCH_FIELD, "count"], direct=True)

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.capture = _Capture()
        self.capture.outer = collector
        self.inner.open(conf, context, self.capture)
        stream = coord_stream(self.group)
        self.out_tasks = sorted(
            task
            for component in context.targets(stream)
            for task in context.component_tasks(component)
        )
        self.rng = random.Random()
        self.pending: dict[int, list[Any]] = {}  # request batch -> [inner msg id, trees left]

    def next_tuple(self) -> None:
        self.inner.next_tuple()
        got, self.capture.got = self.capture.got, []
        for (args, return_info), msg_id in got:
            request = self.rng.getrandbits(62) or 1
            batch = DRPCBatch(request, 0, return_info)
            sent = set(self.collector.emit([batch, args], None, self.stream))
            self.pending[request] = [msg_id, len(self.out_tasks)]
            for task in self.out_tasks:
                count = 1 if task in sent else 0
                self.collector.emit_direct(
                    task, [batch, count], (request, task), coord_stream(self.group)
                )

    def ack(self, msg_id: Any) -> None:
        entry = self.pending.get(msg_id[0])
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self.pending[msg_id[0]]
            self.inner.ack(entry[0])

    def fail(self, msg_id: Any) -> None:
        entry = self.pending.pop(msg_id[0], None)
        if entry is not None:
            self.inner.fail(entry[0])

    def activate(self) -> None:
        self.inner.activate()

    def deactivate(self) -> None:
        self.inner.deactivate()

    def close(self) -> None:
        self.inner.close()
