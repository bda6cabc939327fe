"""Local worker processes, through /proc: waiting for them to end (the launcher's stop)
and killing one that hangs when nothing gentler took."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time


def wait_pids_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` s for these local processes to exit; the ones still alive."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live (non-zombie) process on this host."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def kill_if_here(host: str, pid: int) -> None:
    """SIGKILL process ``pid`` if it runs on this host (``host`` as it said) and lives."""
    if host == socket.gethostname() and pid_alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
