"""The spout's pending map: tuple trees a spout task has emitted and not yet settled.

Keyed by root id; the value is ``(msg_id, emit_time)``. It is a RotatingMap of
``SPOUT_PENDING_BUCKETS`` buckets rotated once per message timeout, so a tree not acked
within the timeout is expired (the spout's ``fail``) after between 1 and 2 timeouts.
An ack or fail for a root no longer pending (it timed out, or was already settled) is
dropped: the spout hears about each message id once.
"""

from __future__ import annotations

from typing import Any

from tupletree.reliability.ids import Id
from tupletree.reliability.protocol import SPOUT_PENDING_BUCKETS
from tupletree.reliability.rotating_map import RotatingMap


class SpoutPending:
    __slots__ = ("_map",)

    def __init__(self, num_buckets: int = SPOUT_PENDING_BUCKETS) -> None:
        self._map: RotatingMap[Id, tuple[Any, float]] = RotatingMap(num_buckets)

    def add(self, root: Id, msg_id: Any, emit_time: float) -> None:
        self._map.put_new(root, (msg_id, emit_time))

    def settle(self, root: Id) -> tuple[Any, float] | None:
        """Remove and return ``(msg_id, emit_time)``, or None if not pending."""
        return self._map.remove(root)

    def reset(self, root: Id) -> bool:
        """Restart the tree's countdown; False if it is no longer pending."""
        return self._map.touch(root) is not None

    def msg_id(self, root: Id) -> Any:
        """The msg id of a pending tree (None if it is not pending)."""
        entry = self._map.get(root)
        return None if entry is None else entry[0]

    def rotate(self) -> list[tuple[Id, Any, float]]:
        """Expire the oldest cohort: ``[(root, msg_id, emit_time), ...]`` timed out."""
        return [(root, entry[0], entry[1]) for root, entry in self._map.rotate().items()]

    def __contains__(self, root: object) -> bool:
        return root in self._map

    def __len__(self) -> int:
        return len(self._map)
