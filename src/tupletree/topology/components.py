"""The user's building blocks: Spout, Bolt, BasicBolt, BatchBolt, and the output declarer.

Lifecycle contracts (what the runtime calls, in order), per task:

- Spout: ``open(conf, context, collector)``; then, while active, ``next_tuple()`` is
  called repeatedly, interleaved with ``ack(msg_id)`` / ``fail(msg_id)`` for the tuples
  this very task emitted (and ``reset_timeout(msg_id)`` when a bolt resets the timeout
  of one's tree); ``activate()`` / ``deactivate()`` when the topology is
  (de)activated; ``close()`` when it is killed (best effort, as in Storm).
- Bolt: ``prepare(conf, context, collector)``; then ``execute(tup)`` per input tuple; the
  bolt must ``collector.ack(tup)`` or ``collector.fail(tup)`` each of them, now or later;
  ``cleanup()`` when killed.
- BasicBolt: ``prepare(conf, context)``; then ``execute(tup, collector)``: every emit is
  anchored to ``tup`` and ``tup`` is acked when ``execute`` returns, or failed if it
  raises (FailedException or anything else).

All calls for one task happen on one thread, never concurrently, so components need no
locks. Every method has a do-nothing default and ``__init__`` need not be called.
Each task gets its own copy of the component (a pickle round trip), as in Storm.

An object that is not itself what the runtime runs may offer ``_runtime_bolt()``:
``TopologyBuilder.set_bolt`` then runs the Bolt it returns (``runtime_component``). A
``tupletree.windowing.WindowedBolt``, whose ``execute`` takes a window, is set this way
(Storm's ``setBolt(id, IWindowedBolt)`` wraps it in a WindowedBoltExecutor likewise).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from tupletree.errors import InvalidTopologyError
from tupletree.topology.fields import Fields

DEFAULT_STREAM = "default"


class StreamSpec:
    """A declared output stream: its fields and whether it is direct."""

    __slots__ = ("direct", "fields")

    def __init__(self, fields: Fields, direct: bool) -> None:
        self.fields = fields
        self.direct = direct

    def __repr__(self) -> str:
        return f"StreamSpec({self.fields.to_list()!r}, direct={self.direct})"


class OutputFieldsDeclarer:
    """Collects the streams a component declares in ``declare_output_fields``."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.streams: dict[str, StreamSpec] = {}

    def declare(self, fields: Fields | Iterable[str], direct: bool = False) -> None:
        """Declare the default stream."""
        self.declare_stream(DEFAULT_STREAM, fields, direct=direct)

    def declare_stream(
        self, stream: str, fields: Fields | Iterable[str], direct: bool = False
    ) -> None:
        from tupletree.errors import InvalidTopologyError

        if not isinstance(stream, str) or not stream:
            raise InvalidTopologyError(
                f"component {self.component!r} declares a stream with an invalid id {stream!r}",
                component=self.component,
            )
        if stream in self.streams:
            raise InvalidTopologyError(
                f"component {self.component!r} declares stream {stream!r} twice",
                component=self.component,
                stream=stream,
            )
        if isinstance(fields, str):
            raise InvalidTopologyError(
                f"component {self.component!r} stream {stream!r}: fields must be a list of "
                f"names, got the string {fields!r} (did you mean [{fields!r}]?)",
                component=self.component,
                stream=stream,
            )
        try:
            spec_fields = fields if isinstance(fields, Fields) else Fields(list(fields))
        except (TypeError, ValueError) as exc:
            raise InvalidTopologyError(
                f"component {self.component!r} stream {stream!r}: {exc}",
                component=self.component,
                stream=stream,
            ) from exc
        self.streams[stream] = StreamSpec(spec_fields, bool(direct))


class _Component:
    outputs: list[str] | None = None

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams; by default from the class attribute ``outputs``."""
        if self.outputs is not None:
            declarer.declare(self.outputs)


class Spout(_Component):
    """A source of tuples. See the module docstring for the lifecycle."""

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        pass

    def next_tuple(self) -> None:
        pass

    def ack(self, msg_id: Any) -> None:
        pass

    def fail(self, msg_id: Any) -> None:
        pass

    def reset_timeout(self, msg_id: Any) -> None:
        """A bolt called ``reset_timeout`` on a tuple of this message's tree (a broker
        spout renews the message's lease at the broker here)."""

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def close(self) -> None:
        pass


