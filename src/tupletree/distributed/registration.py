"""Registration and the peer table: a pure state machine of the driver's.

``Registry`` holds which attempt of each worker is current, the route (ZeroMQ routing
id) its signed registration came from, and its data address; it decides, for each
registration, what to send to whom, and returns it (``Send`` outcomes) instead of
sending: the control service does the I/O. No sockets, threads or clocks here, so
every rule is tested with plain values.

The rules:

- A worker index outside ``range(num_workers)`` is refused.
- An attempt older than the current one, or than the generation's first (an old
  process that outlived its replacement, or a rebalance), is told to stop, and changes
  nothing.
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

A rebalance starts a new generation (``new_generation``): the tables empty, the worker
count may change, and every index gets a floor, the first attempt of its new run, below
which nothing is taken.

Bounds: the tables hold one entry per worker index; ``seen_pids`` one per process
that registered or started a task, which a topology's life bounds only by its
restarts (the launcher reads it to wait for local processes on stop).
"""

from __future__ import annotations

from dataclasses import dataclass

from tupletree.distributed.control import (
    Peers,
    Register,
    Stop,
    TaskStarted,
    ToWorker,
    Welcome,
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


@dataclass(frozen=True)
class Send:
    """An outcome: send ``message`` to the worker behind ``route``."""

    route: bytes
    message: ToWorker


@dataclass(frozen=True)
class Registration:
    """What a registration decided: the messages to send, the worker's new entry (None
    when nothing changed), whether it replaced an earlier attempt, and why it was
    refused (None when it was not)."""

    sends: list[Send]
    registered: WorkerInfo | None = None
    restarted: bool = False
    refused: str | None = None


class Registry:
    """The driver's view of its workers' registrations (see the module docstring)."""

    def __init__(self, num_workers: int) -> None:
        self.workers: dict[int, WorkerInfo] = {}
        self.routes: dict[int, bytes] = {}
        self.tasks: dict[int, tuple[int, TaskStarted]] = {}  # index -> (attempt, its start)
        self.exited: set[int] = set()
        self.seen_pids: set[tuple[str, int]] = set()
        self.new_generation(num_workers, {})

    def new_generation(self, num_workers: int, floors: dict[int, int]) -> None:
        """Forget the current workers (every one has ended): ``num_workers`` workers
        register from now on, worker ``i`` from attempt ``floors.get(i, 0)`` on."""
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.num_workers = num_workers
        self.floors = dict(floors)
        self.workers.clear()
        self.routes.clear()
        self.tasks.clear()
        self.exited.clear()
        self.all_registered = False
        self.stopping = False

    # -- registration --------------------------------------------------------------

    def register(self, route: bytes, index: int, attempt: int, msg: Register) -> Registration:
        """Decide on a signed registration that came from ``route``."""
        if not 0 <= index < self.num_workers:
            return Registration([], refused=f"registration from unknown worker index {index}")
        previous = self.workers.get(index)
        if attempt < self.floors.get(index, 0) or (
            previous is not None and previous.attempt > attempt
        ):
            # An older attempt that outlived its replacement: retire it.
            return Registration([Send(route, Stop(f"attempt {attempt} was replaced"))])
        owner = next((i for i, r in self.routes.items() if r == route and i != index), None)
        if owner is not None:
            return Registration(
                [], refused=f"worker {index}'s registration came on worker {owner}'s route"
            )
        old_route = self.routes.get(index)
        if previous is not None and previous.attempt == attempt and old_route != route:
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
        )
        self.workers[index] = info
        self.routes[index] = route
        self.exited.discard(index)
        self.seen_pids.add((info.host, info.pid))
        first_full = not self.all_registered and len(self.workers) == self.num_workers
        if first_full:
            self.all_registered = True
        peers = self.peers()
        sends = [Send(route, Welcome(self.num_workers, peers, attempt))]
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
        return Registration(sends, info, restarted)

    # -- other messages ------------------------------------------------------------

    def accepts(self, index: int, attempt: int, route: bytes, one_shot: bool) -> bool:
        """Whether a message (not a registration) from ``index``/``attempt`` arriving
        on ``route`` is taken. ``one_shot``: a message a task sends on a short-lived
        socket of its own (``send_once``), which has no bound route."""
        if not 0 <= index < self.num_workers or attempt < self.floors.get(index, 0):
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
