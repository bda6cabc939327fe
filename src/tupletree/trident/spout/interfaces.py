"""The interfaces of Trident's spouts, as Storm's (trident/spout/*.java) in snake_case.

Which kind a spout is decides what exactly-once needs of the state (Storm's matrix,
docs/trident.md), so each says it in ``spout_type``:

- TRANSACTIONAL: a txid's batch is always the same tuples (a replay brings exactly them),
  batches do not overlap and skip nothing. ``IPartitionedTridentSpout``: Trident stores
  each partition's batch metadata under the txid the first time and replays from it.
- OPAQUE: every tuple is processed successfully in exactly one batch, but a replayed
  txid may bring other tuples (a partition that cannot be read is skipped and read in
  a later batch). ``IOpaquePartitionedTridentSpout``: a (re-)emit of txid t starts where
  batch t - 1 ended; the metadata is stored when t commits.
- NON_TRANSACTIONAL: nothing promised (a plain Spout under Trident, an IBatchSpout that
  does not say otherwise): at-least-once at best.

Lifecycles (who calls what, where):
- ``IBatchSpout``: in the spout's bolt tasks, ``open(conf, context)``, then per attempt
  ``emit_batch(batch_id, collector)`` (batch_id: the txid, the same for a replay),
  ``ack(batch_id)`` once the txid committed, ``close()``.
- ``ITridentSpout``: ``get_coordinator(tx_id, conf, context)`` in the coordinator
  (``initialize_transaction(txid, prev_metadata, curr_metadata)`` -> this txid's
  metadata, handed to every emitter; ``is_ready(txid)``; ``success(txid)``; ``close``),
  ``get_emitter(tx_id, conf, context)`` in each spout task (``emit_batch(tx,
  coordinator_meta, collector)``, ``success(tx)``, ``close``; a committer spout's
  emitter also ``commit(tx)`` in the commit phase).
- Partitioned: ``get_coordinator(conf, context)`` (``get_partitions_for_batch()``,
  ``is_ready(txid)``, ``close``) and ``get_emitter(conf, context)``
  (``get_ordered_partitions(all_partition_info)``, ``get_partitions_for_task(index,
  num_tasks, ordered)``, ``refresh_partitions(mine)``, ``emit_batch_new(tx, collector,
  partitions, last_partition_meta)`` -> {partition: meta}, and for transactional ones
  ``re_emit_partition_batch(tx, collector, partition, meta)``; ``close``).
  A partition is anything hashable; its id is ``get_id()`` if it has one, else
  ``str(partition)``. Metadata must be plain JSON data (it is stored as JSON). A
  partition ``emit_batch_new`` returns no metadata for (or None) must have emitted
  nothing: a replay of the txid emits nothing from it, and the next new batch reads on
  from its last metadata. ``last_partition_meta`` holds only the partitions to read
  now: one that a later txid already read on from is left out (partitioned.py says
  why).

An exception from a spout's method fails the batch (replayed later); from
``re_emit_partition_batch`` it also marks the spout stuck at that partition (the web
view shows where): a transactional spout cannot skip a partition it cannot read.
"""

from __future__ import annotations

import enum
from typing import Any


class SpoutType(enum.Enum):
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"
    NON_TRANSACTIONAL = "non-transactional"


class ISpoutPartition:
    def get_id(self) -> str:
        raise NotImplementedError


def partition_id(partition: Any) -> str:
    get_id = getattr(partition, "get_id", None)
    return str(get_id()) if callable(get_id) else str(partition)


class IBatchSpout:
    spout_type = SpoutType.NON_TRANSACTIONAL

    def open(self, conf: dict[str, Any], context: Any) -> None:
        pass

    def emit_batch(self, batch_id: int, collector: Any) -> None:
        raise NotImplementedError

    def ack(self, batch_id: int) -> None:
        pass

    def close(self) -> None:
        pass

    def get_output_fields(self) -> Any:
        raise NotImplementedError

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None


class BatchCoordinator:
    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        return None

    def success(self, txid: int) -> None:
        pass

    def is_ready(self, txid: int) -> bool:
        return True

    def close(self) -> None:
        pass


class Emitter:
    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        raise NotImplementedError

    def success(self, tx: Any) -> None:
        pass

    def close(self) -> None:
        pass


class ITridentSpout:
    spout_type = SpoutType.NON_TRANSACTIONAL

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_emitter(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_output_fields(self) -> Any:
        raise NotImplementedError

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None


class ICommitterTridentSpout(ITridentSpout):
    """An ITridentSpout whose emitter also has ``commit(tx)``, called in the commit
    phase of each batch (before the txid counts as committed)."""


class PartitionedCoordinator:
    def get_partitions_for_batch(self) -> Any:
        raise NotImplementedError

    def is_ready(self, txid: int) -> bool:
        return True

    def close(self) -> None:
        pass


class PartitionedEmitter:
    def get_ordered_partitions(self, all_partition_info: Any) -> list[Any]:
        raise NotImplementedError

    def get_partitions_for_task(
        self, task_index: int, num_tasks: int, ordered: list[Any]
    ) -> list[Any]:
        """Storm's default: task i takes partitions i, i + num_tasks, ..."""
        return list(ordered[task_index::num_tasks])

    def refresh_partitions(self, partition_responsibilities: list[Any]) -> None:
        pass

    def emit_batch_new(
        self, tx: Any, collector: Any, partitions: set[Any], last_partition_meta: dict[Any, Any]
    ) -> dict[Any, Any]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class TransactionalPartitionedEmitter(PartitionedEmitter):
    def re_emit_partition_batch(
        self, tx: Any, collector: Any, partition: Any, partition_meta: Any
    ) -> None:
        raise NotImplementedError


class IPartitionedTridentSpout:
    """Transactional: a txid's batch per partition never changes."""

    spout_type = SpoutType.TRANSACTIONAL

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_output_fields(self) -> Any:
        raise NotImplementedError

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None


class IOpaquePartitionedTridentSpout:
    """Opaque: a re-emit of txid t starts where batch t - 1 ended."""

    spout_type = SpoutType.OPAQUE

    def get_coordinator(self, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_emitter(self, conf: dict[str, Any], context: Any) -> Any:
        raise NotImplementedError

    def get_output_fields(self) -> Any:
        raise NotImplementedError

    def get_component_configuration(self) -> dict[str, Any] | None:
        return None


class StuckBatchError(RuntimeError):
    """A transactional spout could not re-emit ``txid``'s batch of ``partition``: the
    batch fails and is tried again, and the topology cannot go past it until the
    partition can be read (a transactional spout must never change a batch)."""

    def __init__(self, message: str, *, txid: int, partition: str) -> None:
        super().__init__(message)
        self.txid = txid
        self.partition = partition
