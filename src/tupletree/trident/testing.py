"""Spouts for tests (Storm's trident/testing): FixedBatchSpout and FeederBatchSpout."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from tupletree.topology.fields import Fields
from tupletree.trident.spout.interfaces import IBatchSpout, SpoutType
from tupletree.trident.stream import as_fields


def _rows(values: Any) -> list[list[Any]]:
    return [list(v) if isinstance(v, list | tuple) else [v] for v in values]


class FixedBatchSpout(IBatchSpout):
    """Emits ``outputs`` in batches of up to ``max_batch_size``, in order; with
    ``set_cycle(True)`` it starts over at the end, else it then emits empty batches.
    A replayed txid gets the very same batch (each batch is kept until its txid
    commits), so it is transactional within one process (a task restarted elsewhere
    starts over: use it for tests, not for recovery). Each value is one tuple: a list
    or tuple of the fields' values, or the one value of a one-field spout.
    """

    spout_type = SpoutType.TRANSACTIONAL

    def __init__(self, fields: Any, max_batch_size: int, *outputs: Any) -> None:
        self.fields = Fields(as_fields(fields, "FixedBatchSpout's fields"))
        if (
            isinstance(max_batch_size, bool)
            or not isinstance(max_batch_size, int)
            or max_batch_size < 1
        ):
            raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
        if (
            len(outputs) == 1
            and isinstance(outputs[0], list)
            and not (
                len(self.fields) > 1 and outputs[0] and not isinstance(outputs[0][0], list | tuple)
            )
        ):
            outputs = tuple(outputs[0])  # FixedBatchSpout(fields, 3, [v1, v2, ...])
        self.outputs = _rows(outputs)
        for row in self.outputs:
            if len(row) != len(self.fields):
                raise ValueError(
                    f"FixedBatchSpout: {row!r} has {len(row)} values for the fields "
                    f"{self.fields.to_list()}"
                )
        self.max_batch_size = max_batch_size
        self.cycle = False

    def set_cycle(self, cycle: bool) -> None:
        self.cycle = bool(cycle)

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.index = 0
        self.batches: dict[int, list[list[Any]]] = {}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        batch = self.batches.get(batch_id)
        if batch is None:
            batch = []
            if self.index >= len(self.outputs) and self.cycle:
                self.index = 0
            end = min(self.index + self.max_batch_size, len(self.outputs))
            batch = [list(r) for r in self.outputs[self.index : end]]
            self.index = end
            self.batches[batch_id] = batch
        for row in batch:
            collector.emit(list(row))

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)

    def get_output_fields(self) -> Fields:
        return self.fields

    def get_component_configuration(self) -> dict[str, Any]:
        return {"topology.max.task.parallelism": 1}  # each task would emit every batch


class FeederBatchSpout(IBatchSpout):
    """Batches fed from the test's thread: ``feed(rows)`` queues one batch (a list of
    value lists), emitted by the next txid; a replayed txid gets the same batch. With
    nothing queued, batches are empty. One task only (it lives in one process)."""

    spout_type = SpoutType.TRANSACTIONAL
    _queues: dict[str, deque[list[list[Any]]]] = {}
    _lock = threading.Lock()

    def __init__(self, fields: Any) -> None:
        import uuid

        self.fields = Fields(as_fields(fields, "FeederBatchSpout's fields"))
        self.key = uuid.uuid4().hex
        with self._lock:
            self._queues[self.key] = deque()

    def feed(self, rows: Any) -> None:
        with self._lock:
            self._queues[self.key].append(_rows(rows))

    def open(self, conf: dict[str, Any], context: Any) -> None:
        self.batches: dict[int, list[list[Any]]] = {}

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        batch = self.batches.get(batch_id)
        if batch is None:
            with self._lock:
                q = self._queues.get(self.key)
                batch = q.popleft() if q else []
            self.batches[batch_id] = batch
        for row in batch:
            collector.emit(list(row))

    def ack(self, batch_id: int) -> None:
        self.batches.pop(batch_id, None)

    def get_output_fields(self) -> Fields:
        return self.fields

    def get_component_configuration(self) -> dict[str, Any]:
        return {"topology.max.task.parallelism": 1}
