"""Trident: Storm's exactly-once API (batches, txids, states) on tupletree, compiled to an
ordinary topology (a coordinator spout, batch-aware bolts, the existing acker), so it
runs on LocalCluster and SparkCluster alike. docs/trident.md is the user's page.

    from tupletree.trident import TridentTopology

Modules: topology (TridentTopology), stream (Stream, GroupedStream, TridentState),
operation and builtin (what users write and get), spout (the spout kinds), testing
(FixedBatchSpout); inside: coordinator (the master coordinator's decisions, pure),
master (its spout), bolt and processors (the batch-aware bolt), planner (the
compiler), guarantees (the exactly-once matrix), progress (the durable txids).
"""

from tupletree.trident.attempt import DRPCBatch, TransactionAttempt
from tupletree.trident.stream import GroupedStream, Stream, TridentState
from tupletree.trident.topology import TridentTopology
from tupletree.trident.tuple import TridentTuple

__all__ = [
    "DRPCBatch",
    "GroupedStream",
    "Stream",
    "TransactionAttempt",
    "TridentState",
    "TridentTopology",
    "TridentTuple",
]
