"""StatefulBolt: the user's base class for a bolt with checkpointed state (Storm's
IStatefulBolt / BaseStatefulBolt).

Lifecycle, per task, in this order (Storm's):

1. ``prepare(conf, context, collector)``;
2. ``init_state(state)``, once, with the task's ``KeyValueState`` as last committed
   (empty the first time), before any ``execute``: inputs that arrive earlier wait;
3. ``execute(tup)`` per input; ``collector.ack(tup)`` is held back until the state that
   includes the tuple's effect is committed, so a crash replays it; every emit must be
   anchored (``anchors=tup``), or it raises;
4. around each checkpoint: ``pre_prepare(txid)`` before the state is prepared,
   ``pre_commit(txid)`` before it is committed, ``pre_rollback()`` before it is rolled
   back to the last commit (after which the bolt sees its state as committed: the
   inputs since then are failed and replayed);
5. ``cleanup()`` when the topology is killed.

A StatefulBolt is not a Bolt: the runtime cannot run it unwrapped, so it cannot
silently become a normal bolt (Storm's STORM-1714). ``TopologyBuilder.set_bolt`` takes
it; ``create_topology`` plans the topology around it (planner.py).
"""

from __future__ import annotations

from typing import Any

from tupletree.state.planner import plan_topology


class StatefulBolt:
    """A bolt whose state is checkpointed; see the module docstring."""

    outputs: list[str] | None = None
    plan_topology = staticmethod(plan_topology)
    # Every emit must be anchored (Storm's rule for stateful topologies); a persistent
    # window, whose window holds copies outside any tuple tree, sets this False.
    emits_anchored = True

    def declare_output_fields(self, declarer: Any) -> None:
        """Declare output streams; by default from the class attribute ``outputs``."""
        if self.outputs is not None:
            declarer.declare(self.outputs)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        pass

    def init_state(self, state: Any) -> None:
        pass

    def execute(self, tup: Any) -> None:
        pass

    def pre_prepare(self, txid: int) -> None:
        pass

    def pre_commit(self, txid: int) -> None:
        pass

    def pre_rollback(self) -> None:
        pass

    def cleanup(self) -> None:
        pass


BaseStatefulBolt = StatefulBolt
