"""What a stateful bolt task holds between checkpoints, and what each step does with it
(Storm's StatefulBoltExecutor), pure: tuples are opaque values here.

What it holds:

- ``pending``: inputs that arrived before the first INITSTATE (the state is not loaded
  yet); run once it is, in arrival order;
- the inputs the bolt acked since the last PREPARE: their acks are held back, and a
  tuple is acked for real only when the state that includes its effect is committed.
  The runtime's collector keeps them (``OutputCollector.defer_ack``: an int per tree,
  not the tuple); the caller takes them as a *batch* when a step needs them and hands
  it to ``finish``;
- ``prepared``: the batches acked before the PREPARE now in progress.

Batches are opaque here (the collector's ``take_deferred``, ``release_deferred``,
``fail_deferred`` know what is in them), so this stays plain values.

``step(action, txid)`` returns the ``Plan`` for one checkpoint step:

=========  ==================================================================
PREPARE    before INITSTATE: refuse (fail the checkpoint tuple, so the checkpoint
           spout recovers); else ``pre_prepare``, prepare the state, acked -> prepared
COMMIT     ``pre_commit``, commit the state, ack the prepared tuples (also before
           INITSTATE: a recovery may commit what was prepared before a crash; the
           hook only after it, as below)
ROLLBACK   ``pre_rollback``, roll the state back, fail prepared and acked tuples
           (before INITSTATE: without the hook, which would run before init_state)
INITSTATE  the first: ``init_state``, then run the pending tuples; later ones: nothing
=========  ==================================================================

In the aligned mode (beyond Storm, see aligned.py) two rows differ, because every
recovery rewinds the spouts to the last committed checkpoint: a later INITSTATE rolls the
state back like ROLLBACK (the bolt's uncommitted changes will be replayed), and the
pending tuples are failed instead of run (they were emitted before the rewind and will
come again after it).

Bounds: ``pending`` holds at most ``max_pending`` tuples (``buffer`` refuses more: the
caller fails them and the spout replays them). The held acks are an int per tuple tree
acked in one checkpoint interval: the trees are open until then, so
``topology.max.spout.pending`` bounds them, and the message timeout ends them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tupletree.state.protocol import COMMIT, INITSTATE, PREPARE, ROLLBACK

# Inputs a task holds before its first INITSTATE, at most (then it fails them).
MAX_PENDING_BEFORE_INIT = 100_000


@dataclass(slots=True)
class Plan:
    """What one checkpoint step does, in this order: ``refuse`` (fail the checkpoint
    tuple and stop there), the user's ``hook``, ``state_op`` on the state, ``init``
    (call init_state); then, if all that succeeded, ``CheckpointTuples.finish(plan,
    taken)`` fills in the rest: release the batches in ``ack``, fail those in
    ``fail_batches`` and the tuples in ``fail``, run the tuples in ``run``; then the
    caller forwards the checkpoint and acks it. If a hook or the state raised, the
    caller fails the checkpoint tuple and does not call ``finish``: nothing moved."""

    action: str
    refuse: bool = False
    hook: str | None = None
    state_op: str | None = None
    init: bool = False
    ack: list[Any] = field(default_factory=list)
    fail_batches: list[Any] = field(default_factory=list)
    fail: list[Any] = field(default_factory=list)
    run: list[Any] = field(default_factory=list)

    @property
    def takes_acked(self) -> bool:
        """Whether ``finish`` needs the batch of acks held since the last PREPARE."""
        return self.state_op in ("prepare", "rollback")


class CheckpointTuples:
    """See the module docstring."""

    __slots__ = ("aligned", "initialized", "max_pending", "pending", "prepared")

    def __init__(self, *, aligned: bool = False, max_pending: int = MAX_PENDING_BEFORE_INIT):
        self.aligned = aligned
        self.max_pending = max_pending
        self.initialized = False
        self.pending: list[Any] = []
        self.prepared: list[Any] = []

    def buffer(self, tup: Any) -> bool:
        """Hold ``tup`` until INITSTATE; False (not held) when ``pending`` is full."""
        if len(self.pending) >= self.max_pending:
            return False
        self.pending.append(tup)
        return True

    def step(self, action: str, txid: int) -> Plan:
        """Decide what step (``action``, ``txid``) does; moves nothing (see Plan)."""
        if action == PREPARE:
            if not self.initialized:
                return Plan(action, refuse=True)
            return Plan(action, hook="pre_prepare", state_op="prepare")
        # Before the first INITSTATE (a task started again in the middle of a
        # checkpoint) the state operation runs, the user's hook does not: the bolt's
        # init_state has not run, and a hook that uses what it set up would raise, fail
        # the step, and fail every retry of it too.
        initialized = self.initialized
        if action == COMMIT:
            return Plan(action, hook="pre_commit" if initialized else None, state_op="commit")
        if action == ROLLBACK:
            hook = "pre_rollback" if initialized else None
            return Plan(action, hook=hook, state_op="rollback")
        if action == INITSTATE:
            if not self.initialized:
                return Plan(action, init=True)
            if self.aligned:
                return Plan(action, hook="pre_rollback", state_op="rollback")
            return Plan(action)
        raise ValueError(f"unknown checkpoint action {action!r} (txid {txid})")

    def finish(self, plan: Plan, acked: Any = None) -> Plan:
        """The step went through: move what it settles into ``plan``. ``acked`` is the
        batch of acks held since the last PREPARE, taken after the hook and the state
        (so what ``pre_prepare`` acked belongs to this PREPARE), when
        ``plan.takes_acked``."""
        if plan.refuse:
            return plan
        if plan.state_op == "prepare":
            self.prepared.append(acked)
        elif plan.state_op == "commit":
            plan.ack, self.prepared = self.prepared, []
        elif plan.state_op == "rollback":
            plan.fail_batches = [*self.prepared, acked]
            self.prepared = []
        if plan.init:
            self.initialized = True
            pending, self.pending = self.pending, []
            if self.aligned:
                # Emitted before the spouts rewound: they come again after INITSTATE.
                plan.fail = pending
            else:
                plan.run = pending
        return plan
