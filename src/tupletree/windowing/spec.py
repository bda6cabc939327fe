"""WindowSpec: what a windowed bolt's ``with_*`` calls configured, checked in three
places, each naming what is wrong:

- as each ``with_*`` is called: the argument's type and range (TypeError/ValueError);
- when the topology is built (``validate``, from ``declare_output_fields``): the
  combination (a window is set, not two kinds; a late-tuple stream, a lag or a
  watermark interval need a timestamp): InvalidTopologyError naming the component;
- at submit (``check_config``, with the component's full config): the window against
  the message timeout, max spout pending and the cap on held events:
  InvalidConfigError naming the key and both numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tupletree.config import Config
from tupletree.errors import InvalidConfigError, InvalidTopologyError
from tupletree.windowing.lengths import Count, Duration
from tupletree.windowing.manager import EXPIRE_EVENTS_THRESHOLD

DEFAULT_WATERMARK_INTERVAL_MS = 1000  # Storm's
DEFAULT_LAG_MS = 0  # Storm's


@dataclass
class WindowSpec:
    length: Count | Duration | None = None
    slide: Count | Duration | None = None
    session_gap: Duration | None = None
    # None: one session stream per task; a tuple of field names or a function of the
    # tuple: sessions per key.
    session_key: Any = None
    timestamp_field: str | None = None
    timestamp_extractor: Callable[[Any], Any] | None = None
    lag: Duration | None = None
    watermark_interval: Duration | None = None
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None or self.timestamp_extractor is not None

    @property
    def session(self) -> bool:
        return self.session_gap is not None

    @property
    def lag_ms(self) -> int:
        return DEFAULT_LAG_MS if self.lag is None else self.lag.value

    @property
    def watermark_interval_ms(self) -> int:
        if self.watermark_interval is None:
            return DEFAULT_WATERMARK_INTERVAL_MS
        return self.watermark_interval.value

    def describe(self) -> str:
        """One line for people: the web view's, the errors'."""
        if self.session_gap is not None:
            text = f"session gap {self.session_gap.value} ms"
            if self.session_key is not None:
                key = self.session_key
                text += f" per {'key' if callable(key) else ', '.join(key)}"
        elif self.length is not None and self.length == self.slide:
            text = f"tumbling {_show(self.length)}"
        else:
            text = f"{_show(self.length)} sliding {_show(self.slide)}"
        if self.event_time:
            what = self.timestamp_field or "an extractor"
            text += f", event time ({what}, lag {self.lag_ms} ms)"
        return text

    # -- when the topology is built ---------------------------------------------------

    def validate(self, component: str) -> None:
        def refuse(text: str) -> InvalidTopologyError:
            return InvalidTopologyError(f"windowed bolt {component!r}: {text}", component=component)

        if self.length is None and self.session_gap is None:
            raise refuse(
                "no window is set; call with_window(length, sliding_interval), "
                "with_tumbling_window(length) or with_session_window(gap)"
            )
        if self.length is not None and self.session_gap is not None:
            raise refuse(
                "both a sliding/tumbling window and a session window are set; a bolt has "
                "one window: keep with_window/with_tumbling_window or with_session_window"
            )
        if not self.event_time:
            for what, value in (
                ("with_late_tuple_stream", self.late_stream),
                ("with_lag", self.lag),
                ("with_watermark_interval", self.watermark_interval),
            ):
                if value is not None:
                    raise refuse(
                        f"{what} needs event time: set with_timestamp_field(name) or "
                        "with_timestamp_extractor(fn) (late tuples and watermarks are "
                        "about the tuples' own timestamps)"
                    )

    # -- at submit ----------------------------------------------------------------------

    def count_bound(self) -> int | None:
        """How many events a processing-time count window can hold at most (its length
        plus the events added before the next scan), None where only the cap bounds it
        (duration and event-time windows, sessions)."""
        if self.event_time or not isinstance(self.length, Count):
            return None
        if isinstance(self.slide, Count):
            return self.length.value + min(self.slide.value, EXPIRE_EVENTS_THRESHOLD)
        return self.length.value + EXPIRE_EVENTS_THRESHOLD

    def held_duration_ms(self) -> int | None:
        """How long the window holds a tuple, as Storm's check counts it: length + slide
        when both are durations, else the one that is; a session's gap."""
        if self.session_gap is not None:
            return self.session_gap.value
        durations = [d.value for d in (self.length, self.slide) if isinstance(d, Duration)]
        return sum(durations) if durations else None

    def held_count(self) -> int | None:
        """How many tuples must be in flight for a count window to fire, as Storm's check
        counts them: length + slide when both are counts, else the one that is."""
        if self.session_gap is not None:
            return None
        counts = [c.value for c in (self.length, self.slide) if isinstance(c, Count)]
        return sum(counts) if counts else None

    def check_config(self, conf: dict[str, Any], component: str, persistent: bool) -> None:
        """Refuse at submit what cannot work (Storm's WindowedBoltExecutor.validate, plus
        the cap on held events). A persistent window acks its input at checkpoints, not
        as it leaves the window: the timeout and max-pending rules do not apply to it."""
        tracked = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) != 0
        timeouts = conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) and tracked
        held_ms = self.held_duration_ms()
        if not persistent and timeouts and held_ms is not None:
            secs = conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS]
            if held_ms > secs * 1000:
                what = "session gap" if self.session else "window length + sliding interval"
                # Session windows cannot be persistent (persistent.py refuses them).
                remedy = (
                    "shorten the gap"
                    if self.session
                    else "shorten the window, or make it persistent"
                )
                raise InvalidConfigError(
                    f"windowed bolt {component!r}: its {what} is {held_ms} ms, more than "
                    f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} = {secs} s ({secs * 1000:g} "
                    "ms); a window acks its tuples only as they leave it, so they would "
                    "time out and be replayed while still in the window. Raise the "
                    f"timeout to at least {math.ceil(held_ms / 1000)} s or {remedy}",
                    key=Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS,
                    value=secs,
                )
        pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        count = self.held_count()
        if not persistent and tracked and pending is not None and (count or 0) > pending:
            raise InvalidConfigError(
                f"windowed bolt {component!r}: its window length + sliding interval "
                f"is {count} tuples, more than {Config.TOPOLOGY_MAX_SPOUT_PENDING} = "
                f"{pending}; a window holds its tuples unacked until they leave it, "
                "so a spout held to that many pending tuples could never fill it. "
                f"Raise max spout pending to at least {count} or shrink the window",
                key=Config.TOPOLOGY_MAX_SPOUT_PENDING,
                value=pending,
            )
        cap = conf.get(Config.TOPOLOGY_WINDOW_MAX_EVENTS)
        bound = self.count_bound()
        if cap is not None and bound is not None and bound > cap:
            raise InvalidConfigError(
                f"windowed bolt {component!r}: its count window holds up to {bound} "
                f"tuples (length + the events added between two scans), more than "
                f"{Config.TOPOLOGY_WINDOW_MAX_EVENTS} = {cap}. Raise that key (for this "
                "bolt: add_configuration) or shrink the window",
                key=Config.TOPOLOGY_WINDOW_MAX_EVENTS,
                value=cap,
            )


def _show(x: Count | Duration | None) -> str:
    if isinstance(x, Count):
        return f"{x.value} tuples"
    if isinstance(x, Duration):
        return f"{x.value} ms"
    return "?"
