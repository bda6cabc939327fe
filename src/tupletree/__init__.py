"""tupletree: Apache Storm's topology model and guaranteed message processing in Python."""

# Wires the DRPC server and the web view into the clusters (services.py says why).
from tupletree import services  # noqa: F401
from tupletree.cluster import Cluster
from tupletree.config import Config
from tupletree.errors import (
    EmitError,
    FailedException,
    InvalidConfigError,
    InvalidTopologyError,
    TopologyNotFoundError,
    TopologyRebalancingError,
    WorkerDiedError,
)
from tupletree.local import LocalCluster
from tupletree.topology import (
    BasicBolt,
    Batch,
    BatchBolt,
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
    "Batch",
    "BatchBolt",
    "Bolt",
    "Cluster",
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
    "SparkJobFailed",
    "SparkLaunchError",
    "Spout",
    "TopologyBuilder",
    "TopologyNotFoundError",
    "TopologyRebalancingError",
    "Tuple",
    "WorkerDiedError",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # SparkCluster imports pyspark lazily: importing tupletree must not start a JVM
    # or require Java.
    if name == "SparkCluster":
        from tupletree.spark.cluster import SparkCluster

        return SparkCluster
    if name in ("SparkJobFailed", "SparkLaunchError"):
        from tupletree.spark import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'tupletree' has no attribute {name!r}")
