"""WindowedBoltExecutor: the ordinary Bolt the runtime runs for a WindowedBolt (Storm's
WindowedBoltExecutor), thin around the pure WindowManager / SessionManager.

Per input tuple (``execute``): time-driven work that is due first (so a tuple never
joins a window that ended before it arrived); its timestamp (event time: the field or
the extractor, ms; else its arrival on the cluster's clock, ``context.now()``); late
(event time, before the last watermark): emitted on the late-tuple stream if one is set
(field ``late_tuple``, a DetachedTuple, anchored to the input), then acked at once;
over the cap: failed at once (its spout replays it); else added to the window, and the
outcomes applied in order: expired tuples acked, fired windows executed.

Time: the watermark (every ``with_watermark_interval``), processing-time slides and
session closes run from ``context.call_each_round``: every round of the worker, busy
or idle, a comparison of ``context.now()`` with the next due time, and work only when
due. Chosen over tick tuples because ticks are whole-second, per-component config
that a bolt cannot set for itself, and queue behind input, while a round hook reads
the same clock the worker's timers do (simulated on ``LocalCluster(simulate_time=
True)``, so ``advance_time`` drives windows exactly), to the millisecond, and costs
one comparison per round. Due times are also checked on each input tuple.

Acking and anchoring (Storm's): a tuple is acked when it leaves the window (expires;
a session's tuples right after its window ran); every emit made in ``execute`` is
anchored to all the tuples of the window, unless the emit names its own ``anchors``.
The bolt must not ack or fail window tuples itself (the collector refuses, saying so).

Where Storm leaves a hole, filled here:

- ``execute(window)`` raises: every tuple of that window not yet acked is failed (so
  its spout replays it; in event time a replayed tuple behind the watermark is late and
  goes to the late stream), leaves the window (later windows never hold it), and the
  error is reported as a WindowFailedError naming the window, caused by the user's.
- Memory: a task holds at most ``tupletree.window.max.events`` events (default 100,000;
  a processing-time count window, whose bound is its length plus the events between
  two scans, is checked against it at submit). At the cap, new input is failed at once
  (not accepted: nothing accepted is dropped) and a WindowFullError is reported at most
  every 10 s on the cluster clock, naming the cap, the key and (event time) the input
  streams that hold the watermark back. A window's ``get_expired()`` lists at most the
  cap's number of tuples (the newest).
- Ticks reaching a windowed bolt are ignored (Storm would put them in the window).

Custom metric ``window`` (``cluster.metrics(name)[bolt]["custom"]["window"][task]``),
shown by the web view: the window, ``watermark_ms``, ``held``, ``cap``, ``late``,
``refused``, ``windows``, ``failed_windows``, ``last_window_size``, ``sessions``.

State for persistent windows: ``window_state(encode)`` / ``restore_window_state(state,
decode)`` (the manager's queue and policies, the watermark generator) in plain values.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable, Iterable
from typing import Any

from tupletree.config import DEFAULTS, Config
from tupletree.errors import InvalidTopologyError
from tupletree.topology.components import DEFAULT_STREAM, Bolt, check_called_methods
from tupletree.windowing.manager import Expired, Fired, make_manager
from tupletree.windowing.sessions import SessionManager
from tupletree.windowing.watermarks import WatermarkGenerator
from tupletree.windowing.window import DetachedTuple, TupleWindow

log = logging.getLogger("tupletree.windowing")

LATE_TUPLE_FIELD = "late_tuple"  # Storm's WindowedBoltExecutor.LATE_TUPLE_FIELD
# Storm's checkpoint stream: not an input for the watermark (StatefulWindowedBolt's).
CHECKPOINT_STREAM = "$checkpoint"
REFUSAL_REPORT_MS = 10_000
NEVER = float("inf")


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:
        text = "<str() raised>"
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


class WindowFailedError(RuntimeError):
    """``execute(window)`` raised; the window's tuples were failed (``__cause__`` is
    what the bolt raised). ``component``, ``tuples`` and ``end_ts`` name the window."""

    def __init__(self, message: str, component: str, tuples: int, end_ts: int | None) -> None:
        super().__init__(message)
        self.component = component
        self.tuples = tuples
        self.end_ts = end_ts


class WindowFullError(RuntimeError):
    """A windowed bolt task holds its cap of events and failed new input."""

    def __init__(self, message: str, component: str, held: int, cap: int) -> None:
        super().__init__(message)
        self.component = component
        self.held = held
        self.cap = cap


class TimestampError(ValueError):
    """An input tuple has no usable event-time timestamp (missing field, not a number)."""

    def __init__(self, message: str, component: str, stream: str) -> None:
        super().__init__(message)
        self.component = component
        self.stream = stream


class WindowedOutputCollector:
    """What a WindowedBolt's ``prepare`` gets: emits inside ``execute`` are anchored to
    the window's tuples (``anchors``, set around each ``execute``)."""

    __slots__ = ("_component", "_out", "anchors")

    def __init__(self, out: Any, component: str) -> None:
        self._out = out
        self._component = component
        self.anchors: list[Any] | None = None

    def emit(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, self.anchors if anchors is None else anchors, stream)

    def emit_direct(
        self, task: int, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        return self._out.emit_direct(
            task, values, self.anchors if anchors is None else anchors, stream
        )

    def _refuse(self, what: str) -> TypeError:
        return TypeError(
            f"windowed bolt {self._component!r}: do not {what} window tuples; each is "
            "acked as it leaves the window, and raising from execute fails the window's "
            "tuples"
        )

    def ack(self, tup: Any) -> None:
        raise self._refuse("ack")

    def fail(self, tup: Any) -> None:
        raise self._refuse("fail")

    def reset_timeout(self, tup: Any) -> None:
        self._out.reset_timeout(tup)

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)


