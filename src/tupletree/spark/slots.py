"""How many Spark task slots there are, and how many are free right now.

A worker occupies a task slot for the topology's whole life. If Spark has fewer free
slots than workers, the last workers never start and the submit would hang; we count
up front so we can refuse at once with the numbers.

The count comes from ``SparkContext.maxNumConcurrentTasks``, the very number Spark's
barrier mode checks (cores / ``spark.task.cpus`` over live executors). It is
``private[spark]`` in Scala, which is public in bytecode, so py4j can call it; if a
future Spark removes it we fall back to the master string and ``defaultParallelism``.
Busy slots are the running tasks of active stages, from the status tracker.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext


@dataclass(frozen=True)
class SlotInfo:
    """Spark's task slots at one moment: ``total`` concurrently runnable tasks, ``busy``
    of them running other work, and where the total came from (for messages)."""

    total: int
    busy: int
    master: str
    source: str

    @property
    def free(self) -> int:
        return max(0, self.total - self.busy)


def slots_from_master(master: str) -> int | None:
    """Task slots implied by a local master URL, or None for a cluster master.

    ``local`` -> 1, ``local[4]`` / ``local[4,3]`` -> 4, ``local[*]`` -> cores,
    ``local-cluster[2,3,1024]`` -> 2 * 3.
    """
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master)
    if m:
        return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    m = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]", master)
    if m:
        return int(m.group(1)) * int(m.group(2))
    return None


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[...]`` and ``local-cluster[...]`` masters: all
    executors run on this machine, so slot counts are known at once."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def total_task_slots(sc: SparkContext) -> tuple[int, str]:
    """(slots, how we know): the number of tasks Spark can run at once right now."""
    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile)), "maxNumConcurrentTasks"
    except Exception:
        pass
    from_master = slots_from_master(sc.master)
    if from_master is not None:
        cpus = int(sc.getConf().get("spark.task.cpus", "1") or 1)
        return from_master // max(1, cpus), "master URL"
    return int(sc.defaultParallelism), "defaultParallelism"


def busy_task_slots(sc: SparkContext) -> int:
    """Tasks running right now, on any executor, for any job.

    Read live from the task scheduler (``runningTasksByExecutors``). The status
    tracker's per-stage counts are not good enough here: the status store writes a
    live stage at most every ``spark.ui.liveUpdate.period`` and otherwise only on the
    next executor heartbeat (10 s), so a stage whose tasks just started can show 0
    running tasks for seconds. The tracker remains the fallback.
    """
    try:
        jsc = sc._jsc.sc()
        by_executor = jsc.taskScheduler().runningTasksByExecutors()
        as_java = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(by_executor)
        return sum(int(n) for n in dict(as_java).values())
    except Exception:
        pass
    tracker = sc.statusTracker()
    busy = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            busy += info.numActiveTasks
    return busy


def slot_info(sc: SparkContext, reserved: int = 0) -> SlotInfo:
    """Total and busy task slots of ``sc`` at this moment.

    ``reserved`` is the number of slots that workers already launched from this process
    hold or are about to take; their tasks may not be running yet (a launch racing
    another), so busy is at least that.
    """
    total, source = total_task_slots(sc)
    busy = max(busy_task_slots(sc), reserved)
    return SlotInfo(total=total, busy=busy, master=sc.master, source=source)


def describe_slots(sc: SparkContext) -> str:
    """One line on Spark's slots for an error message (it never raises)."""
    try:
        slots = slot_info(sc)
    except Exception as exc:  # only for the message
        return f"no slot info: {exc}"
    return f"Spark has {slots.total} task slots, {slots.busy} running ({slots.master})"


def describe_shortage(what: str, needed: int, info: SlotInfo) -> str:
    """The message for too few slots, with both numbers and the master, e.g.
    "topology needs 3 worker slots but Spark has only 2 (local[2,4])"."""
    if info.busy and info.total >= needed:
        return (
            f"{what} needs {needed} worker slots but Spark has only {info.free} free "
            f"({info.total} in all, {info.busy} busy with other jobs; master {info.master})"
        )
    busy = f", {info.busy} of them busy with other jobs" if info.busy else ""
    return (
        f"{what} needs {needed} worker slots but Spark has only {info.total} "
        f"({info.master}{busy}); each worker holds one task slot for the topology's "
        f"whole life: give Spark more cores or use fewer topology.workers"
    )
