"""Storm's supervisor decisions for the driver's workers, as plain objects: when to start
a worker again after it died (backoff), when its deaths make a crash loop, and when a live
worker counts as hung. No clock, no Spark, no sockets: ``DriverState`` (driver_state.py)
feeds them times and events.

Why the driver decides, and restarts by relaunching a worker's own Spark job: each worker
runs as a Spark job of one task. Spark re-runs a task whose process died, but only
``spark.task.maxFailures - 1`` times per job (the fourth death aborted the one job that
ran every worker, and the topology with it). A job per worker turns Spark's limit into a
per-job detail: when a worker's job ends for any reason while its topology is alive (its
retries spent, its task ended "cleanly", its task killed) the driver submits that worker a
new job, and the other workers never notice. The alternative, a supervisor process inside
each Spark task that forks the worker and restarts it, could not survive the death of the
Spark task's own process (the OOM killer, a lost executor), would add a process per
worker, and would need a second control channel between the two; the driver already
hears every attempt start and every worker's reports, so one place decides. Spark's own
quick retries still happen inside a job; the backoff is applied by the task, which asks
the driver how long to wait before it starts the worker (``RestartPolicy.died``).

A hung worker (alive, reporting nothing from its scheduler loop for
``supervisor.worker.timeout.secs``) is killed through Spark (``killTaskAttempt``, which
works on any cluster and does not count against Spark's failure limit) and re-run.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RestartPolicy:
    """How restarts are paced.

    - ``base_delay``: the wait before the second quick restart in a row; each further
      quick death doubles it, up to ``max_delay``. The first restart after a stable run is
      immediate, as Storm's supervisor restarts a dead worker at once.
    - ``stable_secs``: an attempt that lived this long was healthy: the backoff and the
      crash-loop count start again from zero.
    - ``crash_loop_after``: this many quick deaths in a row are a crash loop (reported,
      with the last error; restarts go on, at ``max_delay`` at most).
    """

    base_delay: float = 0.5
    max_delay: float = 10.0
    stable_secs: float = 30.0
    crash_loop_after: int = 3

    def __post_init__(self) -> None:
        if self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError(
                f"need 0 <= base_delay <= max_delay, got {self.base_delay}, {self.max_delay}"
            )
        if self.stable_secs <= 0:
            raise ValueError(f"stable_secs must be > 0, got {self.stable_secs}")
        if self.crash_loop_after < 1:
            raise ValueError(f"crash_loop_after must be >= 1, got {self.crash_loop_after}")

    def delay(self, quick_deaths: int) -> float:
        """Seconds to wait before starting a worker whose last ``quick_deaths`` attempts
        in a row died young (0 for the first)."""
        if quick_deaths <= 1:
            return 0.0
        return min(self.max_delay, self.base_delay * 2 ** min(quick_deaths - 2, 64))


@dataclass(frozen=True)
class Restart:
    """The decision for one death of ``worker``'s attempt ``died_attempt``: why it ended
    (``reason``) after ``lived`` seconds; wait ``delay`` seconds, then start it again.
    ``restarts`` counts every restart of the worker since it was first started,
    ``quick_deaths`` the attempts in a row that died young; ``crash_loop`` is set once
    they reach the policy's ``crash_loop_after``."""

    worker: int
    died_attempt: int
    reason: str
    lived: float
    delay: float
    restarts: int
    quick_deaths: int
    crash_loop: bool

    def text(self) -> str:
        """The ``errors()`` line for this restart."""
        text = (
            f"worker {self.worker} restarted (restart {self.restarts}): attempt "
            f"{self.died_attempt} ended after {self.lived:.1f} s: {self.reason}; next attempt "
            f"in {self.delay:.1f} s"
        )
        if self.crash_loop:
            text += (
                f"; crash loop: {self.quick_deaths} attempts in a row died young, "
                f"the last with: {self.reason}"
            )
        return text


@dataclass
class WorkerRestarts:
    """The restart history of one worker: what ``RestartPolicy`` needs, nothing else.

    ``died`` is idempotent per attempt: the launcher may learn of one death twice (its
    successor starting, and its job ending), and an attempt older than the last one
    counted is a straggler, not a new death."""

    worker: int
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    restarts: int = 0
    quick_deaths: int = 0
    counted_through: int = -1
    last_error: str | None = None

    def died(self, attempt: int, lived: float, reason: str) -> Restart | None:
        """Record that ``attempt`` died after ``lived`` seconds; None if already counted."""
        if attempt <= self.counted_through:
            return None
        self.counted_through = attempt
        self.restarts += 1
        self.quick_deaths = self.quick_deaths + 1 if lived < self.policy.stable_secs else 0
        self.last_error = reason
        return Restart(
            worker=self.worker,
            died_attempt=attempt,
            reason=reason,
            lived=lived,
            delay=self.policy.delay(self.quick_deaths),
            restarts=self.restarts,
            quick_deaths=self.quick_deaths,
            crash_loop=self.quick_deaths >= self.policy.crash_loop_after,
        )


