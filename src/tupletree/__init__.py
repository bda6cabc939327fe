"""tupletree: Apache Storm's topology model and guaranteed message processing in Python."""

from tupletree.config import Config
from tupletree.errors import (
    EmitError,
    FailedException,
    InvalidConfigError,
    InvalidTopologyError,
)
from tupletree.local import LocalCluster
from tupletree.topology import (
    BasicBolt,
    Bolt,
    CustomStreamGrouping,
    Fields,
    Spout,
    TopologyBuilder,
    Tuple,
)
from tupletree.topology.reliable_spout import ReliableSpout

__all__ = [
    "BasicBolt",
    "Bolt",
    "Config",
    "CustomStreamGrouping",
    "EmitError",
    "FailedException",
    "Fields",
    "InvalidConfigError",
    "InvalidTopologyError",
    "LocalCluster",
    "ReliableSpout",
    "SparkCluster",
    "Spout",
    "TopologyBuilder",
    "Tuple",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # SparkCluster imports pyspark lazily: importing tupletree must not start a JVM
    # or require Java.
    if name == "SparkCluster":
        from tupletree.spark.cluster import SparkCluster

        return SparkCluster
    raise AttributeError(f"module 'tupletree' has no attribute {name!r}")
