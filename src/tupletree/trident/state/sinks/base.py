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

Bound: one batch's rows of one partition, held between ``begin_commit`` and ``commit``.
``decide`` is the whole decision, pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

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

    def __init__(self, where: str, columns: Sequence[str] | None, partition: int) -> None:
        self.where = where  # names the sink in errors: its table or stream, its store
        self.columns = None if columns is None else list(columns)
        self.partition = partition
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
        if rows:
            self.write(txid, rows)

    def write(self, txid: int | None, rows: list[list[Any]]) -> bool:
        """Write ``rows`` and record ``txid`` in one transaction if ``decide`` says so;
        whether it wrote."""
        raise NotImplementedError

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
