"""WindowedBolt: the class users extend (Storm's BaseWindowedBolt).

Lifecycle, per task: ``prepare(conf, context, collector)``; then ``execute(window)``
for each window that fires (a TupleWindow, window.py); ``cleanup()`` when killed. The
collector anchors every emit made in ``execute`` to all of the window's tuples (unless
``anchors`` is given) and does the acking: a tuple is acked as it leaves the window,
failed if ``execute`` raises for a window holding it (see executor.py for the rules).

Configuration methods return the bolt, so they chain: ``with_window(length,
sliding_interval)`` (``Count`` or ``Duration``, all four mixes; no sliding interval:
``Count(1)``, Storm's default), ``with_tumbling_window(length)``,
``with_session_window(gap, key=None)`` (beyond Storm), ``with_timestamp_field(name)`` or
``with_timestamp_extractor(fn)`` (event time, ms), ``with_lag(duration)``,
``with_watermark_interval(duration)``, ``with_late_tuple_stream(stream)``.

The runtime never sees this object directly: ``TopologyBuilder.set_bolt`` runs what
``_runtime_bolt()`` returns (a WindowedBoltExecutor holding it), an ordinary Bolt. A
WindowedBolt is therefore not a ``Bolt``; set it with ``set_bolt``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tupletree.topology.components import OutputFieldsDeclarer
from tupletree.windowing.lengths import Count, Duration
from tupletree.windowing.spec import WindowSpec


def _length(value: Any, method: str, what: str) -> Count | Duration:
    if not isinstance(value, Count | Duration):
        hint = ""
        if isinstance(value, int) and not isinstance(value, bool):
            hint = f" (did you mean Count({value}) or Duration({value})?)"
        raise TypeError(
            f"{method}: the {what} must be Count(n) or Duration(ms), got "
            f"{type(value).__name__} {value!r}{hint}"
        )
    if value.value <= 0:
        raise ValueError(f"{method}: the {what} must be positive, got {value!r}")
    return value


def _duration(value: Any, method: str, positive: bool) -> Duration:
    if not isinstance(value, Duration):
        raise TypeError(f"{method} takes a Duration, got {type(value).__name__} {value!r}")
    if positive and value.value <= 0:
        raise ValueError(f"{method}: the duration must be positive, got {value!r}")
    return value


class WindowedBolt:
    """A bolt that processes windows of tuples. See the module docstring."""

    outputs: list[str] | None = None

    # -- what users override --------------------------------------------------------------

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams; by default from the class attribute ``outputs``."""
        if self.outputs is not None:
            declarer.declare(self.outputs)

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        pass

    def execute(self, window: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass

    # -- configuration ------------------------------------------------------------------

    @property
    def window_spec(self) -> WindowSpec:
        spec = self.__dict__.get("_window_spec")
        if spec is None:
            spec = self.__dict__["_window_spec"] = WindowSpec()
        return spec

    def with_window(
        self, length: Count | Duration, sliding_interval: Count | Duration | None = None
    ) -> WindowedBolt:
        """A sliding window; without ``sliding_interval`` it slides with every tuple."""
        spec = self.window_spec
        spec.length = _length(length, "with_window", "window length")
        spec.slide = (
            Count(1)
            if sliding_interval is None
            else _length(sliding_interval, "with_window", "sliding interval")
        )
        return self

    def with_tumbling_window(self, length: Count | Duration) -> WindowedBolt:
        spec = self.window_spec
        spec.length = spec.slide = _length(length, "with_tumbling_window", "window length")
        return self

    def with_session_window(
        self, gap: Duration, key: str | Iterable[str] | Callable[[Any], Any] | None = None
    ) -> WindowedBolt:
        """Beyond Storm: a window closes once ``gap`` passed without a tuple. ``key``
        (field name(s) or a function of the tuple) keeps one session per key; None, one
        for the task's whole input."""
        spec = self.window_spec
        spec.session_gap = _duration(gap, "with_session_window", positive=True)
        if key is None or callable(key):
            spec.session_key = key
        elif isinstance(key, str):
            spec.session_key = (key,)
        else:
            names = tuple(key)
            if not names or not all(isinstance(n, str) for n in names):
                raise TypeError(
                    "with_session_window: key must be a field name, a list of field names "
                    f"or a function of the tuple, got {key!r}"
                )
            spec.session_key = names
        return self

    def with_timestamp_field(self, name: str) -> WindowedBolt:
        """Event time: each tuple's timestamp (ms) is its field ``name``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"with_timestamp_field takes a field name, got {name!r}")
        spec = self.window_spec
        self._one_timestamp(spec)
        spec.timestamp_field = name
        return self

    def with_timestamp_extractor(self, extractor: Callable[[Any], Any]) -> WindowedBolt:
        """Event time: ``extractor(tuple)`` gives its timestamp (ms). It is copied to the
        tasks with the bolt: a module-level function or a picklable object."""
        if not callable(extractor):
            raise TypeError(
                f"with_timestamp_extractor takes a function of the tuple, got {extractor!r}"
            )
        spec = self.window_spec
        self._one_timestamp(spec)
        spec.timestamp_extractor = extractor
        return self

    @staticmethod
    def _one_timestamp(spec: WindowSpec) -> None:
        if spec.event_time:
            raise ValueError(
                "the window already has a timestamp "
                f"({spec.timestamp_field or spec.timestamp_extractor!r}); set one of "
                "with_timestamp_field and with_timestamp_extractor, once"
            )

    def with_lag(self, lag: Duration) -> WindowedBolt:
        """How far out of order tuples may arrive: the watermark trails the newest
        timestamp by this much."""
        self.window_spec.lag = _duration(lag, "with_lag", positive=False)
        return self

    def with_watermark_interval(self, interval: Duration) -> WindowedBolt:
        """How often the watermark is computed, on the cluster's clock (default 1 s)."""
        self.window_spec.watermark_interval = _duration(
            interval, "with_watermark_interval", positive=True
        )
        return self

    def with_late_tuple_stream(self, stream: str) -> WindowedBolt:
        """Late tuples (behind the watermark) go to this stream, declared for you with
        the one field ``late_tuple``, instead of being dropped."""
        if not isinstance(stream, str) or not stream:
            raise TypeError(f"with_late_tuple_stream takes a stream id, got {stream!r}")
        self.window_spec.late_stream = stream
        return self

    # -- what the builder runs ----------------------------------------------------------

    def _runtime_bolt(self) -> Any:
        from tupletree.windowing.executor import WindowedBoltExecutor

        return WindowedBoltExecutor(self)
