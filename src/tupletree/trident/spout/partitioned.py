"""IPartitionedTridentSpout under the coordinator (Storm's PartitionedTridentSpoutExecutor):
transactional, so a txid's batch never changes.

Coordinator: the txid's metadata is the partition list (``get_partitions_for_batch``)
the first time; a replay keeps the stored one (the coordinator stores it under the
txid before the batch starts). Emitter, per task (its partitions:
``get_partitions_for_task``): if none of its partitions has metadata stored under the
txid, it is a new batch: ``emit_batch_new`` from each partition's metadata of the
txid before, and the returned metadata is stored under this txid (progress.py) before
the batch can complete; a partition it returned none for is stored as None (nothing
emitted from it), and so is one for which a later txid was emitted new already (this
txid failed before storing anything, and the later one read on from the metadata before
it: Storm's rule, or those records would count twice). Otherwise a replay:
``re_emit_partition_batch`` per partition from the stored metadata, none for a None.
A partition whose re-emit fails cannot be skipped (its batch would change): the batch
fails, the spout is marked stuck at that partition (StuckBatchError), and every later
attempt fails the same way until it can be read.
On success of txid t, metadata below t is dropped, but for the newest that is not None
(t + 1 starts from it).
"""

from __future__ import annotations

from typing import Any

from tupletree.store.codec import loads_json
from tupletree.trident.progress import encode
from tupletree.trident.spout.adapt import fields_of
from tupletree.trident.spout.interfaces import SpoutType, StuckBatchError, partition_id


def as_stored(meta: Any, what: str) -> Any:
    """``meta`` as it reads back from the store (JSON: tuples become lists...), so the
    spout sees the same shape on a first emit and on a replay."""
    return loads_json(encode(meta, what))


def newest_at_or_below(metas: dict[int, Any], txid: int) -> int | None:
    """The newest txid at or below ``txid`` whose metadata is not None (None: a batch
    that emitted nothing from the partition)."""
    found = [t for t, meta in metas.items() if t <= txid and meta is not None]
    return max(found) if found else None


def last_meta(metas: dict[int, Any], txid: int) -> Any:
    """The metadata a new batch ``txid`` reads on from: the newest before it that is
    not None (None if there is none: from the partition's start)."""
    t = newest_at_or_below(metas, txid - 1)
    return None if t is None else metas[t]


class PartitionedExecutor:
    spout_type = SpoutType.TRANSACTIONAL

    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def output_fields(self) -> list[str]:
        return fields_of(self.spout, "partitioned spout")

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _Coordinator(self.spout.get_coordinator(conf, context))

    def make_emitter(self, tx_id: str, conf: dict[str, Any], context: Any, progress: Any) -> Any:
        return _Emitter(tx_id, self.spout.get_emitter(conf, context), context, progress)


class _Coordinator:
    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        if curr_metadata is not None:
            return curr_metadata
        return self.coordinator.get_partitions_for_batch()

    def success(self, txid: int) -> None:
        pass

    def is_ready(self, txid: int) -> bool:
        return bool(self.coordinator.is_ready(txid))

    def close(self) -> None:
        self.coordinator.close()


class PartitionTable:
    """This task's partitions, refreshed when the coordinator's metadata changes."""

    def __init__(self, emitter: Any, context: Any) -> None:
        self.emitter = emitter
        self.index = context.this_task_index
        self.tasks = len(context.this_component_tasks())
        self.saved: Any = None
        self.refreshed = False
        self.by_id: dict[str, Any] = {}

    def refresh(self, coordinator_meta: Any) -> None:
        if self.refreshed and self.saved == coordinator_meta:
            return
        ordered = self.emitter.get_ordered_partitions(coordinator_meta)
        mine = self.emitter.get_partitions_for_task(self.index, self.tasks, ordered)
        self.by_id = {partition_id(p): p for p in mine}
        self.emitter.refresh_partitions(list(mine))
        self.saved = coordinator_meta
        self.refreshed = True


class _Emitter:
    def __init__(self, tx_id: str, emitter: Any, context: Any, progress: Any) -> None:
        self.tx_id = tx_id
        self.emitter = emitter
        self.progress = progress
        self.partitions = PartitionTable(emitter, context)

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        table = self.partitions
        table.refresh(coordinator_meta)
        txid = tx.transaction_id
        stored = self.progress.partition_metas(self.tx_id, table.by_id)
        if not any(txid in metas for metas in stored.values()):
            previous = {}
            for pid, p in table.by_id.items():
                metas = stored[pid]
                if any(t > txid for t in metas):
                    # A later txid was emitted new while this one had stored nothing
                    # (it failed first): that one read on from the metadata before
                    # this, so what this one would read is that one's batch. Empty
                    # here, for good (Storm's rule), or those records count twice.
                    continue
                previous[p] = last_meta(metas, txid)
            new = {}
            if previous:
                new = self.emitter.emit_batch_new(tx, collector, set(previous), previous)
            # Every partition gets an entry (None: nothing emitted from it), so that a
            # replay is known as one and emits the same: nothing where this emitted
            # nothing, rather than a new batch of other records.
            metas = dict.fromkeys(table.by_id)
            for p, meta in (new or {}).items():
                pid = partition_id(p)
                metas[pid] = as_stored(meta, f"spout {self.tx_id!r} partition {pid}")
            self.progress.put_partition_metas(self.tx_id, txid, metas)
            return
        for pid, p in table.by_id.items():
            meta = stored[pid].get(txid)
            if meta is None:
                continue  # nothing was emitted from this partition in this txid
            try:
                self.emitter.re_emit_partition_batch(tx, collector, p, meta)
            except Exception as exc:
                if getattr(collector, "error", None) is not None:
                    raise  # an operation downstream failed, not the spout
                raise StuckBatchError(
                    f"spout {self.tx_id!r} cannot re-emit txid {txid} of partition {pid} "
                    f"({type(exc).__name__}: {exc}); a transactional spout must replay the "
                    "same batch, so the topology waits until the partition can be read",
                    txid=txid,
                    partition=pid,
                ) from exc

    def success(self, tx: Any) -> None:
        txid = tx.transaction_id
        stored = self.progress.partition_metas(self.tx_id, self.partitions.by_id)
        old = []
        for pid, metas in stored.items():
            # The newest metadata at or below txid stays: the next new batch reads on
            # from it (txid's own may be None: nothing came from the partition then).
            keep = newest_at_or_below(metas, txid)
            old += [(pid, t) for t in metas if t < txid and t != keep]
        self.progress.drop_partition_metas(self.tx_id, old)

    def close(self) -> None:
        self.emitter.close()
