"""This process's resident memory, for a worker's stats (``cluster.worker_stats``)."""

from __future__ import annotations

import os


def resident_bytes() -> int | None:
    """This process's resident memory (Linux ``/proc``); None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
