"""The user's model of a topology; nothing here executes anything."""

from tupletree.topology.batch import Batch
from tupletree.topology.builder import Topology, TopologyBuilder
from tupletree.topology.components import (
    DEFAULT_STREAM,
    BasicBolt,
    BatchBolt,
    Bolt,
    OutputFieldsDeclarer,
    Spout,
)
from tupletree.topology.fields import Fields
from tupletree.topology.groupings import CustomStreamGrouping
from tupletree.topology.tuple import Tuple

__all__ = [
    "DEFAULT_STREAM",
    "BasicBolt",
    "Batch",
    "BatchBolt",
    "Bolt",
    "CustomStreamGrouping",
    "Fields",
    "OutputFieldsDeclarer",
    "Spout",
    "Topology",
    "TopologyBuilder",
    "Tuple",
]
