"""Exactly-once sinks: what every one shares (beyond Storm, whose Trident sinks ignore
``begin_commit``/``commit`` and so write a replayed batch twice).

A sink state buffers its partition's tuples of one batch (``SinkUpdater`` hands them
over as rows: each tuple's values, in the order of the fields given to
``partition_persist``) and, in ``commit(txid)``, writes them **and** the partition's
last committed txid in one transaction of its own store, after reading that txid inside
the same transaction:

- ``txid`` above the last committed one (or none yet): write the rows, record ``txid``;
- ``txid`` equal to it: this batch was committed already (a replay after the commit,
  e.g. a lost ack): skip it, writing nothing;
- ``txid`` below it: refused (``BatchBehindError``): commits go in txid order, so a
  zombie task or a reset progress store is writing.
- ``txid`` None (a DRPC stream): the rows are written, no txid recorded.

This is exactly once only when a replayed txid brings the *same rows to the same
partition*: a transactional spout, and no shuffle (random routing) between it and the
sink. So the factories say ``state_type = TRANSACTIONAL`` and
``requires_deterministic_batches = True``; the planner refuses them otherwise.

A topology submitted again with another parallelism for the sink breaks "the same
partition": a txid the old layout had committed, in whole or in part, when it died
(before the coordinator recorded it) is replayed with its rows dealt to other
partitions, and a partition index that did not exist before has no txid at all. So each
partition records, beside its txid, how many partitions there were (every partition,
every batch, empty ones too: ``commit_empty_batches``), and ``decide_in_layout`` looks
at all of them: a txid every old partition committed is skipped whole; one that only
some did is refused (SinkLayoutError, which says to finish it with the old
parallelism), since its rows cannot be told apart; otherwise the rules above. A record
from before partition counts were kept counts as the current layout's.

Bound: one batch's rows of one partition, held between ``begin_commit`` and ``commit``.
``decide`` is the whole decision, pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from tupletree.trident.state.base import State, StateFactory, StateType
from tupletree.trident.state.operations import BaseStateUpdater
from tupletree.trident.state.values import BatchBehindError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def decide(txid: int | None, last: int | None, *, partition: int) -> bool:
    """Whether a batch ``txid`` is written, given the partition's ``last`` committed
    txid (module docstring); BatchBehindError when it is behind."""
    if txid is None or last is None or txid > last:
        return True
    if txid == last:
        return False
    raise BatchBehindError(txid, last, key=f"sink partition {partition}")


class Mark(NamedTuple):
    """A partition's record: its last committed txid, and the partition count it was
    written under (None: written before counts were kept)."""

    txid: int | None
    partitions: int | None


class SinkLayoutError(RuntimeError):
    """A replayed txid was committed by only some partitions of the sink's earlier
    layout (another parallelism): its rows cannot be told apart under the new one."""

    def __init__(self, where: str, txid: int, earlier: dict[int, Mark], now: int) -> None:
        counts = sorted({m.partitions for m in earlier.values() if m.partitions is not None})
        committed = sorted(q for q, m in earlier.items() if m.txid is not None and m.txid >= txid)
        super().__init__(
            f"{where}: batch {txid} was committed by partitions {committed} of the earlier "
            f"layout of {' or '.join(map(str, counts))} partitions and not by the others; "
            f"under {now} partitions its rows would be written twice or lost. Submit the "
            f"topology with the sink's earlier parallelism until batch {txid} has "
            "committed, then change it"
        )
        self.where, self.txid, self.earlier, self.now = where, txid, earlier, now

    def __reduce__(self) -> tuple[Any, ...]:
        return (SinkLayoutError, (self.where, self.txid, self.earlier, self.now))


def decide_in_layout(
    txid: int | None,
    marks: Mapping[int, Mark],
    *,
    partition: int,
    partitions: int,
    where: str,
) -> bool:
    """Whether partition ``partition`` of ``partitions`` writes batch ``txid``, given
    every partition's record in ``marks`` (module docstring): False when an earlier
    layout committed the whole batch; SinkLayoutError when it committed a part;
    else ``decide`` on the partition's own last txid."""
    if txid is None:
        return True
    earlier = {
        q: m for q, m in marks.items() if m.partitions is not None and m.partitions != partitions
    }
    ahead = {q: m for q, m in earlier.items() if m.txid is not None and m.txid >= txid}
    if ahead:
        counts = {m.partitions for m in ahead.values()}
        if len(counts) == 1:
            (count,) = counts
            if all(q in ahead and ahead[q].partitions == count for q in range(count)):
                return False  # the earlier layout committed all of it
        raise SinkLayoutError(where, txid, earlier, partitions)
    own = marks.get(partition)
    return decide(txid, None if own is None else own.txid, partition=partition)


def check_identifier(what: str, name: object) -> str:
    """``name`` if it is an SQL identifier needing no quotes; ValueError naming it."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise ValueError(
            f"{what} {name!r} must be letters, digits and '_', not starting with a digit, "
            "up to 63 characters"
        )
    return name


class SinkState(State):
    """One partition of a sink: rows buffered per batch, written by ``write``."""

    state_type = StateType.TRANSACTIONAL
    #: Every partition records every txid, with or without rows (module docstring).
    commit_empty_batches = True

    def __init__(
        self, where: str, columns: Sequence[str] | None, partition: int, partitions: int = 1
    ) -> None:
        self.where = where  # names the sink in errors: its table or stream, its store
        self.columns = None if columns is None else list(columns)
        self.partition, self.partitions = partition, partitions
        self._rows: list[list[Any]] = []
        self._tx: int | None = None

    def begin_commit(self, txid: int | None) -> None:
        self._tx = txid
        self._rows = []

    def add(self, rows: Sequence[Sequence[Any]], fields: Sequence[str] | None = None) -> None:
        """Buffer ``rows`` for this batch; ``fields`` (the tuples' field names) name the
        columns when the factory was given none."""
        if self.columns is None:
            if fields is None:
                raise ValueError(f"{self.where}: give the sink its columns (columns=[...])")
            self.columns = list(fields)
        width = len(self.columns)
        for row in rows:
            if len(row) != width:
                raise ValueError(
                    f"{self.where}: a row of {len(row)} values {list(row)!r} for the "
                    f"{width} columns {self.columns}"
                )
            self._rows.append(list(row))

    def commit(self, txid: int | None) -> None:
        rows, self._rows = self._rows, []
        if rows or txid is not None:
            self.write(txid, rows)

    def write(self, txid: int | None, rows: list[list[Any]]) -> bool:
        """Write ``rows`` and record ``txid`` with the partition count in one
        transaction if ``decide_in_layout`` says so; whether it wrote."""
        raise NotImplementedError

    def decide(self, txid: int | None, marks: Mapping[int, Mark]) -> bool:
        return decide_in_layout(
            txid, marks, partition=self.partition, partitions=self.partitions, where=self.where
        )

    def last_committed_txid(self) -> int | None:
        """The partition's last committed txid, as stored (None: nothing yet)."""
        raise NotImplementedError


class SinkFactory(StateFactory):
    state_type = StateType.TRANSACTIONAL
    requires_deterministic_batches = True


class SinkUpdater(BaseStateUpdater):
    """Hands a batch's tuples to a sink state as rows (each tuple's values)."""

    def update_state(self, state: State, tuples: list[Any], collector: Any) -> None:
        if not isinstance(state, SinkState):
            raise TypeError(
                f"SinkUpdater writes to an exactly-once sink state, not {type(state).__name__}"
            )
        fields = getattr(tuples[0], "fields", None) if tuples else None
        state.add([list(t.values) for t in tuples], None if fields is None else list(fields))
