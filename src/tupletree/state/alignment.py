"""Barrier alignment for the aligned checkpoint mode (beyond Storm; see aligned.py), pure.

In the aligned mode a checkpoint step travels *in band*: each upstream task sends its
copy after the data it emitted before the step and before the data after it, on the
same channel (tuples from one task to another arrive in the order they were sent). A
task with several upstream tasks therefore holds a channel's tuples from the moment
that channel's copy arrived until every channel delivered its copy, and only then
carries out the step: the step then divides the input into "before" and "after" the
same way on every channel (Flink's barrier alignment; Storm keeps processing the other
inputs, which is why its state is at-least-once even without failures of acks).

``AlignedInputs`` is ``CheckpointInputs`` (the counting and the stale-txid rule) plus
which channels (upstream task ids) delivered the step in progress and the tuples held
from them. The caller:

- for each data tuple: ``blocks(source_task)``? then ``hold(tup)``; a False from
  ``hold`` means the bound was reached: the step is abandoned (``aborted``), and the
  caller runs ``release()`` plus the tuple now. The step's later copies are refused
  (``REFUSE``: the caller fails them), so the checkpoint spout learns it failed;
- for each copy of a step: ``arrive_on(channel, action, txid)`` returns the verdict and
  the tuples held for a step that was left part-way (run them first); after carrying
  out a HANDLE or STALE step, ``release()`` gives the held tuples to run, in order.

Bounds: at most ``max_held`` tuples held; one step tracked at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from tupletree.state.inputs import WAIT, CheckpointInputs

REFUSE: Final = "refuse"

# Tuples a task holds while aligning one step, at most (then the step is abandoned).
MAX_HELD_WHILE_ALIGNING = 100_000


class AlignedInputs(CheckpointInputs):
    """See the module docstring. ``channels``: the upstream task ids that send this task
    ``$checkpoint`` (one copy of each step each)."""

    __slots__ = ("aborted", "channels", "delivered", "held", "max_held")

    def __init__(self, channels: Iterable[int], max_held: int = MAX_HELD_WHILE_ALIGNING) -> None:
        self.channels = frozenset(channels)
        super().__init__(len(self.channels))
        self.max_held = max_held
        self.delivered: set[int] = set()
        self.held: list[Any] = []
        self.aborted: tuple[str, int] | None = None

    def blocks(self, channel: int) -> bool:
        """Whether a data tuple from ``channel`` must wait (its copy already arrived)."""
        return channel in self.delivered

    def hold(self, tup: Any) -> bool:
        """Hold ``tup`` until the step completes; False (not held, step abandoned) when
        ``max_held`` tuples are held already."""
        if len(self.held) < self.max_held:
            self.held.append(tup)
            return True
        self.aborted = self._current
        self._current = None
        self._count = 0
        self.delivered = set()
        return False

    def arrive_on(self, channel: int, action: str, txid: int) -> tuple[str, list[Any]]:
        """A copy of step (``action``, ``txid``) came from ``channel``: the verdict (WAIT,
        HANDLE, STALE or REFUSE) and the tuples to run before anything else."""
        step = (action, txid)
        leftovers: list[Any] = []
        if step != self._current and self.delivered:
            # The step before was left part-way (it failed elsewhere): let its held
            # tuples through; the recovery that follows undoes what they do.
            leftovers = self.release()
        if step == self.aborted:
            return REFUSE, leftovers
        self.aborted = None
        verdict = self.arrive(action, txid)
        if verdict == WAIT:
            self.delivered.add(channel)
        else:
            self.delivered = set()
        return verdict, leftovers

    def release(self) -> list[Any]:
        """The held tuples, in arrival order; nothing is held or blocked afterwards."""
        held, self.held = self.held, []
        self.delivered = set()
        return held
