"""ErrorLogLimiter: which repeated error reports reach the log (Storm's throttle on
error reports, 5 per 10 s per key by default). Plain values in, decisions out, so every
layer can use it: the runtime's workers, the DRPC server, the web view."""

from __future__ import annotations

from collections.abc import Hashable

LOG_BURST = 5
LOG_WINDOW_SECS = 10.0
LOG_MAX_KEYS = 256


class _KeyState:
    __slots__ = ("logged", "start", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.logged = 0
        self.suppressed = 0


class ErrorLogLimiter:
    """Rate limit on logging repeated errors; plain values in, decisions out."""

    OVERFLOW: Hashable = ("<other errors>",)

    def __init__(
        self,
        burst: int = LOG_BURST,
        window: float = LOG_WINDOW_SECS,
        max_keys: int = LOG_MAX_KEYS,
    ) -> None:
        self.burst = burst
        self.window = window
        self.max_keys = max_keys
        self.suppressed_total = 0
        self._keys: dict[Hashable, _KeyState] = {}

    def admit(self, key: Hashable, now: float) -> int | None:
        """None: do not log this report. A number: log it, and say that this many
        reports under the same key were not logged since the last one that was."""
        state = self._keys.get(key)
        if state is None:
            if len(self._keys) >= self.max_keys:
                key = self.OVERFLOW
                state = self._keys.get(key)
            if state is None:
                state = self._keys[key] = _KeyState(now)
        if now - state.start >= self.window:
            state.start = now
            state.logged = 0
        if state.logged < self.burst:
            state.logged += 1
            missed, state.suppressed = state.suppressed, 0
            return missed
        state.suppressed += 1
        self.suppressed_total += 1
        return None
