"""TopologyLogs: the log records a topology's components logged, kept per topology, for
``LocalCluster.logs(name)`` (what SparkCluster's workers forward to their driver).

Rules, as a Spark worker's forwarder (distributed/worker_main.py): records at WARNING
and up, from any logger but tupletree's own (a task's errors are already in
``cluster.errors``); each kept as one line, ``LEVEL: logger: message``. A record
belongs to the topology whose worker runs on the thread that logged it: the thread
marks itself with ``running(name)`` around the worker's work (LocalCluster's worker
thread for its whole life in real time; the caller's thread around each step in
simulated time). Records of other threads (a connector's I/O thread, the user's own)
are not a topology's and are not kept.

Bounds: the newest ``limit`` lines per topology, each cut to ``MAX_ERROR_CHARS``;
``forget(name)`` drops a topology's lines when it is killed. Cost: one thread-local
read per record that reaches the root logger at WARNING or up; nothing on the tuple
path.

The handler sits on the root logger, which would silence Python's last-resort handler
(the one that prints warnings to stderr when the application configured no logging):
so a record that no other handler receives is handed to ``logging.lastResort``, as it
would have been without this one (once, by the first of the clusters' handlers).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from tupletree.runtime.error_log import MAX_ERROR_CHARS, safe_str

MAX_LOG_LINES_KEPT = 1000


class TopologyLogs(logging.Handler):
    """``install()``, ``running(name)``, ``lines(name)``, ``forget(name)``,
    ``uninstall()``."""

    def __init__(self, limit: int = MAX_LOG_LINES_KEPT) -> None:
        super().__init__(logging.WARNING)
        self.limit = limit
        self._current = threading.local()
        self._lines: dict[str, deque[str]] = {}
        self._lines_lock = threading.Lock()

    def install(self) -> TopologyLogs:
        logging.getLogger().addHandler(self)
        return self

    def uninstall(self) -> None:
        logging.getLogger().removeHandler(self)

    @contextmanager
    def running(self, name: str) -> Iterator[None]:
        """Records this thread logs meanwhile are topology ``name``'s."""
        previous = getattr(self._current, "name", None)
        self._current.name = name
        try:
            yield
        finally:
            self._current.name = previous

    def lines(self, name: str) -> list[str]:
        """Topology ``name``'s lines, oldest first."""
        with self._lines_lock:
            kept = self._lines.get(name)
            return list(kept) if kept is not None else []

    def forget(self, name: str) -> None:
        with self._lines_lock:
            self._lines.pop(name, None)

    def emit(self, record: logging.LogRecord) -> None:
        self._last_resort(record)
        name = getattr(self._current, "name", None)
        if name is None or record.name == "tupletree" or record.name.startswith("tupletree."):
            return
        try:
            line = f"{record.levelname}: {record.name}: {self.format(record)}"
            line = safe_str(line, MAX_ERROR_CHARS)  # kept ``limit`` times
        except Exception:
            self.handleError(record)
            return
        with self._lines_lock:
            kept = self._lines.get(name)
            if kept is None:
                kept = self._lines[name] = deque(maxlen=self.limit)
            kept.append(line)

    def _last_resort(self, record: logging.LogRecord) -> None:
        """Print ``record`` as Python would have without this handler: through
        ``logging.lastResort`` when no other handler of its logger's chain takes it."""
        last = logging.lastResort
        if last is None or record.levelno < last.level:
            return
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(not isinstance(h, TopologyLogs) for h in logger.handlers):
                return
            logger = logger.parent if logger.propagate else None
        # Several clusters' handlers may be installed: the first of them prints it, once.
        ours = [h for h in logging.getLogger().handlers if isinstance(h, TopologyLogs)]
        if ours and ours[0] is self:
            last.handle(record)
