"""Test helpers, Storm's way: feed a running topology, track acks, complete a topology.

They work on every cluster: components are copied per task (pickled), and the state a
test must reach while the topology runs lives in SharedLists (``shared.py``), read
directly in the test's process and over an authenticated local socket from Spark's
worker processes.
"""

from tupletree.testing.complete import (
    FixedTupleSpout,
    MockedSources,
    Results,
    complete_topology,
    read_tuples,
)
from tupletree.testing.feeder import AckFailTracker, FeederSpout
from tupletree.testing.shared import SharedList

__all__ = [
    "AckFailTracker",
    "FeederSpout",
    "FixedTupleSpout",
    "MockedSources",
    "Results",
    "SharedList",
    "complete_topology",
    "read_tuples",
]
