"""DescriptorBudget: the file descriptors tupletree's HTTP services may hold, so that
neither starves the other nor the process that hosts them.

Both services (the DRPC server, the web view) run in the driver process, next to
everything else it does (opening files, Spark's sockets, the DRPC spouts' clients, the
control plane's sockets). Each connection holds a descriptor; with no budget, one client
opening connections took the process to its limit (RLIMIT_NOFILE) and every part of the
driver failed with "Too many open files".

The rules:

- the process keeps ``reserve`` descriptors that no service may take:
  ``min(RESERVE_FDS, soft limit // 4)``;
- a service takes, while it runs, ``connections + overhead`` descriptors: its connection
  cap plus what its refusals and its listening socket hold (``webserver.WebServer``);
  it gives them back when it stops;
- when that does not fit under the soft limit, the soft limit is raised toward the hard
  one (as far as needed, never past it);
- when it still does not fit, a cap the user asked for is refused (ValueError with the
  numbers and the fix); a default cap shrinks to half of what is left (so a second
  service still finds room), with a warning, and is refused below ``MIN_CONNECTIONS``.

Every service holds at most its cap (``ConnectionTable``), so these descriptors are an
upper bound on what the services can make the process hold. The limits are read and
set through two functions given at construction (``resource``'s by default), so the
rules are tested with plain numbers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("tupletree.http")

RESERVE_FDS = 256
MIN_CONNECTIONS = 8

Limits = tuple[int, int]  # (soft, hard); a hard limit of -1 is unlimited


def _get_limits() -> Limits:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _set_soft(soft: int) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class DescriptorBudget:
    """The descriptors held by the services of one process (see the module docstring)."""

    def __init__(
        self,
        get_limits: Callable[[], Limits] = _get_limits,
        set_soft: Callable[[int], None] = _set_soft,
    ) -> None:
        self._get_limits = get_limits
        self._set_soft = set_soft
        self._lock = threading.Lock()
        self.held = 0

    def reserve(self, soft: int) -> int:
        return min(RESERVE_FDS, soft // 4)

    def take(self, name: str, connections: int, overhead: int, *, explicit: bool) -> int:
        """Take descriptors for a service with a cap of ``connections``; the cap it
        gets (``connections``, or fewer for a default cap that does not fit)."""
        with self._lock:
            soft, hard = self._get_limits()
            wanted = self.held + connections + overhead
            if wanted + self.reserve(soft) > soft:
                soft = self._raise_soft(soft, hard, wanted)
            room = soft - self.reserve(soft) - self.held - overhead
            if connections <= room:
                granted = connections
            else:
                fix = f"raise the limit (ulimit -n, now {soft}) or lower {name}'s max_connections"
                numbers = (
                    f"{name}: max_connections={connections} needs {connections + overhead} "
                    f"file descriptors, but the process's limit is {soft}, of which "
                    f"{self.reserve(soft)} are kept for the rest of the process and "
                    f"{self.held} are held by its other services"
                )
                if explicit:
                    raise ValueError(f"{numbers}; {fix}")
                granted = room // 2
                if granted < MIN_CONNECTIONS:
                    raise ValueError(f"{numbers}: fewer than {MIN_CONNECTIONS} are left; {fix}")
                log.warning("%s: serving at most %d connections instead; %s", numbers, granted, fix)
            self.held += granted + overhead
            return granted

    def give_back(self, descriptors: int) -> None:
        with self._lock:
            self.held = max(0, self.held - descriptors)

    def _raise_soft(self, soft: int, hard: int, wanted: int) -> int:
        # The reserve grows with the limit up to RESERVE_FDS: ask for enough for both.
        target = wanted + RESERVE_FDS
        if hard != -1:
            target = min(target, hard)
        if target <= soft:
            return soft
        try:
            self._set_soft(target)
        except (OSError, ValueError) as exc:
            log.info("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
            return soft
        log.info("raised the open-file limit from %d to %d for tupletree's services", soft, target)
        return target


# The one budget of this process: every WebServer takes from it.
PROCESS_BUDGET = DescriptorBudget()
