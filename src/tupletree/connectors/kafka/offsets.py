"""PartitionOffsets: which offset of one Kafka partition may be committed (pure).

Kafka remembers one number per partition and group: the offset to resume from. A spout
that acks records out of order may commit only the contiguous prefix of processed
records, or a crash would skip the ones still in flight below the committed offset.
This object keeps, for one partition, the offsets emitted since the last commit and
which of them were acked, and answers the next offset to commit:

- ``emit(offset)`` when a record is emitted the first time (offsets only grow, with
  gaps where a compacted topic or a transaction marker has none);
- ``ack(offset)`` when its tree completed (or it was dead-lettered); ``fail(offset)``
  counts a failure and leaves the offset uncommitted: the spout replays the record
  after its backoff, and nothing at or past it is committed until it is acked;
- ``next_commit()`` the offset to commit (one past the last record of the acked
  prefix; an offset never emitted between two emitted ones does not exist in the
  partition and does not hold the prefix back), or None when nothing new is ready;
  ``committed(offset)`` once Kafka confirmed it;
- ``paused`` while ``uncommitted`` (emitted since the last commit, acked or not)
  reaches ``max_uncommitted``: the spout stops fetching new records of the partition
  (replays go on), which bounds what it holds per partition.

Cost: ``emit``/``ack``/``fail`` O(1); ``next_commit`` walks the acked prefix from the
last commit on each call (and stops at the first offset not acked); memory
O(uncommitted). No I/O, no clock.
"""

from __future__ import annotations

from collections import deque


class PartitionOffsets:
    __slots__ = (
        "_acked",
        "_emitted",
        "_failures",
        "_last",
        "_open",
        "committed_offset",
        "max_uncommitted",
    )

    def __init__(self, start: int, max_uncommitted: int) -> None:
        if start < 0:
            raise ValueError(f"PartitionOffsets: start offset must be >= 0, got {start!r}")
        if max_uncommitted < 1:
            raise ValueError(
                f"PartitionOffsets: max_uncommitted must be >= 1, got {max_uncommitted!r}"
            )
        self.committed_offset = start  # where a restart resumes
        self.max_uncommitted = max_uncommitted
        self._emitted: deque[int] = deque()  # emitted since the last commit, ascending
        self._acked: set[int] = set()
        self._open: set[int] = set()  # emitted, neither acked nor committed
        self._failures: dict[int, int] = {}
        self._last = start - 1  # highest offset emitted (or below the start)

    def emit(self, offset: int) -> None:
        if offset <= self._last:
            raise ValueError(
                f"PartitionOffsets: offset {offset} emitted after {self._last}: offsets of a "
                "partition are emitted once each, in increasing order (replays are not emits)"
            )
        self._emitted.append(offset)
        self._open.add(offset)
        self._last = offset

    def pending(self, offset: int) -> bool:
        """True if ``offset`` was emitted, is not committed and not acked yet."""
        return offset in self._open

    def ack(self, offset: int) -> bool:
        """Mark ``offset`` processed. False (and nothing changes) for an offset that is
        not pending: already acked, committed, or never emitted by this manager."""
        if not self.pending(offset):
            return False
        self._open.discard(offset)
        self._acked.add(offset)
        self._failures.pop(offset, None)
        return True

    def fail(self, offset: int) -> int:
        """Count a failure of a pending ``offset``; returns its failures so far (0 if the
        offset is not pending, e.g. its partition was committed past by another task)."""
        if not self.pending(offset):
            return 0
        count = self._failures.get(offset, 0) + 1
        self._failures[offset] = count
        return count

    def failures(self, offset: int) -> int:
        return self._failures.get(offset, 0)

    def next_commit(self) -> int | None:
        """The offset to commit (the next one to read), or None if it would not move."""
        nxt = self.committed_offset
        acked = self._acked
        for offset in self._emitted:
            if offset not in acked:
                break
            nxt = offset + 1
        return nxt if nxt > self.committed_offset else None

    def committed(self, offset: int) -> None:
        """Kafka confirmed ``offset``: forget everything below it."""
        if offset <= self.committed_offset:
            return
        emitted = self._emitted
        acked = self._acked
        while emitted and emitted[0] < offset:
            gone = emitted.popleft()
            acked.discard(gone)
            self._open.discard(gone)
            self._failures.pop(gone, None)
        self.committed_offset = offset
        if self._last < offset - 1:
            self._last = offset - 1

    @property
    def last_emitted(self) -> int:
        """The highest offset emitted (start - 1 before the first)."""
        return self._last

    @property
    def uncommitted(self) -> int:
        return len(self._emitted)

    @property
    def in_flight(self) -> int:
        """Emitted and neither acked nor committed yet."""
        return len(self._open)

    @property
    def paused(self) -> bool:
        return len(self._emitted) >= self.max_uncommitted

    def __repr__(self) -> str:
        return (
            f"PartitionOffsets(committed={self.committed_offset}, "
            f"uncommitted={self.uncommitted}, acked={len(self._acked)})"
        )
