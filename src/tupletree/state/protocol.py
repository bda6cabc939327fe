"""Storm's checkpoint protocol on one screen: names, actions, the stored states and the
transition table (Storm's ``CheckPointState``), pure.

The checkpoint spout (component ``$checkpointspout``) drives every stateful bolt through
a three-phase commit by emitting on stream ``$checkpoint`` the fields ``txid`` and
``action``. Its own progress is one stored value, ``CheckPointState(txid, state)``:

=================  =====================================  ====================================
stored state       normal: action, then on ack            recovering: action, then on ack
=================  =====================================  ====================================
COMMITTED(t)       PREPARE: save PREPARING(t+1) first,    INITSTATE t; the ack ends recovery
                   emit PREPARE t+1
PREPARING(t)       PREPARE t; ack -> COMMITTING(t)        ROLLBACK t; ack -> COMMITTED(t-1)
COMMITTING(t)      COMMIT t; ack -> COMMITTED(t)          COMMIT t; ack -> COMMITTED(t)
=================  =====================================  ====================================

``next_action(recovering)`` is the left half of a cell, ``next_state(recovering)`` what
the spout saves when that action's tuple is acked (for COMMITTED in normal operation:
what it saves *before* emitting). A fresh topology starts at COMMITTED(-1), recovering:
its first step is INITSTATE -1, which initializes every stateful bolt with empty state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

CHECKPOINT_COMPONENT: Final = "$checkpointspout"
CHECKPOINT_STREAM: Final = "$checkpoint"
TXID_FIELD: Final = "txid"
ACTION_FIELD: Final = "action"
CHECKPOINT_FIELDS: Final = (TXID_FIELD, ACTION_FIELD)
# The key of the spout's CheckPointState in its namespace ``$checkpointspout-<index>``.
TX_STATE_KEY: Final = "__state"

# Actions (the ``action`` field): plain strings, so they read well in logs and cross
# processes as themselves.
PREPARE: Final = "PREPARE"
COMMIT: Final = "COMMIT"
ROLLBACK: Final = "ROLLBACK"
INITSTATE: Final = "INITSTATE"
ACTIONS: Final = (PREPARE, COMMIT, ROLLBACK, INITSTATE)

# Stored states of the checkpoint spout.
COMMITTED: Final = "COMMITTED"
PREPARING: Final = "PREPARING"
COMMITTING: Final = "COMMITTING"
STATES: Final = (COMMITTED, PREPARING, COMMITTING)

# The txid a topology that never checkpointed is committed at (Storm's).
INITIAL_TXID: Final = -1


@dataclass(frozen=True, slots=True)
class CheckPointState:
    """The checkpoint spout's progress: transaction ``txid`` is in ``state``."""

    txid: int
    state: str

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"checkpoint state must be one of {STATES}, got {self.state!r}")
        if isinstance(self.txid, bool) or not isinstance(self.txid, int):
            raise ValueError(f"checkpoint txid must be an int, got {self.txid!r}")

    def next_state(self, recovering: bool) -> CheckPointState:
        """The state saved once this state's action is acked (see the module's table)."""
        if self.state == PREPARING:
            if recovering:
                return CheckPointState(self.txid - 1, COMMITTED)
            return CheckPointState(self.txid, COMMITTING)
        if self.state == COMMITTING:
            return CheckPointState(self.txid, COMMITTED)
        return self if recovering else CheckPointState(self.txid + 1, PREPARING)

    def next_action(self, recovering: bool) -> str:
        """The action this state calls for (see the module's table)."""
        if self.state == PREPARING:
            return ROLLBACK if recovering else PREPARE
        if self.state == COMMITTING:
            return COMMIT
        return INITSTATE if recovering else PREPARE

    def to_json(self) -> dict[str, object]:
        return {"txid": self.txid, "state": self.state}

    @classmethod
    def from_json(cls, value: object) -> CheckPointState:
        if not isinstance(value, dict) or set(value) != {"txid", "state"}:
            raise ValueError(f"stored checkpoint state must be {{txid, state}}, got {value!r}")
        return cls(value["txid"], value["state"])


FRESH: Final = CheckPointState(INITIAL_TXID, COMMITTED)
