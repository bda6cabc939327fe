"""Storm's supervisor decisions for Spark workers, as plain objects: when to start a worker
again after it died (backoff), when its deaths make a crash loop, and when a live worker
counts as hung. No clock, no Spark, no sockets: the launcher feeds them times and events.

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
    max_delay: float = 30.0
    stable_secs: float = 60.0
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
    """The decision for one death of ``worker``: wait ``delay`` seconds, then start it
    again. ``crash_loop`` is set when this death makes (or continues) a crash loop;
    ``restarts`` counts every restart of the worker since it was first started."""

    worker: int
    died_attempt: int
    reason: str
    lived: float
    delay: float
    restarts: int
    quick_deaths: int
    crash_loop: bool


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
