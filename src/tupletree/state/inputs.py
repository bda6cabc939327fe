"""Which checkpoint tuples a bolt task acts on (Storm's BaseStatefulBoltExecutor), pure.

A bolt in a stateful topology receives every checkpoint step (``action``, ``txid``)
once from each upstream task that sends ``$checkpoint`` to it (``expected`` copies in
all). It acts on a step once, when the last copy arrives:

- ``arrive`` returns WAIT for the copies before the last (the caller acks them and
  forwards nothing), then HANDLE, or STALE when ``txid`` is below the last txid this
  task handled (the caller acks it and forwards nothing: an old transaction);
- ``handled(action, txid)`` records a step the caller carried out: the last txid becomes
  ``txid`` (``txid - 1`` after a ROLLBACK, so the INITSTATE that follows is not stale).

One step at a time: the checkpoint spout starts a step only once the last one's tuple
tree completed, which needs every copy of it acked here, so copies of two different
steps never interleave at one task. Copies left over from a step that failed
part-way (an upstream task that died, or refused PREPARE before its INITSTATE) are
dropped when the next step's first copy arrives. Storm keeps a count per (action, txid)
forever instead, so after a failed PREPARE t the retried PREPARE t could be handled
before every upstream task sent it; here it cannot, and the table holds one entry.
"""

from __future__ import annotations

from typing import Final

from tupletree.state.protocol import ROLLBACK

WAIT: Final = "wait"
HANDLE: Final = "handle"
STALE: Final = "stale"


class CheckpointInputs:
    """See the module docstring. ``expected``: the number of upstream tasks that send
    this task ``$checkpoint`` (at least 1)."""

    __slots__ = ("_count", "_current", "expected", "last_txid")

    def __init__(self, expected: int) -> None:
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 1:
            raise ValueError(
                f"a bolt in a stateful topology needs at least one upstream task sending "
                f"$checkpoint, got {expected!r}"
            )
        self.expected = expected
        self.last_txid: int | None = None
        self._current: tuple[str, int] | None = None
        self._count = 0

    def arrive(self, action: str, txid: int) -> str:
        """A copy of step (``action``, ``txid``) arrived: WAIT, HANDLE or STALE."""
        step = (action, txid)
        if step != self._current:
            self._current = step
            self._count = 0
        self._count += 1
        if self._count < self.expected:
            return WAIT
        self._current = None
        self._count = 0
        if self.last_txid is not None and txid < self.last_txid:
            return STALE
        return HANDLE

    def handled(self, action: str, txid: int) -> None:
        """The caller carried out step (``action``, ``txid``)."""
        self.last_txid = txid - 1 if action == ROLLBACK else txid

    @property
    def waiting(self) -> tuple[str, int, int] | None:
        """(action, txid, copies so far) of a step still waiting for copies, if any."""
        if self._current is None:
            return None
        return (*self._current, self._count)
