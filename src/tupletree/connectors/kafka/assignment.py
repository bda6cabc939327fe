"""Which partitions a KafkaSpout task reads and where it starts (pure).

Storm's storm-kafka-client assigns partitions itself instead of joining a consumer-group
rebalance: every task lists the topic's partitions, sorts them and takes every n-th one
starting at its own index among the component's tasks (round robin), and does so again
on a timer, so partitions added to the topic are picked up and no two tasks read the
same partition while their number is unchanged. The group id only names where offsets
are committed.

Where a newly assigned partition starts depends on the first-poll strategy and on
whether the committed offset was written by this very run of the topology (then the
task resumes from it whatever the strategy, as when a worker restarts):

- ``earliest`` / ``latest``: the beginning / the end of the partition the first time
  the topology runs (offsets committed by an earlier run are ignored);
- ``uncommitted_earliest`` (the default) / ``uncommitted_latest``: the committed offset
  if the group has one, else the beginning / the end.
"""

from __future__ import annotations

from collections.abc import Iterable

# librdkafka's logical offsets (confluent_kafka.OFFSET_BEGINNING / OFFSET_END).
BEGINNING = -2
END = -1

FIRST_POLL_STRATEGIES = ("earliest", "latest", "uncommitted_earliest", "uncommitted_latest")
PROCESSING_GUARANTEES = ("at_least_once", "at_most_once", "none")


def partitions_for_task(partitions: Iterable[int], task_index: int, num_tasks: int) -> list[int]:
    """The partitions task ``task_index`` (0-based) of ``num_tasks`` reads."""
    if not 0 <= task_index < num_tasks:
        raise ValueError(f"task index {task_index} is not in range({num_tasks})")
    return sorted(partitions)[task_index::num_tasks]


def start_offset(strategy: str, committed: int | None, committed_by_this_run: bool) -> int:
    """Where a newly assigned partition starts: an offset, BEGINNING or END.

    ``committed`` is the group's committed offset (None if it has none)."""
    if strategy not in FIRST_POLL_STRATEGIES:
        raise ValueError(
            f"first_poll must be one of {', '.join(FIRST_POLL_STRATEGIES)}, got {strategy!r}"
        )
    resumes = committed_by_this_run or strategy.startswith("uncommitted_")
    if committed is not None and committed >= 0 and resumes:
        return committed
    return BEGINNING if strategy.endswith("earliest") else END