def hung_for(
    now: float,
    started_at: float,
    last_beat: float | None,
    *,
    timeout: float,
    start_timeout: float,
) -> float | None:
    """How long a worker has been silent if that makes it hung, else None.

    ``started_at`` is when its current attempt started (its worker code, after any
    backoff), ``last_beat`` when its scheduler loop last reported (None: not yet). Before
    the first report the worker is starting (building its tasks, ``prepare``/``open``)
    and gets ``start_timeout``, as Storm's supervisor gives a new worker
    ``supervisor.worker.start.timeout.secs``; after, ``timeout``.
    """
    if last_beat is None:
        silent = now - started_at
        return silent if silent > start_timeout else None
    silent = now - max(last_beat, started_at)
    return silent if silent > timeout else None


@dataclass(frozen=True)
class Kill:
    """A decision to kill attempt ``attempt`` of ``worker`` as hung: through Spark, or,
    ``hard``, its process (Spark's kill did not take within the timeout)."""

    worker: int
    attempt: int
    hard: bool


class Supervisor:
    """What the driver knows about its workers' lives, and what it decides from it.

    Fed with events and the caller's clock (``now``), it answers: how long a starting
    task must wait (``task_started``), what a death means (``Restart``), which
    attempt numbers a worker's next Spark job uses (``next_base``) and whom to kill as
    hung (``check_hung``). Not thread-safe: the launcher calls it under its lock.

    Before ``live`` (every worker registered once), deaths are not counted: a worker
    that cannot start is the start's error, not a restart. Bounds: a few entries per
    worker index.
    """

    def __init__(
        self,
        num_workers: int,
        policy: RestartPolicy | None = None,
        *,
        worker_timeout: float | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        if worker_timeout is not None and worker_timeout <= 0:
            raise ValueError(f"worker_timeout must be > 0 or None, got {worker_timeout}")
        self.policy = policy or RestartPolicy()
        self.worker_timeout = worker_timeout
        self.start_timeout = start_timeout
        self.live = False
        self.history = {i: WorkerRestarts(i, self.policy) for i in range(num_workers)}
        # worker -> (attempt, when its worker code starts: after any backoff)
        self.started: dict[int, tuple[int, float]] = {}
        self.beats: dict[int, tuple[int, float]] = {}  # worker -> (attempt, last report)
        self.highest: dict[int, int] = {}  # worker -> the highest attempt heard of
        self.fatal: dict[int, tuple[int, str]] = {}  # worker -> (attempt, its fatal error)
        self.returned: dict[int, int] = {}  # worker -> the attempt whose code returned
        self.killing: dict[int, tuple[int, float]] = {}  # worker -> (attempt, since)
        self.owed: dict[int, float] = {}  # worker -> backoff its next task must wait

    # -- events ------------------------------------------------------------------------

    def task_started(self, worker: int, attempt: int, now: float) -> tuple[float, Restart | None]:
        """A task of ``worker`` started attempt ``attempt``: (seconds it must wait
        before starting the worker, the restart this start reveals). A start after the
        first means the attempt before it died (Spark re-ran the task). Taken once per
        attempt: a start of an attempt already started (a replayed frame) changes
        nothing, so it cannot restart the clock that finds a hung worker."""
        if attempt < self.highest.get(worker, -1):
            return 0.0, None  # a straggler of an attempt that was replaced
        if attempt <= self.started.get(worker, (-1, 0.0))[0]:
            return 0.0, None  # this attempt's start was heard already
        self._heard(worker, attempt)
        restart = None
        if self.live and attempt > 0:
            unsaid = "its process died without a word (killed, or out of memory?)"
            reason = self._reason(worker, attempt - 1, None, unsaid)
            restart = self._died(worker, attempt - 1, now, reason)
        delay = restart.delay if restart is not None else self.owed.pop(worker, 0.0)
        self.started[worker] = (attempt, now + delay)
        return delay, restart

    def registered(self, worker: int, attempt: int, now: float) -> None:
        self._heard(worker, attempt)
        if self.started.get(worker, (-1, 0.0))[0] < attempt:  # its task start was lost
            self.started[worker] = (attempt, now)

    def beat(self, worker: int, attempt: int, now: float) -> None:
        """The worker's loop reported (metrics, ready): it is not hung."""
        self.beats[worker] = (attempt, now)

    def failed(self, worker: int, attempt: int, error: str) -> None:
        """The worker's code raised ``error`` (its task is about to fail)."""
        self.fatal[worker] = (attempt, error)

    def exiting(self, worker: int, attempt: int) -> None:
        """The worker's code returned (its task is about to end)."""
        self.returned[worker] = attempt

    def job_ended(
        self, worker: int, first_attempt: int, now: float, error: str | None
    ) -> Restart | None:
        """The Spark job that ran ``worker`` from ``first_attempt`` on ended while the
        topology lives: its last attempt died. The restart (its delay is the caller's
        to wait, before the next job), None if that death was counted already."""
        attempt = max(self.highest.get(worker, first_attempt), first_attempt)
        self._heard(worker, attempt)
        unsaid = "its Spark task ended while the topology is running"
        restart = self._died(worker, attempt, now, self._reason(worker, attempt, error, unsaid))
        self.owed.pop(worker, None)
        return restart

    def next_base(self, worker: int) -> int:
        """The attempt number the next Spark job of ``worker`` starts from."""
        return self.highest.get(worker, -1) + 1

    def check_hung(self, now: float) -> tuple[list[Kill], list[Restart]]:
        """Workers whose loops were silent too long: whom to kill, and the restarts
        their deaths are (reported once; the next start waits their backoff)."""
        timeout = self.worker_timeout
        if timeout is None or not self.live:
            return [], []
        kills: list[Kill] = []
        restarts: list[Restart] = []
        for worker, (attempt, started_at) in self.started.items():
            killing = self.killing.get(worker)
            if killing is not None and killing[0] == attempt:
                if now - killing[1] > timeout:  # the kill did not take: kill harder
                    self.killing[worker] = (attempt, now)
                    kills.append(Kill(worker, attempt, hard=True))
                continue
            if attempt <= self.history[worker].counted_through:
                continue  # known dead: being started again
            beat = self.beats.get(worker)
            last = beat[1] if beat is not None and beat[0] == attempt else None
            silent = hung_for(
                now, started_at, last, timeout=timeout, start_timeout=self.start_timeout
            )
            if silent is None:
                continue
            reason = (
                f"it hung: no report from its loop for {silent:.0f} s "
                f"(supervisor.worker.timeout.secs {timeout:g}); killed"
            )
            restart = self._died(worker, attempt, now, reason)
            if restart is not None:
                restarts.append(restart)
                self.owed[worker] = restart.delay
            self.killing[worker] = (attempt, now)
            kills.append(Kill(worker, attempt, hard=False))
        return kills, restarts

    def new_generation(self, num_workers: int) -> None:
        """Every worker ended (a rebalance): ``num_workers`` workers start again, each
        from its next attempt, and the topology is not live until they all registered.
        Restart counts go on; nothing else of the ended attempts matters."""
        for worker in range(num_workers):
            self.history.setdefault(worker, WorkerRestarts(worker, self.policy))
        for table in (self.started, self.beats, self.fatal, self.returned, self.killing):
            table.clear()
        self.owed.clear()
        self.live = False

    def restarts(self) -> dict[int, int]:
        return {i: h.restarts for i, h in self.history.items()}

    # -- internals -----------------------------------------------------------------------

    def _heard(self, worker: int, attempt: int) -> None:
        self.highest[worker] = max(attempt, self.highest.get(worker, attempt))

    def _died(self, worker: int, attempt: int, now: float, reason: str) -> Restart | None:
        started = self.started.get(worker)
        lived = now - started[1] if started is not None and started[0] == attempt else 0.0
        return self.history[worker].died(attempt, max(0.0, lived), reason)

    def _reason(self, worker: int, attempt: int, job_error: str | None, unsaid: str) -> str:
        """Why ``attempt`` ended, as well as the driver can tell (``unsaid`` if nothing
        tells)."""
        fatal = self.fatal.get(worker)
        if fatal is not None and fatal[0] == attempt:
            return f"it raised {fatal[1]}"
        if job_error is not None:
            return f"its Spark job failed: {job_error}"
        if self.returned.get(worker) == attempt:
            return "its worker code returned while the topology is running"
        return unsaid
