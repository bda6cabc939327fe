"""The collectors bolts get in a stateful topology (Storm's AnchoringOutputCollector and
AckTrackingOutputCollector).

Every bolt of a topology with a stateful bolt must emit anchored tuples: a tuple emitted
without an anchor is not replayed when a checkpoint rolls back, so the state downstream
would miss it. ``emit`` and ``emit_direct`` without anchors (or with an empty list)
raise EmitError naming the component and stream. ``$checkpoint`` is the protocol's
stream: bolts do not emit on it.

A stateful bolt's ``ack`` is held back (the runtime collector's ``defer_ack``): the
tuple is acked for real at the COMMIT of the checkpoint whose state includes its effect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tupletree.errors import EmitError
from tupletree.state.protocol import CHECKPOINT_STREAM
from tupletree.topology.components import DEFAULT_STREAM


def _refuse(component: str, stream: str, anchors: Any) -> None:
    if stream == CHECKPOINT_STREAM:
        raise EmitError(
            f"component {component!r} emitted on stream {CHECKPOINT_STREAM!r}, which "
            "belongs to the checkpoint protocol",
            component=component,
            stream=stream,
        )
    if anchors is None or (isinstance(anchors, list | tuple) and not anchors):
        raise EmitError(
            f"component {component!r} emitted an unanchored tuple on stream {stream!r}: "
            "bolts in a stateful topology must emit anchored tuples (pass the input as "
            "anchors=tup), or a rollback could not replay what the tuple carried",
            component=component,
            stream=stream,
        )


class AnchoringCollector:
    """A bolt's collector that refuses unanchored emits (see the module docstring).
    ``on_fail`` is called when the bolt fails an input (the aligned mode then refuses
    the next PREPARE: bolts.py)."""

    __slots__ = ("_component", "_on_fail", "_out")

    def __init__(self, out: Any, component: str, on_fail: Callable[[], None] | None = None) -> None:
        self._out = out
        self._component = component
        self._on_fail = on_fail

    def emit(self, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM) -> list[int]:
        if anchors is None or stream == CHECKPOINT_STREAM or not anchors:
            _refuse(self._component, stream, anchors)
        return self._out.emit(values, anchors, stream)  # type: ignore[no-any-return]

    def emit_direct(
        self, task: int, values: Any, anchors: Any = None, stream: str = DEFAULT_STREAM
    ) -> list[int]:
        if anchors is None or stream == CHECKPOINT_STREAM or not anchors:
            _refuse(self._component, stream, anchors)
        return self._out.emit_direct(task, values, anchors, stream)  # type: ignore[no-any-return]

    def ack(self, tup: Any) -> None:
        self._out.ack(tup)

    def fail(self, tup: Any) -> None:
        if self._on_fail is not None:
            self._on_fail()
        self._out.fail(tup)

    def reset_timeout(self, tup: Any) -> None:
        self._out.reset_timeout(tup)

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)


class AckHoldingCollector(AnchoringCollector):
    """A stateful bolt's collector: anchored emits only, and ``ack`` held until COMMIT:
    ``ack`` is the runtime collector's ``defer_ack`` itself (no call in between on the
    per-tuple path), which settles the tuple and keeps its ack value per tree.

    ``anchored=False`` lets unanchored emits through: a persistent window's (its
    window's tuples are copies from the store, not in any tuple tree; Storm's
    PersistentWindowedBoltExecutor emits unanchored too)."""

    __slots__ = ("ack", "emit", "emit_direct")

    def __init__(
        self,
        out: Any,
        component: str,
        anchored: bool = True,
        on_fail: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(out, component, on_fail)
        self.ack = out.defer_ack  # type: ignore[method-assign]
        if anchored:
            self.emit = super().emit  # type: ignore[method-assign]
            self.emit_direct = super().emit_direct  # type: ignore[method-assign]
        else:
            self.emit = out.emit  # type: ignore[method-assign]
            self.emit_direct = out.emit_direct  # type: ignore[method-assign]


class AnchoringBasicCollector:
    """What a BasicBolt gets inside a plain-Bolt wrapper: emits anchored to the input
    (set before each ``execute``), as the runtime's BasicOutputCollector does."""

    __slots__ = ("_out", "input")

    def __init__(self, out: Any) -> None:
        self._out = out
        self.input: Any = None

    def emit(self, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit(values, self.input, stream)  # type: ignore[no-any-return]

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self._out.emit_direct(task, values, self.input, stream)  # type: ignore[no-any-return]

    def reset_timeout(self, tup: Any = None) -> None:
        self._out.reset_timeout(tup if tup is not None else self.input)

    def report_error(self, exc: BaseException) -> None:
        self._out.report_error(exc)
