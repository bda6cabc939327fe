"""IBatchSpout under the coordinator (Storm's BatchSpoutExecutor): every spout task
opens the spout and emits a batch per attempt, ``emit_batch(txid, collector)`` (a
replay gets the same txid: the spout decides whether it brings the same tuples, and
says so in ``spout_type``), and hears ``ack(txid)`` once the txid committed."""

from __future__ import annotations

from typing import Any

from tupletree.trident.spout.adapt import fields_of
from tupletree.trident.spout.interfaces import BatchCoordinator, SpoutType


class BatchSpoutExecutor:
    def __init__(self, spout: Any) -> None:
        self.spout = spout
        self.spout_type = getattr(spout, "spout_type", SpoutType.NON_TRANSACTIONAL)

    def output_fields(self) -> list[str]:
        return fields_of(self.spout, "batch spout")

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return BatchCoordinator()

    def make_emitter(self, tx_id: str, conf: dict[str, Any], context: Any, progress: Any) -> Any:
        self.spout.open(conf, context)
        return _Emitter(self.spout)


class _Emitter:
    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        self.spout.emit_batch(tx.transaction_id, collector)

    def success(self, tx: Any) -> None:
        self.spout.ack(tx.transaction_id)

    def close(self) -> None:
        self.spout.close()
