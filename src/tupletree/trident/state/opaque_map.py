"""OpaqueMap: a map state that recomputes a replayed batch from the value before it
(Storm's OpaqueMap), over a backing map of ``OpaqueValue``.

Rule (``multi_update``, batch ``txid``): the updater is applied to ``get(txid)`` of the
stored value (``curr`` for a newer batch, ``prev`` for a replay of ``curr_txid``), or
to ``curr`` if this batch wrote the key already; the result is stored as
``update(txid, new)``. Exactly once even when a replayed txid brings other tuples (an
opaque spout), with the fix below.

Beyond Storm: a replay that no longer touches a key. If attempt 1 of txid 3 updated
key B and the final attempt of txid 3 does not (its tuples went to a later batch, as an
opaque spout may do), Storm leaves B at attempt 1's ``curr``, and txid 4 builds on it:
B's tuples count twice. Built with ``partition=`` (every factory here does), the map
keeps a *batch record* under the reserved key ``("$tupletree-opaque-batch$",
partition, partitions)``: an ``OpaqueValue`` whose ``curr`` lists every key any attempt of the
current txid wrote. It is read in the batch's one ``multi_get`` and written in its one
``multi_put``; at ``commit(txid)``, keys an earlier attempt wrote and this one did not
go back to their ``prev`` (``OpaqueValue(txid, prev, prev)``), in one more get and put,
only then. The committer must frame every batch, empty ones included
(``commit_empty_batches`` is True): an attempt that sends this partition nothing must
still revert what an earlier one wrote. Cost: the record holds the keys of one batch
(one partition), written once per batch; a replay adds its keys to it.

A topology submitted again with another parallelism for the state (``partitions``
changed) starts records of its own layout: the old layout's records are not read. So a
txid that the old layout had begun to commit when it died is replayed with Storm's
behaviour for the keys an old attempt wrote and the replay does not (docs/trident-state.md,
"Changing parallelism"): exact behind a transactional spout, whose replay brings the
same tuples; behind an opaque spout whose replay skips a partition, those keys keep the
old attempt's value.

I/O per ``multi_update``: one backing ``multi_get`` (keys not yet written this batch,
plus the record on the batch's first call) and one ``multi_put``. Storage per key: txid
and two values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import (
    IBackingMap,
    Key,
    MapState,
    StateType,
    ValueUpdater,
    as_keys,
    check_lengths,
)
from tupletree.trident.state.batch_reads import BatchReads
from tupletree.trident.state.values import BatchBehindError, OpaqueValue

BATCH_RECORD = "$tupletree-opaque-batch$"


def freeze(value: Any) -> Any:
    """A key read back from JSON: its lists as tuples again (keys are hashable, so a
    list inside one was a tuple when it was written)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def _thaw(key: Key) -> list[Any]:
    return [_thaw(v) if isinstance(v, tuple) else v for v in key]


class OpaqueMap(MapState):
    state_type = StateType.OPAQUE

    def __init__(
        self, backing: IBackingMap, partition: int | None = None, partitions: int | None = None
    ) -> None:
        self._backing = backing
        self._reads = BatchReads(backing)
        self._tx: int | None = None
        # The record is one layout's (partition ``partition`` of ``partitions``): after a
        # resubmit with another parallelism a partition holds other keys than before, and
        # reverting what the old partition of its index wrote would undo what the key's
        # new partition just recomputed.
        self._record_key: Key | None = (
            None if partition is None else (BATCH_RECORD, partition, partitions or 1)
        )
        #: Frame empty batches too: see the module's docstring.
        self.commit_empty_batches = partition is not None
        # The keys earlier attempts of this txid wrote, as recorded (None: not read yet
        # this batch), and the keys the stored record holds (to write it only when it
        # grows).
        self._earlier: list[Key] | None = None
        self._recorded: set[Key] = set()

    @classmethod
    def build(
        cls, backing: IBackingMap, *, partition: int | None = None, partitions: int = 1
    ) -> OpaqueMap:
        """``partition`` (the state's partition index, of ``partitions``) turns on the
        batch record (module docstring); without it, Storm's behaviour exactly."""
        return cls(backing, partition, partitions)

    def _tracking(self) -> bool:
        return self._record_key is not None and self._tx is not None

    def begin_commit(self, txid: int | None) -> None:
        self._tx = txid
        self._reads.reset()
        self._earlier = None

    def commit(self, txid: int | None) -> None:
        try:
            if self._tracking() and txid == self._tx:
                self._revert_earlier_attempts()
        finally:
            self._tx = None
            self._reads.reset()
            self._earlier = None

    def _load_record(self, stored: OpaqueValue | None) -> list[Key]:
        tx = self._tx
        assert tx is not None
        if stored is None or stored.curr_txid is None or stored.curr_txid < tx:
            self._recorded = set()
            return []
        if stored.curr_txid > tx:
            raise BatchBehindError(tx, stored.curr_txid, key=self._record_key)
        keys = [freeze(k) for k in stored.curr]
        self._recorded = set(keys)
        return keys

    def _revert_earlier_attempts(self) -> None:
        if self._earlier is None:  # no update this batch: read the record now
            assert self._record_key is not None
            (stored,) = self._backing.multi_get([self._record_key])
            self._earlier = self._load_record(stored)
        written = self._reads.written
        stale = [k for k in self._earlier if k not in written]
        if not stale:
            return
        tx = self._tx
        back = {}
        for key, val in zip(stale, self._backing.multi_get(stale), strict=True):
            if val is not None and val.curr_txid == tx and val.curr != val.prev:
                back[key] = OpaqueValue(tx, val.prev, val.prev)
        if back:
            self._backing.multi_put(list(back), list(back.values()))

    def _base(self, val: OpaqueValue, key: Key) -> Any:
        try:
            return val.get(self._tx)
        except BatchBehindError as exc:
            raise BatchBehindError(exc.batch_txid, exc.state_txid, key=key) from None

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        got, _ = self._reads.read(as_keys(keys))
        out = []
        for key, (val, cached) in zip(keys, got, strict=True):
            out.append(None if val is None else val.curr if cached else self._base(val, key))
        return out

    def multi_update(
        self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]
    ) -> list[Any]:
        ks = as_keys(keys)
        check_lengths("OpaqueMap.multi_update", ks, updaters)
        tracking = self._tracking()
        extra = [self._record_key] if tracking and self._earlier is None else []
        got, fetched = self._reads.read(ks, extra)  # type: ignore[arg-type]
        if extra:
            self._earlier = self._load_record(fetched[0])
        tx = self._tx
        new: dict[Key, OpaqueValue] = {}
        out = []
        for key, (val, cached), updater in zip(ks, got, updaters, strict=True):
            if key in new:
                val, cached = new[key], True
            if val is None:
                value = updater(None)
                new[key] = OpaqueValue(tx, value)
            else:
                value = updater(val.curr if cached else self._base(val, key))
                new[key] = val.update(tx, value)
            out.append(value)
        record: dict[Key, Any] = {}
        if tracking:
            assert self._record_key is not None and self._earlier is not None
            grown = [k for k in new if k not in self._recorded]
            if grown:
                self._earlier.extend(grown)
                self._recorded.update(grown)
                record[self._record_key] = OpaqueValue(tx, [_thaw(k) for k in self._earlier])
        self._reads.write(list(new), list(new.values()), record)
        return out

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any]) -> None:
        check_lengths("OpaqueMap.multi_put", keys, vals)
        self.multi_update(keys, [_Replace(v) for v in vals])


class _Replace:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _old: Any) -> Any:
        return self.value
