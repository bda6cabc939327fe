"""The checkpoint spout's decisions (Storm's CheckpointSpout), as a pure object.

``CheckpointCoordinator`` holds the stored ``CheckPointState``, whether it is
recovering, whether a step is in flight, and when the last checkpoint began. The spout
around it (spout.py) asks ``poll(now)`` what to do on each ``next_tuple``, saves the
state a ``Step`` carries *before* emitting its action, and reports the step's ack or
fail back. Nothing here does I/O or reads a clock; ``now`` is seconds on the worker's
clock.

Rules (Storm's, see protocol.py for the table):

- One step in flight at a time; a new step only after the last one was acked or failed.
- It starts recovering (open() begins in recovery): INITSTATE, ROLLBACK or COMMIT by the
  stored state, until an INITSTATE is acked.
- Normal operation: a new PREPARE only when ``interval_secs`` passed since the last
  one began; PREPARE's ack leads straight to COMMIT, COMMIT's ack to COMMITTED.
- Any fail puts it back into recovery (a failed PREPARE is rolled back).
- An ack for another txid than the current one is ignored (Storm logs it; Storm also
  lets it end the step in flight, which could start a second step while one is still
  out: here the step stays in flight until its own ack, fail or timeout).
- After a failed step the next one waits: a tenth of the interval, doubling with each
  failure in a row up to the interval (Storm sends it at once, so a bolt whose store is
  down keeps the spout and the ackers spinning through ROLLBACKs as fast as they go).

Bounds: constant memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tupletree.state.protocol import COMMITTED, FRESH, CheckPointState


@dataclass(frozen=True, slots=True)
class Step:
    """Emit ``action`` for ``txid``; first save ``save`` if it is not None."""

    txid: int
    action: str
    save: CheckPointState | None = None


class CheckpointCoordinator:
    """See the module docstring. ``stored`` is the spout's saved state (None: a topology
    that never checkpointed, which starts at COMMITTED(-1); the caller saves that)."""

    __slots__ = (
        "fails_in_a_row",
        "in_flight",
        "interval_secs",
        "last_checkpoint_at",
        "recovering",
        "retry_at",
        "state",
    )

    def __init__(self, stored: CheckPointState | None, interval_secs: float) -> None:
        if not interval_secs > 0:
            raise ValueError(f"checkpoint interval must be > 0 s, got {interval_secs!r}")
        self.state = stored if stored is not None else FRESH
        self.interval_secs = interval_secs
        self.recovering = True
        self.in_flight = False
        self.last_checkpoint_at = -math.inf
        self.fails_in_a_row = 0
        self.retry_at = -math.inf

    def retry_delay(self) -> float:
        """How long the step after ``fails_in_a_row`` failures waits."""
        if not self.fails_in_a_row:
            return 0.0
        return min(self.interval_secs, self.interval_secs / 10 * 2 ** (self.fails_in_a_row - 1))

    def poll(self, now: float) -> Step | None:
        """The step to take now, if any; it is in flight from here on."""
        if self.in_flight or now < self.retry_at:
            return None
        state = self.state
        if self.recovering:
            self.in_flight = True
            return Step(state.txid, state.next_action(True))
        if state.state == COMMITTED:
            if now - self.last_checkpoint_at < self.interval_secs:
                return None
            state = self.state = state.next_state(False)
            self.last_checkpoint_at = now
            self.in_flight = True
            return Step(state.txid, state.next_action(False), save=state)
        self.in_flight = True
        return Step(state.txid, state.next_action(False))

    def ack(self, txid: int) -> CheckPointState | None:
        """The step for ``txid`` was acked: the state to save now, if it changed."""
        if not self.in_flight or txid != self.state.txid:
            return None
        self.in_flight = False
        self.fails_in_a_row = 0
        state = self.state
        following = state.next_state(self.recovering)
        if following == state:  # COMMITTED while recovering: INITSTATE went through
            self.recovering = False
            return None
        self.state = following
        return following

    def fail(self, txid: int, now: float) -> None:
        """The step for ``txid`` failed (or timed out) at ``now``: recover."""
        if not self.in_flight or txid != self.state.txid:
            return
        self.in_flight = False
        self.recovering = True
        self.fails_in_a_row += 1
        self.retry_at = now + self.retry_delay()

    def __repr__(self) -> str:
        mode = "recovering" if self.recovering else "normal"
        flight = ", step in flight" if self.in_flight else ""
        return f"CheckpointCoordinator({self.state.state}({self.state.txid}), {mode}{flight})"
