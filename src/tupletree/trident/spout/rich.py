"""A plain Spout under the coordinator (Storm's RichSpoutBatchExecutor): non-transactional.

Each spout task opens the spout with a collector of its own; a batch is whatever
``next_tuple`` emits in up to ``topology.spout.max.batch.size`` calls (it stops at the
first call that emits nothing). The message ids of a batch's tuples are kept by txid:
when the txid commits (``success``), they are acked; when the txid is emitted again (a
replay), the earlier attempt's ids are failed first, so the spout replays them as it
would anyway: at-least-once. Only the default stream is read. Memory: the ids of the
uncommitted batches, at most ``MAX_BATCHES`` of them (the oldest are failed beyond).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tupletree.config import Config
from tupletree.topology.components import DEFAULT_STREAM, declared_streams
from tupletree.trident.spout.interfaces import BatchCoordinator, SpoutType

MAX_BATCHES = 1024


class RichSpoutBatchExecutor:
    spout_type = SpoutType.NON_TRANSACTIONAL

    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def output_fields(self) -> list[str]:
        streams = declared_streams(type(self.spout).__name__, self.spout)
        if DEFAULT_STREAM not in streams:
            raise TypeError(
                f"spout {type(self.spout).__name__} declares no default stream; Trident reads "
                "a plain spout's default stream"
            )
        return streams[DEFAULT_STREAM].fields.to_list()

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return BatchCoordinator()

    def make_emitter(self, tx_id: str, conf: dict[str, Any], context: Any, progress: Any) -> Any:
        return _Emitter(self.spout, conf, context)


class _CapturingCollector:
    """The inner spout's collector: emits go into the current batch."""

    def __init__(self) -> None:
        self.target: Any = None
        self.ids: list[Any] = []
        self.emitted = 0

    def emit(self, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        if stream != DEFAULT_STREAM:
            return []
        if msg_id is not None:
            self.ids.append(msg_id)  # first: the spout must hear of it if emit raises
        self.emitted += 1
        self.target.emit(values)
        return []

    def emit_direct(
        self, task: int, values: Any, msg_id: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        return self.emit(values, msg_id, stream)

    def report_error(self, exc: BaseException) -> None:
        self.target.report_error(exc)


class _Emitter:
    def __init__(self, spout: Any, conf: dict[str, Any], context: Any) -> None:
        self.spout = spout
        self.max_batch = int(conf.get(Config.TOPOLOGY_SPOUT_MAX_BATCH_SIZE) or 1000)
        self.collector = _CapturingCollector()
        self.batches: OrderedDict[int, list[Any]] = OrderedDict()
        spout.open(conf, context, self.collector)
        spout.activate()

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        txid = tx.transaction_id
        if txid in self.batches:
            self._fail(self.batches.pop(txid))
        c = self.collector
        c.target, c.ids = collector, []
        try:
            for _ in range(self.max_batch):
                before = c.emitted
                self.spout.next_tuple()
                if c.emitted == before:
                    break
        finally:
            # Kept even when an operation downstream (or the spout) raised: the failed
            # batch is emitted again, failing these first, so the spout replays them.
            self.batches[txid] = c.ids
            while len(self.batches) > MAX_BATCHES:
                self._fail(self.batches.popitem(last=False)[1])

    def _fail(self, ids: list[Any]) -> None:
        for msg_id in ids:
            self.spout.fail(msg_id)

    def success(self, tx: Any) -> None:
        for msg_id in self.batches.pop(tx.transaction_id, []):
            self.spout.ack(msg_id)

    def close(self) -> None:
        self.spout.deactivate()
        self.spout.close()
