"""Placement: which worker runs which tasks (Storm's even scheduler).

Each component's tasks are split into ``parallelism`` executors (contiguous task
ranges, as Storm does; ``counts`` overrides a component's parallelism, as a rebalance
does), each acker task is an executor of its own, and executors are dealt round-robin
over the workers in component order, so every worker gets an even share of every
component and of the ackers.
"""

from __future__ import annotations

from collections.abc import Mapping

from tupletree.runtime.context import TaskLayout


def executors(layout: TaskLayout, counts: Mapping[str, int] | None = None) -> list[list[int]]:
    """Every executor of the topology, as its list of task ids, in a stable order."""
    out: list[list[int]] = []
    for component in sorted(layout.component_to_tasks):
        tasks = layout.component_to_tasks[component]
        spec = layout.topology.components.get(component)
        wanted = None if spec is None else (counts or {}).get(component, spec.parallelism)
        n = len(tasks) if wanted is None else min(wanted, len(tasks))
        # Storm: tasks split as evenly as possible, the first executors taking the extra.
        base, extra = divmod(len(tasks), n)
        start = 0
        for i in range(n):
            size = base + (1 if i < extra else 0)
            out.append(tasks[start : start + size])
            start += size
    return out


def assign(
    layout: TaskLayout, workers: int, counts: Mapping[str, int] | None = None
) -> dict[int, int]:
    """task id -> worker index, executors dealt round-robin."""
    placement: dict[int, int] = {}
    for i, executor in enumerate(executors(layout, counts)):
        for task in executor:
            placement[task] = i % workers
    return placement
