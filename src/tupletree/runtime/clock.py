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

    # Kept in whole nanoseconds: summing float steps (0.1 ten times is
    # 0.9999999999999999) would make a timer due at 1.0 depend on how time was sliced.
    def __init__(self, start: float = 0.0) -> None:
        self._ns = round(start * 1e9)

    def now(self) -> float:
        return self._ns / 1e9

    def advance(self, secs: float) -> None:
        if secs < 0:
            raise ValueError(f"cannot move simulated time backwards by {secs}")
        self._ns += round(secs * 1e9)
