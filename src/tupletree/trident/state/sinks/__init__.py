"""Exactly-once sinks (beyond Storm): a batch's rows and the partition's last committed
txid written in one transaction of the sink's own store, a committed txid skipped
(base.py). Use with ``stream.partition_persist(factory, Fields(...), SinkUpdater())``
behind a transactional spout."""

from tupletree.trident.state.sinks.base import (
    Mark,
    SinkFactory,
    SinkLayoutError,
    SinkState,
    SinkUpdater,
    decide,
    decide_in_layout,
)
from tupletree.trident.state.sinks.postgres import PostgresSinkFactory
from tupletree.trident.state.sinks.redis import RedisSinkFactory
from tupletree.trident.state.sinks.sqlite import SqliteSinkFactory

__all__ = [
    "Mark",
    "PostgresSinkFactory",
    "RedisSinkFactory",
    "SinkFactory",
    "SinkLayoutError",
    "SinkState",
    "SinkUpdater",
    "SqliteSinkFactory",
    "decide",
    "decide_in_layout",
]
