"""TransactionalMap: a map state that skips a batch it has already applied (Storm's
TransactionalMap), over a backing map of ``TransactionalValue``.

Rule (``multi_update``, batch ``txid``): a key whose stored txid equals ``txid`` and
that was not written earlier in this same batch already holds this batch's update (an
earlier attempt of the txid wrote it): it is left alone and its stored value returned.
Any other key gets ``updater(val)`` stored with ``txid``. Exactly once only when a
replayed txid brings the same tuples (a transactional spout).

A key repeated within one ``multi_update`` call sees the value its earlier occurrence
produced (Storm's would compute both from the stored value and keep the last), so the
updaters of one key compose in order.

Within a batch the writes are held (answered from BatchReads) and put in one backing
``multi_put`` at ``commit``: an attempt that fails part-way leaves nothing behind. The
rule above needs that: a key stored with the txid must hold the *whole* batch's effect.
Written through, an updater calling ``multi_update`` once per tuple left a key with part
of it after a failure, and the replay then skipped the rest too (beyond Storm, whose
TransactionalMap writes through and assumes one update per key per batch).

I/O per ``multi_update``: at most one backing ``multi_get`` (keys not yet written this
batch); per batch one ``multi_put`` at ``commit`` (only the keys that changed). Memory:
the batch's changed keys until its commit. Storage: txid + one value.
Storm leaves one case open and so does this: a stored txid *above* the batch's (a
progress store reset) is overwritten as if older.
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
from tupletree.trident.state.values import TransactionalValue


class TransactionalMap(MapState):
    state_type = StateType.TRANSACTIONAL

    def __init__(self, backing: IBackingMap) -> None:
        self._reads = BatchReads(backing)
        self._tx: int | None = None
        self._held: dict[Key, TransactionalValue] = {}  # this batch's writes

    @classmethod
    def build(cls, backing: IBackingMap) -> TransactionalMap:
        return cls(backing)

    def begin_commit(self, txid: int | None) -> None:
        self._tx = txid
        self._reads.reset()
        self._held = {}  # an attempt that failed before its commit: dropped

    def commit(self, txid: int | None) -> None:
        held, self._held = self._held, {}
        if held:
            self._reads.write(list(held), list(held.values()), {})
        self._tx = None
        self._reads.reset()

    def _write(self, changed: dict[Key, TransactionalValue]) -> None:
        if self._tx is None:  # outside a batch: nothing to hold them for
            self._reads.write(list(changed), list(changed.values()), {})
            return
        self._reads.remember(list(changed), list(changed.values()))
        self._held.update(changed)

    def multi_get(self, keys: Sequence[Sequence[Any]]) -> list[Any]:
        got, _ = self._reads.read(as_keys(keys))
        return [None if v is None else v.val for v, _cached in got]

    def multi_update(
        self, keys: Sequence[Sequence[Any]], updaters: Sequence[ValueUpdater]
    ) -> list[Any]:
        ks = as_keys(keys)
        check_lengths("TransactionalMap.multi_update", ks, updaters)
        got, _ = self._reads.read(ks)
        tx = self._tx
        changed: dict[Key, TransactionalValue] = {}
        out = []
        for key, (val, cached), updater in zip(ks, got, updaters, strict=True):
            if key in changed:
                val, cached = changed[key], True
            if val is not None and tx is not None and val.txid == tx and not cached:
                out.append(val.val)  # this txid was applied by an earlier attempt
                continue
            new = TransactionalValue(tx, updater(None if val is None else val.val))
            changed[key] = new
            out.append(new.val)
        self._write(changed)
        return out

    def multi_put(self, keys: Sequence[Sequence[Any]], vals: Sequence[Any]) -> None:
        ks = as_keys(keys)
        check_lengths("TransactionalMap.multi_put", ks, vals)
        latest = {k: TransactionalValue(self._tx, v) for k, v in zip(ks, vals, strict=True)}
        self._write(latest)
