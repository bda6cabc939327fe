"""BatchTable: the master batch coordinator's decisions, as a pure object.

Storm's MasterBatchCoordinator (MBC) keeps a table of active batches and turns acks,
fails and the passing of time into emits. Here that table is this object, driven by
plain values (the attempt acked or failed, ``now``, whether the spouts are ready); the
spout around it (master.py) only persists and emits what it returns.

State:
- ``current_txid``: the first txid not yet committed (Storm's "currtx", from 1);
- ``active``: txid -> [attempt id, status], status PROCESSING (its ``$batch`` tree is
  in flight), PROCESSED (that tree completed; the batch waits for its turn to commit)
  or COMMITTING (its ``$commit`` tree is in flight);
- ``attempts``: txid -> the last attempt id used for it. Attempt ids only grow: a task
  that sees attempt n of a batch drops what it holds of lower attempts, so reusing one
  would leave the replay ignored.

Rules (Storm's MBC):
- ``sync(now, ready)``: if the current txid is PROCESSED it becomes COMMITTING and its
  ``$commit`` is emitted (only the current txid ever commits: commits are in strict
  txid order). Then, while the topology runs and fewer than ``max_active`` batches are
  active, every txid of current .. current + max_active - 1 that is not active gets the
  next attempt id and its ``$batch`` is emitted, if the spouts are ``ready`` for it and
  no batch was started in the last ``interval_secs`` (one new batch per interval).
- ``ack(attempt)``: a stale attempt (not the active one of its txid) is ignored.
  PROCESSING -> PROCESSED; COMMITTING -> committed: the txid leaves the table and
  ``current_txid`` moves to txid + 1 (a ``Committed`` outcome: the spout records it
  durably, with a compare-and-set on the txid it moves from). Then ``sync``.
- ``fail(attempt)`` (a failed or timed-out tree): stale -> ignored. Otherwise that txid
  and every later active txid leave the table, and ``sync`` emits them again with
  their next attempt ids: a later batch may start where the failed one ended (an
  opaque spout's batch t + 1 begins at the end of batch t), so it is replayed after it.

Beyond Storm, a replay backoff: Storm's MBC replays a failed batch at once, however
often it failed. A batch that fails on every attempt (a poison tuple, a sink that is
down) then costs a replay per emit interval, and with the interval at 0 it spins a
core (8,880 attempts in 3 s, measured). Here the first ``FREE_REPLAYS`` replays of a
txid go at once; after that each waits ``replay_delay(failures)``: 0.5 s doubling per
failure, at most ``MAX_REPLAY_DELAY_SECS``. Later txids wait with it (they replay after
it, as above). The count starts over when the txid commits, or at a reload.

Bounds: ``active``, ``attempts`` and the backoff's tables hold at most ``max_active``
txids (attempts of committed txids are dropped). Cost: ``sync`` is O(1) when nothing
is due (the common call: every ``next_tuple``), O(max_active) otherwise; ack/fail
O(max_active).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tupletree.trident.attempt import TransactionAttempt

INIT_TXID = 1
PROCESSING = "PROCESSING"
PROCESSED = "PROCESSED"
COMMITTING = "COMMITTING"
FREE_REPLAYS = 2  # replays of one txid that go at once, before the backoff starts
FIRST_REPLAY_DELAY_SECS = 0.5
MAX_REPLAY_DELAY_SECS = 30.0


def replay_delay(failures: int) -> float:
    """How long a txid that failed ``failures`` times in a row waits before its next
    attempt: 0 for the first ``FREE_REPLAYS``, then 0.5 s, 1 s, 2 s ... up to 30 s."""
    if failures <= FREE_REPLAYS:
        return 0.0
    return min(
        FIRST_REPLAY_DELAY_SECS * 2.0 ** (failures - FREE_REPLAYS - 1), MAX_REPLAY_DELAY_SECS
    )


@dataclass(frozen=True, slots=True)
class EmitBatch:
    """Start ``attempt``: emit ``$batch`` with it as the message id (after persisting
    the table's ``attempts``, so a restarted coordinator never reuses the id)."""

    attempt: TransactionAttempt


@dataclass(frozen=True, slots=True)
class EmitCommit:
    """Commit ``attempt``: emit ``$commit`` with it as the message id."""

    attempt: TransactionAttempt


@dataclass(frozen=True, slots=True)
class Committed:
    """``attempt``'s commit tree completed: record ``current_txid = txid + 1`` durably
    (expecting ``txid``), then emit ``$success``."""

    attempt: TransactionAttempt


Outcome = EmitBatch | EmitCommit | Committed


class BatchTable:
    def __init__(
        self,
        max_active: int,
        interval_secs: float,
        current_txid: int = INIT_TXID,
        attempts: Mapping[int, int] | None = None,
    ) -> None:
        if isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1:
            raise ValueError(f"max_active must be a positive integer, got {max_active!r}")
        if interval_secs < 0:
            raise ValueError(f"interval_secs must be >= 0, got {interval_secs!r}")
        self.max_active = max_active
        self.interval_secs = float(interval_secs)
        self.active: dict[int, list[Any]] = {}
        self.replayed = 0  # batches started again (attempt > 0), since this table began
        self.last_committed: int | None = None
        self._last_start: float | None = None
        self.failures: dict[int, int] = {}  # txid -> failures in a row, in this table
        self._not_before: dict[int, float] = {}  # txid -> earliest start of its replay
        self.reload(current_txid, attempts or {})

    def reload(self, current_txid: int, attempts: Mapping[int, int]) -> None:
        """Start over from durable values (at open, or after another coordinator moved
        the txid): nothing is active; attempts below ``current_txid`` are forgotten."""
        if current_txid < INIT_TXID:
            raise ValueError(f"current_txid must be >= {INIT_TXID}, got {current_txid}")
        self.current_txid = current_txid
        self.attempts = {int(t): int(a) for t, a in attempts.items() if int(t) >= current_txid}
        self.active.clear()
        self.failures.clear()
        self._not_before.clear()
        if self.last_committed is not None and self.last_committed >= current_txid:
            # A commit the store did not record (the coordinator reloads for that): it
            # is not committed, whatever the views said.
            self.last_committed = current_txid - 1 if current_txid > INIT_TXID else None

    # -- events ----------------------------------------------------------------------

    def sync(self, now: float, ready: Callable[[int], bool], running: bool = True) -> list[Outcome]:
        out: list[Outcome] = []
        active = self.active
        current = active.get(self.current_txid)
        if current is not None and current[1] == PROCESSED:
            current[1] = COMMITTING
            out.append(EmitCommit(TransactionAttempt(self.current_txid, current[0])))
        if not running or len(active) >= self.max_active:
            return out
        for txid in range(self.current_txid, self.current_txid + self.max_active):
            if txid in active:
                continue
            last = self._last_start
            if last is not None and now - last < self.interval_secs:
                break
            wait_until = self._not_before.get(txid)
            if wait_until is not None:
                if now < wait_until:
                    break  # later txids replay after it
                del self._not_before[txid]
            if not ready(txid):
                continue
            attempt_id = self.attempts.get(txid, -1) + 1
            self.attempts[txid] = attempt_id
            if attempt_id:
                self.replayed += 1
            active[txid] = [attempt_id, PROCESSING]
            self._last_start = now
            out.append(EmitBatch(TransactionAttempt(txid, attempt_id)))
        return out

    def ack(
        self,
        attempt: TransactionAttempt,
        now: float,
        ready: Callable[[int], bool],
        running: bool = True,
    ) -> list[Outcome]:
        txid, attempt_id = attempt
        entry = self.active.get(txid)
        if entry is None or entry[0] != attempt_id:
            return []
        out: list[Outcome] = []
        if entry[1] == PROCESSING:
            entry[1] = PROCESSED
        elif entry[1] == COMMITTING:
            del self.active[txid]
            self.attempts.pop(txid, None)
            self.failures.pop(txid, None)
            self.current_txid = txid + 1
            self.last_committed = txid
            out.append(Committed(TransactionAttempt(txid, attempt_id)))
        out.extend(self.sync(now, ready, running))
        return out

    def fail(
        self,
        attempt: TransactionAttempt,
        now: float,
        ready: Callable[[int], bool],
        running: bool = True,
    ) -> list[Outcome]:
        txid, attempt_id = attempt
        entry = self.active.get(txid)
        if entry is None or entry[0] != attempt_id:
            return []
        for later in [t for t in self.active if t >= txid]:
            del self.active[later]
        failures = self.failures[txid] = self.failures.get(txid, 0) + 1
        delay = replay_delay(failures)
        if delay:
            self._not_before[txid] = now + delay
        return self.sync(now, ready, running)

    # -- views -----------------------------------------------------------------------

    def status(self, txid: int) -> str | None:
        entry = self.active.get(txid)
        return None if entry is None else entry[1]

    def snapshot(self) -> dict[str, Any]:
        """Plain data for metrics and the web view (Storm's names, camelCase)."""
        return {
            "currentTxid": self.current_txid,
            "lastCommittedTxid": self.last_committed,
            "replayed": self.replayed,
            "attempts": {str(t): a for t, a in sorted(self.attempts.items())},
            "active": [
                {"txid": txid, "attempt": entry[0], "phase": entry[1]}
                for txid, entry in sorted(self.active.items())
            ],
        }
