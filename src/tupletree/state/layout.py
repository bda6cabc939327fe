"""A stateful component's task count, recorded beside its state, so that a topology
submitted again with another task count for it is refused rather than losing state.

Why: a task's state lives under ``<component>-<task index>`` (provider.state_namespace),
and a fields grouping sends a key to one task by ``hash % tasks``. With another task
count, keys go to tasks whose namespace never held them (their counts start again from
nothing), and what a task index past the new count committed is read by no one. Storm
keys its state the same way and says nothing; here the first task to open its state
records the count (``<component>$layout``), and a task that finds another count refuses
with a StateError naming both, before it reads a key. A rebalance keeps the task count
(it changes executors), so it never meets this.

State written before the record existed has no record: then any task index at or past
the new count found in the store (a narrower resubmit) is refused the same way; a wider
one cannot be told from tasks that had not committed yet, and is recorded as it is.

What the user does about it: submit with the task count the state was written with
(``tasks=``, and a ``parallelism_hint`` up to it: Storm's way to leave room to scale),
or start from a new state (another ``prefix``, or another store).
"""

from __future__ import annotations

import re
from typing import Final

from tupletree.state.kv import StateError
from tupletree.store.base import Expect, Put, Store

LAYOUT_SUFFIX: Final = "$layout"
TASKS_KEY: Final = "tasks"


def check_task_count(store: Store, component: str, tasks: int) -> None:
    """Record ``tasks`` as ``component``'s task count in ``store``, or raise StateError if
    its state was written with another count."""
    namespace = component + LAYOUT_SUFFIX
    recorded = _recorded(store, namespace)
    if recorded is None:
        beyond = sorted(i for i in task_indices(store, component) if i >= tasks)
        if beyond:
            raise StateError(
                f"stateful component {component!r} has {tasks} task(s), but its store "
                f"holds state of task index {beyond[-1]} (written with at least "
                f"{beyond[-1] + 1} tasks): with another task count its keys would go to "
                f"other tasks and that state would be read by no one. {_ADVICE}",
                namespace=namespace,
            )
        mine = str(tasks).encode()
        if store.apply(
            [Put(namespace, TASKS_KEY, mine)], expect=[Expect(namespace, TASKS_KEY, None)]
        ):
            return
        recorded = _recorded(store, namespace)  # another task recorded it first
    if recorded != tasks:
        raise StateError(
            f"stateful component {component!r} has {tasks} task(s), but its state was "
            f"written with {recorded}: with another task count its keys would go to other "
            f"tasks, whose state never held them. {_ADVICE}",
            namespace=namespace,
        )


_ADVICE: Final = (
    "Submit it with the task count the state was written with (set_bolt(..., tasks=N), "
    "a parallelism_hint up to N; a rebalance keeps it), or start from a new state "
    "(another prefix or store)."
)


def _recorded(store: Store, namespace: str) -> int | None:
    (raw,) = store.get(namespace, [TASKS_KEY])
    return None if raw is None else int(raw.decode())


def task_indices(store: Store, component: str) -> set[int]:
    """The task indices of ``component`` whose state (or a persistent window's) the
    store holds: namespaces ``<component>-<i>``, with a ``$...`` or ``-window`` tail."""
    prefix = component + "-"
    pattern = re.compile(r"(\d+)(?:\$.*|-window.*)?")
    found = set()
    for namespace in store.namespaces(prefix):
        match = pattern.fullmatch(namespace[len(prefix) :])
        if match is not None:
            found.add(int(match.group(1)))
    return found