class Bolt(_Component):
    """A processing step that acks or fails its inputs itself."""

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        pass

    def execute(self, tup: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass


class BasicBolt(_Component):
    """A bolt whose emits are anchored to the input and whose input is acked for it."""

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        pass

    def execute(self, tup: Any, collector: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass


class BatchBolt(_Component):
    """A bolt that takes its input a batch of rows at a time, as columns (a ``Batch``,
    topology/batch.py), and whose emits are anchored to the rows they name.

    ``execute_batch(batch, collector)`` is called per batch: the rows from one source
    task and stream that arrived together (a frame's run from another worker, or the
    tuples queued in a row on this one). ``collector.emit(values, row=i)`` anchors an
    emit to row ``i``; every row is acked when ``execute_batch`` returns, except those
    ``collector.fail(i)`` failed; if it raises, every tree of the batch is failed (as a
    BasicBolt's input is) and the worker goes on. docs/batch-bolts.md has the rest.
    """

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        pass

    def execute_batch(self, batch: Any, collector: Any) -> None:
        pass

    def cleanup(self) -> None:
        pass


def runtime_component(obj: Any) -> Any:
    """What the runtime runs for ``obj``: what its ``_runtime_bolt()`` returns, if it
    has one (a windowed bolt's executor), else ``obj`` itself."""
    make = getattr(obj, "_runtime_bolt", None)
    return obj if make is None else make()


def declared_streams(component_id: str, component: Any) -> dict[str, StreamSpec]:
    """Ask a component for its output streams."""
    declarer = OutputFieldsDeclarer(component_id)
    component.declare_output_fields(declarer)
    return declarer.streams


# The methods the runtime calls and whose return value it ignores.
_CALLED = {
    "spout": ("open", "next_tuple", "ack", "fail", "activate", "deactivate", "close"),
    "bolt": ("prepare", "execute", "execute_batch", "cleanup"),
}


# The arguments the runtime passes to each method, by base class (most specific first).
# A component with ``_runtime_bolt`` (a windowed bolt) is run by another object, which
# calls the user's methods its own way.
_ARGUMENTS: tuple[tuple[type, dict[str, tuple[str, ...]]], ...] = (
    (
        Spout,
        {
            "open": ("conf", "context", "collector"),
            "next_tuple": (),
            "ack": ("msg_id",),
            "fail": ("msg_id",),
            "activate": (),
            "deactivate": (),
            "close": (),
        },
    ),
    (BasicBolt, {"prepare": ("conf", "context"), "execute": ("tup", "collector"), "cleanup": ()}),
    (
        BatchBolt,
        {"prepare": ("conf", "context"), "execute_batch": ("batch", "collector"), "cleanup": ()},
    ),
    (Bolt, {"prepare": ("conf", "context", "collector"), "execute": ("tup",), "cleanup": ()}),
)


def _check_arguments(component_id: str, component: Any) -> None:
    """InvalidTopologyError if a method the runtime calls cannot take the arguments it is
    called with (a BasicBolt's ``execute(self, tup)`` without the collector, a Bolt's with
    one): otherwise every call fails with a bare TypeError, tuple after tuple."""
    if getattr(component, "_runtime_bolt", None) is not None:
        return
    found = next(((b, m) for b, m in _ARGUMENTS if isinstance(component, b)), None)
    if found is None:
        return
    base, methods = found
    for name, args in methods.items():
        method = getattr(component, name, None)
        if method is None:
            continue
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):  # a builtin or an odd callable: not checkable
            continue
        try:
            signature.bind(*args)
        except TypeError:
            raise InvalidTopologyError(
                f"component {component_id!r}: {type(component).__name__}.{name}"
                f"{signature} cannot be called as {name}({', '.join(args)}), which is how "
                f"a {base.__name__}'s {name} is called"
                + (
                    " (a BasicBolt's execute takes the collector; a Bolt's gets it in "
                    "prepare: did you mean the other base class?)"
                    if name in ("execute", "prepare") and base in (Bolt, BasicBolt)
                    else ""
                ),
                component=component_id,
            ) from None


def check_called_methods(component_id: str, component: Any, kind: str) -> None:
    """InvalidTopologyError if a method the runtime calls (``kind``: "spout" or "bolt")
    is a generator or ``async def``: calling it would only create a generator or
    coroutine and run none of its body, so every tuple would be acked unprocessed; or if
    it cannot take the arguments the runtime passes (``_check_arguments``)."""
    _check_arguments(component_id, component)
    for name in _CALLED[kind]:
        method = getattr(component, name, None)
        if inspect.isgeneratorfunction(method) or inspect.isasyncgenfunction(method):
            what = "a generator function (its body has yield)"
        elif inspect.iscoroutinefunction(method):
            what = "a coroutine function (async def)"
        else:
            continue
        raise InvalidTopologyError(
            f"component {component_id!r}: {type(component).__name__}.{name} is {what}, "
            f"so calling it would run none of its body (and a bolt's inputs would be "
            f"acked unprocessed); emit with the collector instead of yielding, and "
            f"write {name} as a plain def",
            component=component_id,
        )
