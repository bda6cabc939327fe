"""The stored values of transactional and opaque map states: pure arithmetic on txids.

- ``TransactionalValue(txid, val)``: ``val`` includes every batch up to ``txid``. A
  batch with that same txid has been applied already, and is skipped (the map does that,
  transactional_map.py).
- ``OpaqueValue(curr_txid, curr, prev)``: ``curr`` includes every batch up to
  ``curr_txid``, ``prev`` every batch before it. A batch with a later txid builds on
  ``curr``; a replay of ``curr_txid`` (perhaps with other tuples) builds on ``prev``
  again; an earlier txid is refused (``BatchBehindError``): commits are strictly
  ordered, so it means two writers or a lost progress store.

A txid of None (a DRPC stream, or a value set outside any batch) is older than any
batch: the next batch builds on ``curr``. Storm's layouts in JSON (docs/trident-state.md):
``{"txid": 3, "val": 5}`` and ``{"currTxid": 3, "curr": 6, "prev": 4}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class BatchBehindError(RuntimeError):
    """A batch's txid is older than the txid a value was last written with. ``key`` is
    the map key when known."""

    def __init__(self, batch_txid: int, state_txid: int, key: object = None) -> None:
        where = "" if key is None else f" for key {key!r}"
        super().__init__(
            f"Current batch ({batch_txid}) is behind state's batch ({state_txid}){where}: "
            f"commits go in txid order, so another writer shares this state or the "
            f"topology's progress store was reset"
        )
        self.batch_txid = batch_txid
        self.state_txid = state_txid
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        return (BatchBehindError, (self.batch_txid, self.state_txid, self.key))


def _is_newer(batch_txid: int | None, stored_txid: int | None) -> bool:
    return batch_txid is None or stored_txid is None or stored_txid < batch_txid


@dataclass(frozen=True, slots=True)
class TransactionalValue:
    txid: int | None
    val: Any

    def to_layout(self) -> dict[str, Any]:
        return {"txid": self.txid, "val": self.val}

    @staticmethod
    def from_layout(d: dict[str, Any]) -> TransactionalValue:
        return TransactionalValue(d["txid"], d["val"])


@dataclass(frozen=True, slots=True)
class OpaqueValue:
    curr_txid: int | None
    curr: Any
    prev: Any = None

    def update(self, batch_txid: int | None, new_val: Any) -> OpaqueValue:
        """The value after batch ``batch_txid`` wrote ``new_val`` (which the caller
        computed from ``get(batch_txid)``)."""
        if _is_newer(batch_txid, self.curr_txid):
            prev = self.curr
        elif batch_txid == self.curr_txid:
            prev = self.prev
        else:
            raise BatchBehindError(batch_txid, self.curr_txid)  # type: ignore[arg-type]
        return OpaqueValue(batch_txid, new_val, prev)

    def get(self, batch_txid: int | None) -> Any:
        """The value batch ``batch_txid`` builds on: ``curr`` for a later batch,
        ``prev`` for a replay of ``curr_txid``."""
        if _is_newer(batch_txid, self.curr_txid):
            return self.curr
        if batch_txid == self.curr_txid:
            return self.prev
        raise BatchBehindError(batch_txid, self.curr_txid)  # type: ignore[arg-type]

    def to_layout(self) -> dict[str, Any]:
        return {"currTxid": self.curr_txid, "curr": self.curr, "prev": self.prev}

    @staticmethod
    def from_layout(d: dict[str, Any]) -> OpaqueValue:
        return OpaqueValue(d["currTxid"], d["curr"], d["prev"])
