"""CoordinatedBolt: tells a bolt when it has seen every tuple of a request.

Wraps a user bolt in a linear DRPC topology, as Storm's CoordinatedBolt does. Field 0
of every tuple is the request id. Per request, each task of the wrapper keeps a Tally
(reliability/tally.py, the counting Trident's bolts share):

- ``received``: tuples of the request the user bolt acked (failing one fails the request);
- ``sent``: tuples the user bolt sent to each downstream task (``emit`` returns the
  target task ids; that is what the counting is built on);
- ``reports``/``expected``: count reports from upstream tasks, which arrive on the
  direct stream ``__coord`` as ``[request, count]``: "I sent you ``count`` tuples".

A task is *finished* with a request when

- first bolt (no sources): its one request tuple was acked;
- later bolts: every upstream task reported (one report for a ``single`` source, one per
  task for ``all``) and ``received == sum of the reported counts``;
- the last bolt, if it is a FinishedCallback, also needs the request's id tuple from
  prepare-request (so the request's tuple tree stays open until it finished).

Then, in this order: ``finished_id(request)`` is called (it usually emits the bolt's
result for the request), this task sends each downstream task its count (0 included),
and the held coordination tuples are acked. The order matters: what ``finished_id``
emits must be in the counts. So "finished" cascades down the topology, asynchronously.

Failure: a failed tuple of the request, or FailedException (or any error) from
``finished_id``, marks the request failed: held tuples are failed (so the request's
tuple tree fails and the DRPC spout tells the caller) and later tuples of it are
failed too. The first exception (FailedException included) a task's user bolt raises
for a request, from ``execute`` or ``finished_id``, is also told downstream, on the
stream ``__drpc_failure`` as ``[request, reason]``: the reason names the component and
the user bolt's class and gives the exception's type and message (the message cut to
``MAX_FAILURE_MESSAGE_CHARS``, control characters escaped), so the builder's JoinResult
can fail the request with it and the caller reads what went wrong. The per-request
state expires a message timeout after it was created
(driven by tick tuples, see expiry.py), failing whatever it still holds and calling
``timeout_id`` on a TimeoutCallback bolt, so memory does not grow with lost requests.

Ticks: the expiry runs on system ticks (``tupletree.system.tick.freq.secs``, which the
builder sets to 1 s on the bolts it wraps, and a topology that uses CoordinatedBolt
directly sets on it; stream ``__system_tick``). Tick tuples proper
(``topology.tick.tuple.freq.secs``, set for the topology or for the bolt) go to the user
bolt, as they would unwrapped. (Storm's CoordinatedBolt expires requests on a timer
thread of its own; a worker here has one thread, so the expiry is driven by ticks, and
they used to be the user's: a topology-level tick frequency then never reached the
user bolt.)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from tupletree.config import Config
from tupletree.drpc.expiry import TickExpiry
from tupletree.errors import FailedException, InvalidTopologyError
from tupletree.reliability.protocol import SYSTEM_COMPONENT, SYSTEM_TICK_STREAM
from tupletree.reliability.tally import COMPLETE, Tally
from tupletree.runtime.error_log import printable, safe_str
from tupletree.topology.components import DEFAULT_STREAM, BasicBolt, Bolt

COORD_STREAM = "__coord"
# [request, reason]: why a request failed here (see the module docstring).
FAILURE_STREAM = "__drpc_failure"
# The exception's message in a failure reason is cut to this many characters: the
# reason crosses sockets (to a DRPC server, then to its caller).
MAX_FAILURE_MESSAGE_CHARS = 300
SINGLE = "single"
ALL = "all"

_REGULAR, _ID, _COORD = 0, 1, 2
TRACKED_METRIC = "__drpc_tracked_requests"


class FinishedCallback:
    """Mix into a bolt of a linear DRPC topology to hear when a request is complete.

    ``finished_id(request_id)`` is called once this task has seen every tuple of the
    request it will ever get; emit the bolt's result for the request there. Raise
    FailedException to fail the request. A BasicBolt has no collector outside
    ``execute``, so its ``finished_id`` may take a second parameter: a collector whose
    emits are unanchored.
    """

    def finished_id(self, request_id: Any) -> None:
        pass


class TimeoutCallback:
    """Mix into a coordinated bolt to hear ``timeout_id(request_id)`` when a request's
    state expired unfinished (after the message timeout)."""

    def timeout_id(self, request_id: Any) -> None:
        pass


def is_finished_callback(bolt: Any) -> bool:
    """FinishedCallback subclasses, and bolts that just define ``finished_id``."""
    return isinstance(bolt, FinishedCallback) or callable(getattr(bolt, "finished_id", None))


class _Track(Tally):
    """A request's Tally (reliability/tally.py, shared with Trident's bolts) plus what
    only linear DRPC needs: the id tuple, the held coordination tuples, failure."""

    __slots__ = ("failed", "held", "received_id")

    def __init__(self, received_id: bool) -> None:
        super().__init__()
        self.failed = False
        self.received_id = received_id
        self.held: list[Any] = []


class CoordinatedOutputCollector:
    """What the user bolt gets as its collector: the real one, plus counting."""

    def __init__(self, owner: CoordinatedBolt, inner: Any) -> None:
        self._owner = owner
        self._inner = inner

    def emit(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        tasks = self._inner.emit(values, anchors, stream)
        self._owner._count(values, tasks)
        return tasks

    def emit_direct(
        self, task: int, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        tasks = self._inner.emit_direct(task, values, anchors, stream)
        self._owner._count(values, tasks)
        return tasks

    def ack(self, tup: Any) -> None:
        self._owner._ack(tup)

    def fail(self, tup: Any) -> None:
        self._owner._fail(tup)

    def reset_timeout(self, tup: Any) -> None:
        self._inner.reset_timeout(tup)

    def report_error(self, exc: BaseException) -> None:
        self._inner.report_error(exc)


class _BasicCollector:
    """A BasicBolt's collector inside a CoordinatedBolt: emits anchored to the current
    input (unanchored in ``finished_id``, where there is none)."""

    def __init__(self, out: CoordinatedOutputCollector) -> None:
        self._out = out
        self.input: Any = None

    def emit(self, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, self.input, stream)

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit_direct(task, values, self.input, stream)

    def reset_timeout(self, tup: Any = None) -> None:
        target = tup if tup is not None else self.input
        if target is not None:
            self._out.reset_timeout(target)

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)


class CoordinatedBolt(Bolt):
    """Wraps ``delegate`` (a Bolt or BasicBolt) with per-request tuple counting.

    ``sources`` maps upstream component id -> ``"single"`` (one of its tasks reports) or
    ``"all"`` (every task reports); empty for the first bolt. ``id_stream`` is the
    (component, stream) of request ids that must also arrive before finishing.
    """

    def __init__(
        self,
        delegate: Bolt | BasicBolt,
        sources: Mapping[str, str] | None = None,
        id_stream: tuple[str, str] | None = None,
    ) -> None:
        if not isinstance(delegate, Bolt | BasicBolt):
            raise InvalidTopologyError(
                f"CoordinatedBolt wraps a Bolt or BasicBolt, got {type(delegate).__name__}"
            )
        sources = dict(sources or {})
        for component, kind in sources.items():
            if kind not in (SINGLE, ALL):
                raise ValueError(
                    f"source {component!r}: kind must be {SINGLE!r} or {ALL!r}, got {kind!r}"
                )
        self.delegate = delegate
        self.sources = sources
        self.id_stream = id_stream

    def declare_output_fields(self, declarer: Any) -> None:
        self.delegate.declare_output_fields(declarer)
        declarer.declare_stream(COORD_STREAM, ["request", "count"], direct=True)
        declarer.declare_stream(FAILURE_STREAM, ["request", "reason"])

    # -- lifecycle --------------------------------------------------------------------

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._component = context.component_id
        timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30
        self._tracked: TickExpiry[_Track] = TickExpiry(timeout)
        self._out_tasks = sorted(
            task
            for component in context.targets(COORD_STREAM)
            for task in context.component_tasks(component)
        )
        self._num_reports = sum(
            1 if kind == SINGLE else len(context.component_tasks(component))
            for component, kind in self.sources.items()
        )
        self._held_kind = _ID if self.id_stream is not None else _COORD
        self._out = CoordinatedOutputCollector(self, collector)
        self._basic = isinstance(self.delegate, BasicBolt)
        self._basic_out = _BasicCollector(self._out) if self._basic else None
        self._finished = self._finished_hook()
        timeout_id = getattr(self.delegate, "timeout_id", None)
        self._timeout_hook = timeout_id if callable(timeout_id) else None
        context.register_metric(TRACKED_METRIC, self.tracked_requests)
        if self._basic:
            self.delegate.prepare(conf, context)  # type: ignore[call-arg]
        else:
            self.delegate.prepare(conf, context, self._out)  # type: ignore[call-arg]

    def _finished_hook(self) -> Callable[[Any], None] | None:
        fn = getattr(self.delegate, "finished_id", None)
        if not callable(fn):
            return None
        if self._basic and _takes_two(fn):
            basic_out = self._basic_out
            return lambda request_id: fn(request_id, basic_out)
        return fn

    def cleanup(self) -> None:
        self.delegate.cleanup()

    def tracked_requests(self) -> int:
        """Requests this task holds state for (a metric: it must not grow unbounded)."""
        return len(self._tracked)

    # -- input ------------------------------------------------------------------------

    def execute(self, tup: Any) -> None:
        if tup.source_component == SYSTEM_COMPONENT:  # one comparison for data tuples
            if tup.source_stream == SYSTEM_TICK_STREAM:
                self._expire(tup[0])
                self._collector.ack(tup)
            else:  # the user's tick tuples
                self._run_delegate(tup)
            return
        request = tup[0]
        try:
            track = self._tracked.get(request)
        except TypeError:
            self._collector.report_error(
                TypeError(f"field 0 of a DRPC tuple must be the request id, got {request!r}")
            )
            self._collector.fail(tup)
            return
        if track is None:
            track = _Track(received_id=self.id_stream is None)
            self._tracked.put(request, track)
        kind = self._kind(tup)
        if kind == _REGULAR:
            self._run_delegate(tup)
        elif kind == _COORD:
            track.report(tup[1])
            self._check(tup, _COORD, track)
        else:
            track.received_id = True
            self._check(tup, _ID, track)

    def _kind(self, tup: Any) -> int:
        stream = tup.source_stream
        ids = self.id_stream
        if ids is not None and stream == ids[1] and tup.source_component == ids[0]:
            return _ID
        if self.sources and stream == COORD_STREAM:
            return _COORD
        return _REGULAR

    def _run_delegate(self, tup: Any) -> None:
        """Execute the user bolt, with BasicBolt's contract for a BasicBolt."""
        if self._basic:
            bc = self._basic_out
            assert bc is not None
            bc.input = tup
            try:
                self.delegate.execute(tup, bc)  # type: ignore[call-arg]
            except FailedException as exc:
                self._tell_failure(tup, exc)
                self._fail(tup)
            except Exception as exc:
                self._collector.report_error(exc)
                self._tell_failure(tup, exc)
                self._fail(tup)
            else:
                self._ack(tup)
            finally:
                bc.input = None
            return
        try:
            self.delegate.execute(tup)  # type: ignore[call-arg]
        except FailedException as exc:
            self._tell_failure(tup, exc)
            self._fail(tup)
        except Exception as exc:
            self._collector.report_error(exc)
            self._tell_failure(tup, exc)
            self._fail(tup)

    def _tell_failure(self, tup: Any, exc: BaseException) -> None:
        """The user bolt raised for ``tup``: the first time for its request on this
        task, say why downstream (before the tuple is failed)."""
        if tup.is_tick() or tup.is_settled():
            return
        request = tup[0]
        track = self._tracked.get(request)
        if track is not None and not track.failed:
            self._emit_failure(request, exc)

    def _emit_failure(self, request: Any, exc: BaseException) -> None:
        reason = failure_reason(self._component, type(self.delegate).__name__, exc)
        try:
            self._collector.emit([request, reason], None, FAILURE_STREAM)
        except Exception as emit_exc:  # the request fails anyway; only the reason is lost
            self._collector.report_error(emit_exc)

    # -- the user's collector calls ---------------------------------------------------

    def _count(self, values: Any, tasks: list[int]) -> None:
        if not tasks or not values:
            return
        try:
            track = self._tracked.get(values[0])
        except TypeError:
            return
        if track is None:
            return
        track.count_sent(tasks)

    def _ack(self, tup: Any) -> None:
        if tup.is_settled():  # a user bolt acking a tuple twice must not count it twice
            return
        if tup.is_tick():
            self._collector.ack(tup)
            return
        track = self._tracked.get(tup[0])
        if track is not None:
            track.received += 1
        if self._check(tup, _REGULAR, track):
            self._collector.fail(tup)
        else:
            self._collector.ack(tup)

    def _fail(self, tup: Any) -> None:
        if tup.is_settled():
            return
        if tup.is_tick():
            self._collector.fail(tup)
            return
        track = self._tracked.get(tup[0])
        if track is not None:
            track.failed = True
        self._check(tup, _REGULAR, track)
        self._collector.fail(tup)

    # -- coordination -----------------------------------------------------------------

    def _check(self, tup: Any, kind: int, track: _Track | None) -> bool:
        """Finish the request if its time has come; True if the request has failed.
        Acks or fails ``tup`` unless it is a regular tuple (the caller does that)."""
        if track is None:
            if kind != _REGULAR:
                self._collector.fail(tup)
            return False
        delayed = kind == self._held_kind
        if delayed:
            track.held.append(tup)
        if track.failed:
            self._fail_held(track)
        elif self._ready(track):
            self._finish(tup[0], track, tup)
        if not delayed and kind != _REGULAR:
            if track.failed:
                self._collector.fail(tup)
            else:
                self._collector.ack(tup)
        return track.failed

    def _ready(self, track: _Track) -> bool:
        if not track.received_id:
            return False
        if self._num_reports:
            return track.status(self._num_reports) == COMPLETE
        return track.received > 0  # the first bolt: its request tuple was acked

    def _finish(self, request: Any, track: _Track, anchor: Any) -> None:
        if self._finished is not None:
            try:
                self._finished(request)
            except Exception as exc:
                if not isinstance(exc, FailedException):
                    self._collector.report_error(exc)
                if not track.failed:
                    self._emit_failure(request, exc)
                track.failed = True
                self._fail_held(track)
                return
        emit_direct = self._collector.emit_direct
        for task, count in track.counts_for(self._out_tasks):
            emit_direct(task, [request, count], anchor, COORD_STREAM)
        held, track.held = track.held, []
        for t in held:
            self._collector.ack(t)
        self._tracked.pop(request)

    def _fail_held(self, track: _Track) -> None:
        held, track.held = track.held, []
        for t in held:
            self._collector.fail(t)

    def _expire(self, secs: float) -> None:
        for request, track in self._tracked.tick(secs):
            # A failed request expires unfinished too: its held tuples were failed
            # already, but the bolt still hears timeout_id (to drop its state for it).
            self._fail_held(track)
            if self._timeout_hook is not None:
                try:
                    self._timeout_hook(request)
                except Exception as exc:
                    self._collector.report_error(exc)


def failure_reason(component: str, bolt_class: str, exc: BaseException) -> str:
    """Why a request failed, for its caller: the component, the user bolt's class, the
    exception's type and message (cut to MAX_FAILURE_MESSAGE_CHARS, escaped: it is
    printed by callers and crosses sockets). Never raises."""
    message = printable(safe_str(exc, MAX_FAILURE_MESSAGE_CHARS))
    if len(message) > 2 * MAX_FAILURE_MESSAGE_CHARS:  # escapes lengthen it
        message = message[: 2 * MAX_FAILURE_MESSAGE_CHARS] + "..."
    said = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"the request's tuple tree failed: {component} ({bolt_class}) raised {said}"


def _takes_two(fn: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
