"""IOpaquePartitionedTridentSpout under the coordinator (Storm's
OpaquePartitionedTridentSpoutExecutor): opaque, so a replayed txid may bring other
tuples, but every tuple succeeds in exactly one batch.

Coordinator: the partition list, fresh for every attempt. Emitter, per task: a
(re-)emit of txid t starts, per partition, where the batch before it ended: the
metadata this task emitted for the closest earlier uncommitted txid (kept in memory),
else the last committed one (the store). The new metadata is kept in memory and
becomes durable when t commits (this emitter is a committer: ``commit(tx)`` runs in
the commit phase). A partition the spout cannot read may be skipped (return its
metadata unchanged): its tuples come in a later batch. Memory: the metadata of the
uncommitted txids this task emitted (at most the active batches), dropped on commit.

When the partition list changes while batches are in flight, a partition may move from
one task to another (``ordered[index::tasks]``). Its new task cannot see where the old
one's uncommitted batches left it, so it fails its batches until every earlier txid
committed, then reads on from the stored metadata: without that wait it read again
what the old task's uncommitted batch had read, and those tuples succeeded twice.
"""

from __future__ import annotations

from typing import Any

from tupletree.errors import FailedException
from tupletree.trident.spout.adapt import fields_of
from tupletree.trident.spout.interfaces import SpoutType, partition_id
from tupletree.trident.spout.partitioned import PartitionTable, as_stored

MAX_CACHED_TXIDS = 1024


class OpaquePartitionedExecutor:
    spout_type = SpoutType.OPAQUE

    def __init__(self, spout: Any) -> None:
        self.spout = spout

    def output_fields(self) -> list[str]:
        return fields_of(self.spout, "opaque partitioned spout")

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _Coordinator(self.spout.get_coordinator(conf, context))

    def make_emitter(self, tx_id: str, conf: dict[str, Any], context: Any, progress: Any) -> Any:
        return _Emitter(tx_id, self.spout.get_emitter(conf, context), context, progress)


class _Coordinator:
    def __init__(self, coordinator: Any) -> None:
        self.coordinator = coordinator

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        return self.coordinator.get_partitions_for_batch()

    def success(self, txid: int) -> None:
        pass

    def is_ready(self, txid: int) -> bool:
        return bool(self.coordinator.is_ready(txid))

    def close(self) -> None:
        self.coordinator.close()


class _Emitter:
    def __init__(self, tx_id: str, emitter: Any, context: Any, progress: Any) -> None:
        self.tx_id = tx_id
        self.emitter = emitter
        self.progress = progress
        self.partitions = PartitionTable(emitter, context)
        self.cached: dict[int, dict[str, Any]] = {}  # uncommitted txid -> pid -> meta
        # Partitions dealt to this task from another one while both ran (the partition
        # list changed): that task may have read them on in a txid not committed yet,
        # whose metadata only it holds.
        self.gained: set[str] = set()

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        table = self.partitions
        before = set(table.by_id) if table.refreshed else None
        table.refresh(coordinator_meta)
        txid = tx.transaction_id
        if before is not None:
            self.gained |= table.by_id.keys() - before
        self.gained &= table.by_id.keys()
        if self.gained:
            # Read from where the txid before this one left them, which is stored once
            # every earlier txid committed; until then the batch fails and is replayed.
            if self.progress.first_uncommitted(self.tx_id) < txid:
                raise FailedException(
                    f"spout {self.tx_id!r}: partitions {sorted(self.gained)} came to this "
                    f"task while txids before {txid} are not committed; txid {txid} is "
                    "replayed once they are"
                )
            self.gained.clear()
        earlier = [t for t in self.cached if t < txid]
        prev_cached = self.cached[max(earlier)] if earlier else {}
        stored = None
        previous: dict[Any, Any] = {}
        for pid, p in table.by_id.items():
            if pid in prev_cached:
                previous[p] = prev_cached[pid]
                continue
            if stored is None:
                stored = self.progress.partition_metas(self.tx_id, table.by_id)
            below = [t for t in stored[pid] if t < txid]
            previous[p] = stored[pid][max(below)] if below else None
        new = self.emitter.emit_batch_new(tx, collector, set(table.by_id.values()), previous)
        metas = {}
        for p, meta in (new or {}).items():
            pid = partition_id(p)
            metas[pid] = as_stored(meta, f"spout {self.tx_id!r} partition {pid}")
        for t in [t for t in self.cached if t >= txid]:
            del self.cached[t]  # later txids are replayed after this one
        self.cached[txid] = metas
        while len(self.cached) > MAX_CACHED_TXIDS:
            del self.cached[min(self.cached)]

    def commit(self, tx: Any) -> None:
        txid = tx.transaction_id
        metas = self.cached.get(txid)
        if metas is None:
            raise FailedException(
                f"spout {self.tx_id!r}: commit of txid {txid}, which this task did not emit "
                "(restarted since?); the batch is replayed"
            )
        self.progress.put_partition_metas(self.tx_id, txid, metas)
        for t in [t for t in self.cached if t <= txid]:
            del self.cached[t]

    def success(self, tx: Any) -> None:
        txid = tx.transaction_id
        stored = self.progress.partition_metas(self.tx_id, self.partitions.by_id)
        old = [(pid, t) for pid, metas in stored.items() for t in metas if t < txid]
        self.progress.drop_partition_metas(self.tx_id, old)

    def close(self) -> None:
        self.emitter.close()
