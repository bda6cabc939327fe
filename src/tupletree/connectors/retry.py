"""RetryPolicy: how often and how late a broker spout replays a failed message.

Pure and immutable: ``delay(failures)`` is the wait before the replay that follows the
``failures``-th failure, ``initial_delay_secs * 2 ** (failures - 1)`` capped at
``max_delay_secs`` (Storm's exponential backoff, without jitter); ``exhausted(failures)``
is True once a message failed more than ``max_retries`` times, when its spout writes it
to the dead letter (or drops it, logged, without one) and acknowledges it at the source.
``max_retries=None`` retries forever. The same policy paces reconnects to a broker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tupletree.errors import InvalidConfigError


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int | None = None
    initial_delay_secs: float = 0.0
    max_delay_secs: float = 10.0

    def __post_init__(self) -> None:
        mr = self.max_retries
        if mr is not None and (isinstance(mr, bool) or not isinstance(mr, int) or mr < 0):
            raise InvalidConfigError(
                f"RetryPolicy max_retries must be None or an integer >= 0, got {mr!r}",
                key="max_retries",
                value=mr,
            )
        for key in ("initial_delay_secs", "max_delay_secs"):
            value = getattr(self, key)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise InvalidConfigError(
                    f"RetryPolicy {key} must be a finite number >= 0, got {value!r}",
                    key=key,
                    value=value,
                )
        if self.initial_delay_secs > self.max_delay_secs:
            raise InvalidConfigError(
                f"RetryPolicy initial_delay_secs ({self.initial_delay_secs}) must not exceed "
                f"max_delay_secs ({self.max_delay_secs})",
                key="initial_delay_secs",
                value=self.initial_delay_secs,
            )

    def delay(self, failures: int) -> float:
        """Seconds to wait before the replay after the ``failures``-th failure (>= 1)."""
        if failures < 1 or self.initial_delay_secs == 0:
            return 0.0
        # Capped before it can overflow: 2 ** 64 times any delay is past any cap.
        exponent = min(failures - 1, 64)
        return min(self.max_delay_secs, self.initial_delay_secs * 2.0**exponent)

    def exhausted(self, failures: int) -> bool:
        """True once ``failures`` is more than ``max_retries`` (never with None)."""
        return self.max_retries is not None and failures > self.max_retries
