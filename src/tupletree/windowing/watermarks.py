"""WatermarkGenerator: how far event time has surely progressed, from plain values.

Storm's WaterMarkEventGenerator without its thread: the bolt calls ``compute()`` every
watermark interval on the cluster's clock. Rules, as Storm's:

- ``track(stream, ts)`` records the newest timestamp seen on each input stream (a
  ``(component, stream)`` pair) and answers whether the event is on time: its
  timestamp is at or after the last watermark (a late event is not added to any window).
- The watermark is the minimum over the input streams of their newest timestamp, less
  the lag; there is none until every input stream has delivered an event, and a new
  one is produced only when it is greater than the last.

Unlike Storm, there is no watermark before the first (Storm starts from 0, so events
stamped at or before 0 ms were all late there).

State: ``state()`` gives ``{"newest": [[component, stream, ts], ...], "last": ts}``
(plain values) and ``restore(state)`` puts it back. Memory: one entry per input stream.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any


class WatermarkGenerator:
    def __init__(self, streams: Iterable[Hashable], lag_ms: int) -> None:
        self.streams = frozenset(streams)
        self.lag_ms = lag_ms
        self.newest: dict[Any, int] = {}
        self.last: int | None = None

    def track(self, stream: Hashable, ts: int) -> bool:
        """Record ``ts`` for ``stream``; False if the event is late (before the last
        watermark)."""
        self.record(stream, ts)
        return not self.is_late(ts)

    def is_late(self, ts: int) -> bool:
        last = self.last
        return last is not None and ts < last

    def record(self, stream: Hashable, ts: int) -> None:
        """Count ``ts`` as seen on ``stream`` (the bolt records only what it accepts: a
        tuple it refuses comes back and must not have moved the watermark)."""
        newest = self.newest.get(stream)
        if newest is None or ts > newest:
            self.newest[stream] = ts

    def candidate(self) -> int | None:
        """The watermark the streams allow now (None until every one delivered)."""
        newest = self.newest
        if self.streams:
            if any(s not in newest for s in self.streams):
                return None
            low = min(newest[s] for s in self.streams)
        elif newest:
            low = min(newest.values())
        else:
            return None
        return low - self.lag_ms

    def compute(self) -> int | None:
        """A new watermark if it advanced since the last one (and remember it), else
        None."""
        wm = self.candidate()
        if wm is None or (self.last is not None and wm <= self.last):
            return None
        self.last = wm
        return wm

    def missing(self) -> list[Any]:
        """The input streams that have delivered nothing yet (why there is no
        watermark)."""
        return sorted((s for s in self.streams if s not in self.newest), key=repr)

    def state(self) -> dict[str, Any]:
        return {
            "newest": [
                [*stream, ts] if isinstance(stream, tuple) else [stream, ts]
                for stream, ts in self.newest.items()
            ],
            "last": self.last,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.newest = {}
        for entry in state["newest"]:
            *stream, ts = entry
            self.newest[tuple(stream) if len(stream) > 1 else stream[0]] = ts
        self.last = state["last"]
