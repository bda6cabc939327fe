"""BatchReads: what one batch wrote, in front of a backing map (Storm's
CachedBatchReadsMap).

A transactional or opaque map must tell a value it wrote earlier in *this* batch (by an
earlier ``multi_update`` call of the same updater, or an earlier occurrence of the key in
the same call) from a value a *previous attempt* of the same txid wrote: both carry the
current txid, but the first must be built on and the second skipped (transactional) or
rebuilt from ``prev`` (opaque). So the values written since ``begin_commit`` are kept
here and answered from memory, flagged ``cached``.

Cost: one backing ``multi_get`` per ``read`` for the keys not written this batch (none
if all were), one ``multi_put`` per ``write``. Bound: the keys written in one batch by
one partition; ``reset`` (at every ``begin_commit`` and ``commit``) empties it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.trident.state.base import IBackingMap, Key


class BatchReads:
    __slots__ = ("backing", "written")

    def __init__(self, backing: IBackingMap) -> None:
        self.backing = backing
        self.written: dict[Key, Any] = {}

    def reset(self) -> None:
        self.written = {}

    def read(
        self, keys: Sequence[Key], extra: Sequence[Key] = ()
    ) -> tuple[list[tuple[Any, bool]], list[Any]]:
        """``(value, cached)`` for each key, and the values of ``extra`` keys fetched in
        the same backing call (never from the cache)."""
        written = self.written
        missing = [k for k in dict.fromkeys(keys) if k not in written]
        fetch = missing + list(extra)
        got = self.backing.multi_get(fetch) if fetch else []
        if len(got) != len(fetch):
            raise RuntimeError(
                f"backing map {self.backing!r} answered {len(got)} values for {len(fetch)} keys"
            )
        fetched = dict(zip(missing, got, strict=False))
        out = [(written[k], True) if k in written else (fetched[k], False) for k in keys]
        return out, got[len(missing) :]

    def remember(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Answer ``keys`` with ``vals`` from now on, without writing them (a map that
        holds its writes until the batch commits)."""
        self.written.update(zip(keys, vals, strict=True))

    def write(self, keys: Sequence[Key], vals: Sequence[Any], extra: dict[Key, Any]) -> None:
        """Put ``keys``/``vals`` and the ``extra`` entries (not cached) in one call;
        the cache learns them only once the backing took them."""
        if not keys and not extra:
            return
        self.backing.multi_put([*keys, *extra], [*vals, *extra.values()])
        self.written.update(zip(keys, vals, strict=True))
