"""Registration and the peer table: a pure state machine of the driver's.

``Registry`` holds which attempt of each worker is current, the route (ZeroMQ routing
id) its signed registration came from, and its data address; it decides, for each
registration, what to send to whom, and returns it (``Send`` outcomes) instead of
sending: the control service does the I/O. No sockets, threads or clocks here (the
caller passes ``now``), so every rule is tested with plain values.

The rules:

- A worker index outside ``range(num_workers)`` is refused.
- An attempt older than the current one (an old process that outlived its
  replacement) is told to stop, and changes nothing.
- A route is bound to a worker only by that worker's signed registration, and an
  attempt's route never changes hands: a second registration of the current attempt
  from another route (a replayed frame, another socket), or one on a route that serves
  another worker, is refused and counted.
- A newer attempt replaces the old one: it is welcomed with the peers known so far,
  the old route is told to stop, and every other worker gets the new peer table with
  ``changed=[index]``. When the last first registration arrives, every other worker
  gets the full table.
- Messages other than registration are accepted from the current attempt only, and
  (but for the ones a task sends on a short-lived socket) only from its bound route.

Bounds: the tables hold one entry per worker index; ``seen_pids`` one per process
that registered or started a task, which a topology's life bounds only by its
restarts (the launcher reads it to wait for local processes on stop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tupletree.distributed.control import (
    Peers,
    Register,
    Stop,
    TaskStarted,
    ToWorker,
    Welcome,
    WorkerRegistered,
)


@dataclass(frozen=True)
class WorkerInfo:
    """What the driver knows about the current attempt of one worker."""

    index: int
    attempt: int
    pid: int
    host: str
    address: str
    task_attempt_id: int | None
    registered_at: float  # the caller's clock (time.monotonic() on the driver)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Send:
    """An outcome: send ``message`` to the worker behind ``route``."""

    route: bytes
    message: ToWorker


@dataclass(frozen=True)
class Registration:
    """What a registration decided: the messages to send, the event for listeners
    (None when nothing changed), and why it was refused (None when it was not)."""

    sends: list[Send]
    event: WorkerRegistered | None = None
    refused: str | None = None


class Registry:
    """The driver's view of its workers' registrations (see the module docstring)."""

    def __init__(self, num_workers: int, assignments: dict[int, Any] | None = None) -> None:
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.num_workers = num_workers
        self.assignments = dict(assignments or {})
        self.workers: dict[int, WorkerInfo] = {}
        self.routes: dict[int, bytes] = {}
        self.tasks: dict[int, tuple[int, TaskStarted]] = {}  # index -> (attempt, its start)
        self.exited: set[int] = set()
        self.seen_pids: set[tuple[str, int]] = set()
        self.all_registered = False
        self.stopping = False
        self.refused = 0  # registrations refused (unknown index, a route changing hands)

    # -- registration --------------------------------------------------------------

    def register(
        self, route: bytes, index: int, attempt: int, msg: Register, now: float
    ) -> Registration:
        """Decide on a signed registration that came from ``route``."""
        if not 0 <= index < self.num_workers:
            self.refused += 1
            return Registration([], refused=f"registration from unknown worker index {index}")
        previous = self.workers.get(index)
        if previous is not None and previous.attempt > attempt:
            # An older attempt that outlived its replacement: retire it.
            return Registration([Send(route, Stop(f"attempt {attempt} was replaced"))])
        owner = next((i for i, r in self.routes.items() if r == route and i != index), None)
        if owner is not None:
            self.refused += 1
            return Registration(
                [], refused=f"worker {index}'s registration came on worker {owner}'s route"
            )
        old_route = self.routes.get(index)
        if previous is not None and previous.attempt == attempt and old_route != route:
            self.refused += 1
            return Registration(
                [],
                refused=(
                    f"worker {index} attempt {attempt} is registered from another route: "
                    "a route never changes hands (a replayed registration?)"
                ),
            )
        # Spark's task id comes with the task's start (``TaskStarted``) of this attempt.
        started = self.tasks.get(index)
        task_id = (
            started[1].task_attempt_id if started is not None and started[0] == attempt else None
        )
        info = WorkerInfo(
            index=index,
            attempt=attempt,
            pid=msg.pid,
            host=msg.host,
            address=msg.address,
            task_attempt_id=task_id,
            registered_at=now,
            info=dict(msg.info),
        )
        self.workers[index] = info
        self.routes[index] = route
        self.exited.discard(index)
        self.seen_pids.add((info.host, info.pid))
        first_full = not self.all_registered and len(self.workers) == self.num_workers
        if first_full:
            self.all_registered = True
        peers = self.peers()
        sends = [
            Send(route, Welcome(self.num_workers, peers, self.assignments.get(index), attempt))
        ]
        if self.stopping:  # re-run by Spark while the driver shuts down: stop it at once
            sends.append(Send(route, Stop("launcher is stopping")))
        restarted = previous is not None and previous.attempt < attempt
        if restarted and old_route is not None and old_route != route:
            sends.append(Send(old_route, Stop(f"replaced by attempt {attempt}")))
        update: Peers | None = None
        if first_full:
            update = Peers(peers, sorted(peers))
        elif restarted:
            update = Peers(peers, [index])
        if update is not None:
            sends += [Send(r, update) for i, r in sorted(self.routes.items()) if i != index]
        event = WorkerRegistered(
            restarted=restarted,
            previous_attempt=previous.attempt if previous is not None else None,
            pid=info.pid,
            host=info.host,
            address=info.address,
        )
        return Registration(sends, event)

    # -- other messages ------------------------------------------------------------

    def accepts(self, index: int, attempt: int, route: bytes, one_shot: bool) -> bool:
        """Whether a message (not a registration) from ``index``/``attempt`` arriving
        on ``route`` is taken. ``one_shot``: a message a task sends on a short-lived
        socket of its own (``send_once``), which has no bound route."""
        if not 0 <= index < self.num_workers:
            return False
        current = self.workers.get(index)
        if current is None:
            return one_shot
        if attempt < current.attempt:
            return False  # from an attempt that has been replaced
        return one_shot or (attempt == current.attempt and self.routes.get(index) == route)

    def task_started(self, index: int, attempt: int, msg: TaskStarted) -> None:
        self.tasks[index] = (attempt, msg)
        self.seen_pids.add((msg.host, msg.pid))

    def exiting(self, index: int) -> None:
        self.exited.add(index)

    # -- views ---------------------------------------------------------------------

    def peers(self) -> dict[int, str]:
        """worker index -> data address, for the workers registered so far."""
        return {i: w.address for i, w in sorted(self.workers.items())}

    def unreachable(self) -> list[int]:
        """Workers that never registered (so cannot be told to stop)."""
        return [i for i in range(self.num_workers) if i not in self.routes]

    def all_exited(self) -> bool:
        """Every registered worker said it is exiting."""
        return set(self.routes) <= self.exited

    def stop_all(self, reason: str) -> list[Send]:
        """The driver stops: a ``Stop`` to every registered worker; later
        registrations are stopped at once."""
        self.stopping = True
        return [Send(route, Stop(reason)) for _, route in sorted(self.routes.items())]
