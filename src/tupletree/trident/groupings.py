"""The two groupings Trident adds to Storm's (both custom groupings to the runtime):

- ``BatchGlobalGrouping``: all of a batch's tuples to one task, the batch's id
  (txid or DRPC request id) modulo the task count (bolt.batch_index), so different
  batches spread over the tasks and a replayed txid goes where it went before;
- ``IdentityGrouping``: emitting task i of its component to target task i (modulo the
  target count), so routing is deterministic when no repartition was asked for.
"""

from __future__ import annotations

from typing import Any

from tupletree.topology.groupings import CustomStreamGrouping


class BatchGlobalGrouping(CustomStreamGrouping):
    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        self.singles = [[t] for t in target_tasks]
        self.n = len(target_tasks)

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return self.singles[int(values[0][0]) % self.n]


class IdentityGrouping(CustomStreamGrouping):
    def prepare(self, context: Any, stream: str, target_tasks: list[int]) -> None:
        index = context.this_task_index
        self.target = [target_tasks[index % len(target_tasks)]]

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        return self.target
