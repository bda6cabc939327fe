"""ErrorMailbox: errors from a connector's I/O thread, reported on the task's thread.

``post`` (I/O thread) wraps an exception in a ConnectorError naming the connector and
the address, with credentials scrubbed (``Connector.scrubbed``), logs it, and queues it
unless the same text was posted less than ``every_secs`` ago (a broker that stays down
is reported every ``every_secs``, not on every reconnect attempt); at most ``limit``
errors wait. ``deliver`` (task thread) hands them to the collector's ``report_error``,
so they appear in ``cluster.errors(name)``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from tupletree.connectors.errors import ConnectorError

log = logging.getLogger("tupletree.connectors")


def as_connector_error(connector: str, address: str, exc: BaseException) -> ConnectorError:
    if isinstance(exc, ConnectorError):
        return exc
    return ConnectorError(connector, address, f"{type(exc).__name__}: {exc}")


class ErrorMailbox:
    def __init__(
        self,
        wrap: Callable[[BaseException], ConnectorError],
        every_secs: float = 30.0,
        limit: int = 100,
    ) -> None:
        self._wrap = wrap
        self.every_secs = every_secs
        self._limit = limit
        self._queue: deque[ConnectorError] = deque(maxlen=limit)
        self._last: dict[str, float] = {}  # I/O thread only

    def post(self, exc: BaseException) -> None:
        err = self._wrap(exc)
        text = str(err)
        now = time.monotonic()
        if now - self._last.get(text, -self.every_secs) < self.every_secs:
            return
        if len(self._last) >= self._limit:
            self._last.clear()
        self._last[text] = now
        log.warning("%s", text)
        self._queue.append(err)

    def __bool__(self) -> bool:
        return bool(self._queue)

    def deliver(self, collector: Any) -> None:
        queue = self._queue
        while queue:
            collector.report_error(queue.popleft())


def close_quietly(session: Any) -> None:
    """Close a broker session that may be broken (closing one often raises)."""
    try:
        session.close()
    except Exception as exc:
        log.debug("closing a broker session: %s", exc)
