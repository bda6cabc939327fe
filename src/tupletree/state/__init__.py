"""Stateful bolts with checkpointed state (Storm's stateful bolts): ``StatefulBolt``,
``KeyValueState`` and the checkpoint protocol that saves every stateful bolt's state
together, so that after a worker dies each one starts again from the last checkpoint.

Layout of the package (pure decisions apart from the I/O around them):

- protocol.py     names, actions, the checkpoint spout's stored states and their table
- coordinator.py  the checkpoint spout's decisions (pure)
- inputs.py       which checkpoint copies a bolt acts on (pure)
- alignment.py    the aligned mode's barrier alignment (pure)
- held.py         a stateful bolt's held inputs and what each step does (pure)
- kv.py           KeyValueState over a tupletree.store, Storm's prepare-hash layout
- provider.py     which store: topology.state.provider and its config
- stateful_bolt.py, collector.py, bolts.py, spout.py, aligned.py: the components
- planner.py      how create_topology wires a topology with a stateful bolt

docs/state.md is the user's guide: API, providers, the protocol, the guarantees.
"""

from tupletree.state.aligned import CheckpointedSpout, Rewindable
from tupletree.state.bolts import (
    BasicCheckpointForwarder,
    CheckpointForwarder,
    StatefulBoltExecutor,
)
from tupletree.state.kv import KeyValueState, StateError
from tupletree.state.protocol import (
    CHECKPOINT_COMPONENT,
    CHECKPOINT_STREAM,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
)
from tupletree.state.spout import CheckpointSpout
from tupletree.state.stateful_bolt import BaseStatefulBolt, StatefulBolt

__all__ = [
    "CHECKPOINT_COMPONENT",
    "CHECKPOINT_STREAM",
    "COMMIT",
    "INITSTATE",
    "PREPARE",
    "ROLLBACK",
    "BaseStatefulBolt",
    "BasicCheckpointForwarder",
    "CheckpointForwarder",
    "CheckpointSpout",
    "CheckpointedSpout",
    "KeyValueState",
    "Rewindable",
    "StateError",
    "StatefulBolt",
    "StatefulBoltExecutor",
]
