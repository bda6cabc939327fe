"""Trident's spouts: the interfaces (interfaces.py) and how each kind runs under the
master batch coordinator (batch_executor, partitioned, opaque, rich; adapt picks)."""

from tupletree.trident.spout.interfaces import (
    BatchCoordinator,
    Emitter,
    IBatchSpout,
    ICommitterTridentSpout,
    IOpaquePartitionedTridentSpout,
    IPartitionedTridentSpout,
    ISpoutPartition,
    ITridentSpout,
    PartitionedCoordinator,
    PartitionedEmitter,
    SpoutType,
    StuckBatchError,
    TransactionalPartitionedEmitter,
    partition_id,
)

__all__ = [
    "BatchCoordinator",
    "Emitter",
    "IBatchSpout",
    "ICommitterTridentSpout",
    "IOpaquePartitionedTridentSpout",
    "IPartitionedTridentSpout",
    "ISpoutPartition",
    "ITridentSpout",
    "PartitionedCoordinator",
    "PartitionedEmitter",
    "SpoutType",
    "StuckBatchError",
    "TransactionalPartitionedEmitter",
    "partition_id",
]
