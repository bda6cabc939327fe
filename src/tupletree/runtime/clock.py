"""Clocks, injected everywhere time matters, so timeouts are tested in simulated time.

A clock only tells the time; timers live in the worker. ``SimulatedClock`` moves only
when told to (``LocalCluster.advance_time``).
"""

from __future__ import annotations

import time


class RealClock:
    simulated = False

    def now(self) -> float:
        """Seconds on a monotonic clock."""
        return time.monotonic()


class SimulatedClock:
    simulated = True

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, secs: float) -> None:
        if secs < 0:
            raise ValueError(f"cannot move simulated time backwards by {secs}")
        self._now += secs
