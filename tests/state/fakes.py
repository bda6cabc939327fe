"""Plain stand-ins for the runtime around one component, as Storm's tests use mocks: a
collector that records what it was told, a context, tuples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tupletree.state.protocol import CHECKPOINT_STREAM


@dataclass(eq=False)
class FakeTuple:
    values: list[Any]
    source_stream: str = "default"
    source_task: int = 1
    source_component: str = "up"

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __repr__(self) -> str:
        return f"T({self.values!r} from {self.source_task} on {self.source_stream})"


def checkpoint(txid: int, action: str, task: int = 1) -> FakeTuple:
    return FakeTuple([txid, action], CHECKPOINT_STREAM, task, "$checkpointspout")


@dataclass
class FakeCollector:
    """Records emits (stream, values, anchors or msg id), acks, fails and errors."""

    emitted: list[tuple[str, list[Any], Any]] = field(default_factory=list)
    acked: list[Any] = field(default_factory=list)
    failed: list[Any] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def emit(self, values: Any, anchors_or_id: Any = None, stream: str = "default") -> list[int]:
        self.emitted.append((stream, list(values), anchors_or_id))
        return [1]

    def emit_direct(self, task: int, values: Any, anchors: Any = None, stream: str = "default"):
        return self.emit(values, anchors, stream)

    def ack(self, tup: Any) -> None:
        self.acked.append(tup)

    def fail(self, tup: Any) -> None:
        self.failed.append(tup)

    def reset_timeout(self, tup: Any) -> None:
        pass

    # The runtime collector's deferred acks, with the tuples themselves as the batch.
    def defer_ack(self, tup: Any) -> None:
        self.__dict__.setdefault("deferred", []).append(tup)

    def take_deferred(self) -> list[Any]:
        return self.__dict__.pop("deferred", [])

    def release_deferred(self, batch: list[Any]) -> None:
        self.acked.extend(batch)

    def fail_deferred(self, batch: list[Any]) -> None:
        self.failed.extend(batch)

    def report_error(self, exc: BaseException) -> None:
        self.errors.append(exc)

    def on(self, stream: str) -> list[list[Any]]:
        return [values for s, values, _ in self.emitted if s == stream]


class FakeContext:
    """One task of ``component``; ``tasks`` maps component id -> its task ids."""

    def __init__(
        self, component: str = "test", task: int = 1, tasks: dict[str, list[int]] | None = None
    ) -> None:
        self.component_id = component
        self.task_id = task
        self.tasks = tasks or {component: [task]}
        self.clock = 0.0

    @property
    def this_task_index(self) -> int:
        return self.tasks[self.component_id].index(self.task_id)

    def this_component_tasks(self) -> list[int]:
        return list(self.tasks[self.component_id])

    def component_tasks(self, component: str) -> list[int]:
        return list(self.tasks.get(component, []))

    def now(self) -> float:
        return self.clock

    def register_metric(self, name: str, fn: Any) -> None:
        pass

    def call_each_round(self, fn: Any) -> None:
        self.round_hooks = [*getattr(self, "round_hooks", []), fn]


class FakeBasicCollector(FakeCollector):
    """A BasicBolt's collector: emits are anchored to the input for you."""

    def emit(self, values: Any, stream: str = "default") -> list[int]:  # type: ignore[override]
        return super().emit(values, None, stream)
