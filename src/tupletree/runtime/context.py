"""TopologyContext: what a task may know about the topology and its place in it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tupletree.topology.builder import Topology
from tupletree.topology.components import DEFAULT_STREAM
from tupletree.topology.fields import Fields
from tupletree.topology.groupings import Grouping


class TaskLayout:
    """Task ids of every component, Storm's way: components sorted by id (system ones
    included), ids from 1 upwards, consecutive within a component. Every worker computes
    the same layout from the same topology, so no table needs shipping around.
    """

    def __init__(self, topology: Topology, component_tasks: dict[str, int]) -> None:
        self.topology = topology
        self.component_to_tasks: dict[str, list[int]] = {}
        self.task_to_component: dict[int, str] = {}
        next_task = 1
        for cid in sorted(component_tasks):
            tasks = list(range(next_task, next_task + component_tasks[cid]))
            next_task += len(tasks)
            self.component_to_tasks[cid] = tasks
            for t in tasks:
                self.task_to_component[t] = cid


class TopologyContext:
    """Per task: ``task_id``, ``component_id``, and lookups over the whole topology."""

    def __init__(
        self,
        layout: TaskLayout,
        task_id: int,
        conf: dict[str, Any],
        topology_name: str,
        wakeup: Any = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._layout = layout
        self.task_id = task_id
        self.component_id = layout.task_to_component[task_id]
        self.conf = conf
        self.topology_name = topology_name
        self.custom_metrics: dict[str, Any] = {}
        self.round_hooks: list[Any] = []
        self._wakeup = wakeup
        self._now = now

    def now(self) -> float:
        """Seconds on the cluster's clock: the worker's own (simulated on a simulated-time
        LocalCluster, where it moves only with ``advance_time``). Components that time
        anything (retry backoffs, windows, checkpoints) read it here rather than
        ``time.monotonic()``, so simulated time drives them exactly."""
        return self._now()

    def wakeup(self) -> None:
        """Wake this task's worker if it is idle. Safe from any thread: a spout fed by
        another thread (a queue client's callback, a test) calls it after adding work,
        so the worker does not sleep out its idle pause first."""
        if self._wakeup is not None:
            self._wakeup()

    def call_each_round(self, fn: Any) -> None:
        """Call ``fn()`` on this task's thread once in every round of its worker, busy or
        idle (an idle worker runs a round at least every millisecond or so, and at once
        after ``wakeup``). For work another thread finishes that must be settled on the
        task's own thread, e.g. a sink acking the writes its broker confirmed. ``fn``
        returns True when it did something; it must be cheap when there is nothing to
        do. What it raises is reported like an error in ``execute``."""
        self.round_hooks.append(fn)

    def register_metric(self, name: str, fn: Any) -> None:
        """Report ``fn()`` under ``metrics(topology)[component]["custom"][name][task]``
        whenever the cluster collects metrics (Storm's registerMetric). ``fn`` runs on
        the task's own thread; it should be cheap and return plain data."""
        self.custom_metrics[name] = fn

    def this_component_tasks(self) -> list[int]:
        """Sorted task ids of this component."""
        return list(self._layout.component_to_tasks[self.component_id])

    @property
    def this_task_index(self) -> int:
        """This task's position (0-based) among its component's tasks."""
        return self._layout.component_to_tasks[self.component_id].index(self.task_id)

    def component_tasks(self, component_id: str) -> list[int]:
        return list(self._layout.component_to_tasks.get(component_id, []))

    def component_id_of(self, task_id: int) -> str:
        return self._layout.task_to_component[task_id]

    def targets(self, stream: str = DEFAULT_STREAM) -> dict[str, Grouping]:
        """Component id -> grouping of every bolt subscribed to this component's stream."""
        return dict(self._layout.topology.subscribers(self.component_id, stream))

    def sources(self) -> dict[tuple[str, str], Grouping]:
        """(component id, stream) -> grouping of every input of this component."""
        spec = self._layout.topology.components.get(self.component_id)
        if spec is None:
            return {}
        return {(s.source, s.stream): s.grouping for s in spec.inputs}

    def output_fields(self, stream: str = DEFAULT_STREAM) -> Fields:
        return self._layout.topology.components[self.component_id].streams[stream].fields

    def __repr__(self) -> str:
        return f"TopologyContext(task={self.task_id}, component={self.component_id!r})"