class WindowedBoltExecutor(Bolt):
    """Runs a WindowedBolt (``bolt``) as an ordinary Bolt. See the module docstring."""

    # A persistent window (StatefulWindowedBolt.with_persistence) acks at checkpoints:
    # the submit checks against the timeout and max spout pending do not apply.
    persistent = False

    def __init__(self, bolt: Any) -> None:
        self.bolt = bolt

    # -- at build and submit time -------------------------------------------------------

    def declare_output_fields(self, declarer: Any) -> None:
        spec = self.bolt.window_spec
        spec.validate(declarer.component)
        check_called_methods(declarer.component, self.bolt, "bolt")
        self.bolt.declare_output_fields(declarer)
        late = spec.late_stream
        if late is not None:
            if late in declarer.streams:
                # Said here: the declarer's "declares stream twice" names no late stream.
                raise InvalidTopologyError(
                    f"windowed bolt {declarer.component!r}: with_late_tuple_stream({late!r}) "
                    f"names a stream the bolt declares itself; late tuples go on a stream of "
                    f"their own (declared for you, field {LATE_TUPLE_FIELD!r}): pick another "
                    "name",
                    component=declarer.component,
                    stream=late,
                )
            declarer.declare_stream(late, [LATE_TUPLE_FIELD])

    def check_config(self, conf: dict[str, Any], component: str) -> None:
        self.bolt.window_spec.check_config(conf, component, self.persistent)
        check = getattr(self.bolt, "check_config", None)
        if check is not None:
            check(conf, component)

    # -- on the task ----------------------------------------------------------------------

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        spec = self.bolt.window_spec
        self._spec = spec
        self._component = context.component_id
        self._now_secs = context.now
        self._out = collector
        self._wout = WindowedOutputCollector(collector, self._component)
        self._cap: int = conf.get(
            Config.TOPOLOGY_WINDOW_MAX_EVENTS, DEFAULTS[Config.TOPOLOGY_WINDOW_MAX_EVENTS]
        )
        self._late_stream = spec.late_stream
        self._late = self._refused = self._windows = self._failed_windows = 0
        self._last_size = 0
        self._next_refusal_report = -NEVER
        now = self._clock()
        self._manager: Any
        if spec.session:
            self._manager = SessionManager(spec.session_gap.value)
        else:
            self._manager = make_manager(
                spec.length,
                spec.slide,
                event_time=spec.event_time,
                lag_ms=spec.lag_ms,
                start_ms=now,
                expired_cap=self._cap,
            )
        self._key = _key_function(spec.session_key, self._component)
        self._event_time = spec.event_time
        # Processing-time sessions: a new session's close time is a new due time.
        self._session_gap = spec.session_gap.value if spec.session and not spec.event_time else None
        self._watermarks: WatermarkGenerator | None = None
        if spec.event_time:
            self._watermarks = WatermarkGenerator(self._watermark_streams(context), spec.lag_ms)
            self._wm_interval = spec.watermark_interval_ms
            self._wm_due = now + self._wm_interval
        self._due: float = NEVER
        self._schedule()
        # A session holds its tuples until it closes, however long it lasts (the gap
        # check at submit bounds only the gap): keep their trees alive meanwhile, every
        # half message timeout, so they are not replayed while still in the window.
        self._reset_every = NEVER
        if spec.session and conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True):
            timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30
            self._reset_every = max(1, int(timeout * 1000) // 2)
        self._reset_due = now + self._reset_every
        context.call_each_round(self._on_round)
        context.register_metric("window", self.window_metrics)
        self.bolt.prepare(conf, context, self._wout)

    def _watermark_streams(self, context: Any) -> list[tuple[str, str]]:
        """The inputs whose timestamps make the watermark: all but the system's and the
        checkpoint stream."""
        return sorted(
            (component, stream)
            for component, stream in context.sources()
            if not component.startswith("__") and stream != CHECKPOINT_STREAM
        )

    def _clock(self) -> int:
        """The cluster's clock in whole milliseconds."""
        return int(self._now_secs() * 1000 + 0.5)

    def _schedule(self) -> None:
        if self._event_time:
            self._due = self._wm_due
        else:
            due = self._manager.next_due()
            self._due = NEVER if due is None else due

    def execute(self, tup: Any) -> None:
        if tup.is_tick():
            return
        now = self._clock()
        if now >= self._due:
            self._run_due(now)
        manager = self._manager
        watermarks = self._watermarks
        if watermarks is not None:
            ts = self._timestamp(tup)
            last = watermarks.last
            if last is not None and ts < last:
                self._late_tuple(tup)
                return
        else:
            ts = now
        if len(manager) >= self._cap:
            self._refuse(tup, now)
            return
        key = self._key
        item = self._window_item(tup)
        outcomes = manager.add(item, ts) if key is None else manager.add(item, ts, key(tup))
        if watermarks is not None:
            # After add: a tuple that add refuses (a session key that cannot be hashed)
            # fails without having moved the watermark.
            watermarks.record((tup.source_component, tup.source_stream), ts)
        gap = self._session_gap
        if gap is not None and ts + gap < self._due:
            self._due = ts + gap  # a new session's close, on the clock
        if outcomes:
            self._apply(outcomes)

    def _timestamp(self, tup: Any) -> int:
        field = self._spec.timestamp_field
        if field is not None:
            fields = tup.fields
            if field not in fields:
                raise TimestampError(
                    f"windowed bolt {self._component!r}: a tuple from "
                    f"{tup.source_component!r} stream {tup.source_stream!r} has no "
                    f"timestamp field {field!r} (its fields: {fields.to_list()}); "
                    f"with_timestamp_field({field!r}) needs it on every input stream",
                    self._component,
                    tup.source_stream,
                )
            value = tup.values[fields.index(field)]
        else:
            extractor = self._spec.timestamp_extractor
            assert extractor is not None
            value = extractor(tup)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value == value and abs(value) != NEVER:
            return int(value)
        # Other numbers (a Decimal from a database driver, a Fraction), whole ms too;
        # NaN and infinities raise here and are refused below.
        if isinstance(value, numbers.Number) and not isinstance(value, bool | complex):
            try:
                return int(value)
            except (TypeError, ValueError, OverflowError):
                pass
        raise TimestampError(
            f"windowed bolt {self._component!r}: the timestamp of a tuple from "
            f"{tup.source_component!r} stream {tup.source_stream!r} is "
            f"{type(value).__name__} {value!r}, not a number of milliseconds",
            self._component,
            tup.source_stream,
        )

    def _late_tuple(self, tup: Any) -> None:
        self._late += 1
        out = self._out
        if self._late_stream is not None:
            out.emit([DetachedTuple.of(tup)], tup, self._late_stream)
        out.ack(tup)

    def _refuse(self, tup: Any, now: int) -> None:
        self._refused += 1
        self._out.fail(tup)
        if now < self._next_refusal_report:
            return
        self._next_refusal_report = now + REFUSAL_REPORT_MS
        held = len(self._manager)
        hint = "raise it (for this bolt: add_configuration) or shorten the window"
        watermarks = self._watermarks
        if watermarks is not None and watermarks.last is None and watermarks.missing():
            names = ", ".join(f"{c}:{s}" for c, s in watermarks.missing())
            hint = f"there is no watermark yet: no tuple came on input stream(s) {names}"
        self._out.report_error(
            WindowFullError(
                f"windowed bolt {self._component!r}: holds {held} events, its cap "
                f"({Config.TOPOLOGY_WINDOW_MAX_EVENTS} = {self._cap}); new input is failed "
                f"(its spouts replay it) until the window frees room; {hint}. Refused so "
                f"far: {self._refused}",
                self._component,
                held,
                self._cap,
            )
        )

    # -- what a persistent window (windowing/persistent.py) does differently ----------

    def _window_item(self, tup: Any) -> Any:
        """What the manager holds for an input: the tuple itself."""
        return tup

    def _expire(self, items: list[Any]) -> None:
        """Items that left the window: acked."""
        ack = self._out.ack
        for tup in items:
            ack(tup)

    def _window(self, fired: Fired) -> Any:
        return TupleWindow(
            fired.items, fired.new, fired.expired, fired.start_ts, fired.end_ts, fired.key
        )

    def _anchors(self, fired: Fired) -> list[Any] | None:
        """What emits in ``execute(window)`` are anchored to: the window's tuples."""
        return fired.items

    # -- applying outcomes ----------------------------------------------------------------

    def _apply(self, outcomes: Iterable[Any]) -> int:
        done = 0
        for outcome in outcomes:
            done += 1
            if type(outcome) is Expired:
                self._expire(outcome.items)
            else:
                self._fire(outcome)
        return done

    def _fire(self, fired: Fired) -> None:
        window = self._window(fired)
        self._windows += 1
        self._last_size = len(fired.items)
        wout = self._wout
        wout.anchors = self._anchors(fired)
        try:
            self.bolt.execute(window)
        except BaseException as exc:  # user code: never the worker's end
            self._window_failed(fired, exc)
        finally:
            wout.anchors = None

    def _window_failed(self, fired: Fired, exc: BaseException) -> None:
        out = self._out
        failed = 0
        for tup in fired.items:
            if not tup.is_settled():
                out.fail(tup)
                failed += 1
        self._manager.remove(fired.seqs)
        self._failed_windows += 1
        err = WindowFailedError(
            f"execute(window) raised {_describe(exc)}; the window's {failed} tuples not yet "
            f"acked were failed (their spouts replay them) and left the window (window of "
            f"{len(fired.items)} tuples ending at {fired.end_ts} ms)",
            self._component,
            len(fired.items),
            fired.end_ts,
        )
        err.__cause__ = exc
        out.report_error(err)

    def _reset_held(self, now: int) -> None:
        self._reset_due = now + self._reset_every
        reset = self._out.reset_timeout
        for tup in self._manager.held_items():
            reset(tup)

    def _on_round(self) -> bool:
        now = self._clock()
        if now >= self._reset_due:
            self._reset_held(now)
        if now < self._due:
            return False
        return self._run_due(now) > 0

    def _run_due(self, now: int) -> int:
        """The time-driven work due at ``now``; how many outcomes it applied."""
        done = 0
        if self._event_time:
            if now >= self._wm_due:
                interval = self._wm_interval
                self._wm_due += ((now - self._wm_due) // interval + 1) * interval
                assert self._watermarks is not None
                wm = self._watermarks.compute()
                if wm is not None:
                    done = self._apply(self._manager.on_watermark(wm))
        else:
            done = self._apply(self._manager.advance(now))
        self._schedule()
        return done

    def cleanup(self) -> None:
        self.bolt.cleanup()

    # -- observation and state --------------------------------------------------------

    def window_metrics(self) -> dict[str, Any]:
        watermarks = self._watermarks
        manager = self._manager
        return {
            "window": self._spec.describe(),
            "watermark_ms": None if watermarks is None else watermarks.last,
            "held": len(manager),
            "cap": self._cap,
            "late": self._late,
            "refused": self._refused,
            "windows": self._windows,
            "failed_windows": self._failed_windows,
            "last_window_size": self._last_size,
            "sessions": manager.open_sessions() if isinstance(manager, SessionManager) else None,
        }

    def window_state(self, encode: Callable[[Any], Any] = lambda t: t) -> dict[str, Any]:
        """The window's state in plain values (``encode`` maps each held tuple)."""
        watermarks = self._watermarks
        return {
            "manager": self._manager.state(encode),
            "watermarks": None if watermarks is None else watermarks.state(),
        }

    def restore_window_state(
        self, state: dict[str, Any], decode: Callable[[Any], Any] = lambda t: t
    ) -> None:
        self._manager.restore(state["manager"], decode)
        if self._watermarks is not None and state.get("watermarks") is not None:
            self._watermarks.restore(state["watermarks"])
        self._schedule()


def _key_function(key: Any, component: str) -> Callable[[Any], Any] | None:
    """The session key of a tuple: None (one session stream), a field, fields, or the
    user's function."""
    if key is None or callable(key):
        return key
    names = tuple(key)

    def by_fields(tup: Any) -> Any:
        fields = tup.fields
        missing = [n for n in names if n not in fields]
        if missing:
            raise KeyError(
                f"windowed bolt {component!r}: session key field(s) {missing} are not in "
                f"the tuple from {tup.source_component!r} stream {tup.source_stream!r} "
                f"(its fields: {fields.to_list()})"
            )
        values = tup.values
        if len(names) == 1:
            return values[fields.index(names[0])]
        return tuple(values[fields.index(n)] for n in names)

    return by_fields
