"""Where a tree stalled, as records: what ``cluster.timed_out(name)`` answers with.

Built by the runtime when a spout task times a tree out (runtime/stalls.py states the
rules and bounds); plain frozen values, with ``to_dict``/``from_dict`` for a worker's
report to its driver and for JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

QUEUED = "queued"
EXECUTING = "executing"


@dataclass(frozen=True)
class Holder:
    """A task that held tuples of a tree when the tree timed out."""

    component: str
    task: int
    state: str  # QUEUED or EXECUTING
    tuples: int  # how many of the tree's tuples it held in that state
    held_secs: float | None = None  # EXECUTING: the longest held; QUEUED: None
    queue_position: int | None = None  # QUEUED: tuples ahead of the first one


@dataclass(frozen=True)
class TimedOutTree:
    """One tree that timed out: its spout message and where it stalled.

    ``holders`` is empty when no task of the reporting worker held any of its tuples:
    they were on another worker, lost with a worker that died, or in a Bolt task
    holding more than ``HELD_LIMIT`` unsettled tuples.
    """

    spout_component: str
    spout_task: int
    msg_id: Any
    root: int
    timed_out_at: float  # on the worker's clock (simulated time on a simulated cluster)
    age_secs: float  # from the spout's emit to the timeout
    holders: tuple[Holder, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain values (``msg_id`` as the spout gave it): for reports and JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TimedOutTree:
        fields = dict(data)
        fields["holders"] = tuple(Holder(**h) for h in data["holders"])
        return cls(**fields)
