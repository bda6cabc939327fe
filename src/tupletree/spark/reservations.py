"""Slots held by the launchers of this process, so two topologies submitted at once
cannot both count the same free task slots.

A launch counts the slots of every launcher of the same SparkContext that has started
and not stopped as busy, even when their tasks are not running yet.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from tupletree.spark.errors import NotEnoughSlotsError, SparkUnavailableError
from tupletree.spark.slots import (
    SlotInfo,
    busy_task_slots,
    describe_shortage,
    is_local_master,
    slot_info,
    total_task_slots,
)

# {id(sc): {job_group: workers}}
_reservations: dict[int, dict[str, int]] = {}
_lock = threading.Lock()
log = logging.getLogger("tupletree")

# How long a submit or a rebalance waits for running tasks that no topology here
# holds: a killed topology's, winding down (Spark ends a cancelled task's Python worker
# in its own time). Without it, a rebalance right after another topology's kill was
# refused for a slot about to be free (CI, stop 41).
WINDING_DOWN_SECS = 15.0


def reserve(sc: Any, job_group: str, name: str, workers: int, slot_wait: float) -> None:
    """Reserve ``workers`` slots for ``job_group``, or raise NotEnoughSlotsError.

    On a local master the count is final, but for running tasks that no topology of
    this process holds (a killed topology's, ending), which it waits for up to
    WINDING_DOWN_SECS. On a cluster, executors may still be
    registering right after the session started, so this waits for them up to
    ``slot_wait`` seconds. With dynamic allocation Spark adds executors only once tasks
    are pending, so the reservation is granted and the start timeout decides.
    """
    conf = sc.getConf()
    dynamic = (conf.get("spark.dynamicAllocation.enabled") or "false").lower() == "true"
    now = time.monotonic()
    deadline = now + slot_wait
    winding_down_deadline = now + WINDING_DOWN_SECS
    waiting = False
    while True:
        with _lock:
            held = _reservations.setdefault(id(sc), {})
            reserved = sum(held.values())
            info = slot_info(sc, reserved=reserved)
            if dynamic or info.free >= workers:
                held[job_group] = workers
                return
        if is_local_master(sc.master):
            # Final, but for running tasks no topology here holds (a killed one's,
            # ending): enough once they end, so wait for them a little.
            final = info.total - reserved < workers
            if final or time.monotonic() >= winding_down_deadline:
                raise _shortage(name, workers, info)
            time.sleep(0.2)
            continue
        if time.monotonic() >= deadline:
            raise _shortage(name, workers, info)
        if _stopped(sc):
            # A master that never took the application: Spark gives up after a
            # minute and stops the context; waiting on would end in Py4J's errors.
            raise SparkUnavailableError(
                f"Spark stopped its context while {name} waited for {workers} task "
                f"slots (master {sc.master}): the master did not take the application, "
                "or dropped it (Spark's log says why)"
            )
        if not waiting:  # a wait of up to slot_wait with nothing said looks like a hang
            waiting = True
            log.warning(
                "%s: waiting up to %.0f s for %d task slots, %d free now (master %s): "
                "executors may still be registering",
                name,
                slot_wait,
                workers,
                info.free,
                info.master,
            )
        time.sleep(0.5)


def _shortage(name: str, workers: int, info: SlotInfo) -> NotEnoughSlotsError:
    return NotEnoughSlotsError(
        describe_shortage(name, workers, info),
        needed=workers,
        available=info.free,
        master=info.master,
    )


def _stopped(sc: Any) -> bool:
    """True once ``sc`` was stopped (by Spark itself: a lost master), or its JVM is gone."""
    try:
        return sc._jsc is None or bool(sc._jsc.sc().isStopped())
    except Exception:
        return True


def resize(sc: Any, job_group: str, name: str, workers: int) -> None:
    """Make ``job_group`` (running) hold ``workers`` slots instead, or raise
    NotEnoughSlotsError and leave it as it was. Its own running tasks' slots count as
    free to it; growing needs the rest free now (a rebalance asks on a running
    cluster), except for slots whose tasks no topology here holds: those it waits for,
    up to WINDING_DOWN_SECS, as they end."""
    deadline = time.monotonic() + WINDING_DOWN_SECS
    while True:
        with _lock:
            held = _reservations.setdefault(id(sc), {})
            mine = held.get(job_group, 0)
            if workers <= mine:
                held[job_group] = workers
                return
            total, source = total_task_slots(sc)
            held_by_others = sum(held.values()) - mine
            others = max(busy_task_slots(sc) - mine, held_by_others)
            if total - others >= workers:
                held[job_group] = workers
                return
            # Enough once the tasks nobody here holds have ended?
            winding_down = total - held_by_others >= workers
            if not winding_down or time.monotonic() >= deadline:
                info = SlotInfo(total=total, busy=others, master=sc.master, source=source)
                raise _shortage(name, workers, info)
        time.sleep(0.2)


def release(sc: Any, job_group: str) -> None:
    """Give back what ``reserve`` took for ``job_group`` (no-op if nothing)."""
    with _lock:
        _reservations.get(id(sc), {}).pop(job_group, None)
