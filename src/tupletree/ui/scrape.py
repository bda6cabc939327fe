"""ScrapeCache: ``/metrics`` answered from a scrape at most ``ttl`` seconds old.

Each scrape reads every running topology's metrics (on SparkCluster: every worker's
latest report, merged) and renders them; a client scraping in a tight loop made the
driver do that without pause and cut the topology's throughput to a third. With the
cache the cluster is read at most once per ``ttl`` whatever the number of scrapers,
and scrapes that arrive while one is being made wait for it instead of making their
own (one at a time, on the loop's thread pool: rendering blocks). Prometheus scrapes
every 15 s or more, so an answer up to a second old changes nothing it sees.

Bounds: one body held (the last); at most one rendering at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tupletree.connection_table import check_timeout


class ScrapeCache:
    """``await get()``: the body of ``make()``, made again once it is ``ttl`` s old."""

    def __init__(
        self,
        make: Callable[[], bytes],
        ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_timeout("metrics cache ttl", ttl, 3600.0)
        self._make = make
        self.ttl = float(ttl)
        self._clock = clock
        self._lock: asyncio.Lock | None = None
        self._body: bytes | None = None
        self._made_at = 0.0
        self.made = 0  # how many times the body was made (for tests and the bench)

    async def get(self) -> bytes:
        if self._lock is None:
            self._lock = asyncio.Lock()  # made on the loop that uses it
        async with self._lock:
            if self._body is not None and self._clock() - self._made_at < self.ttl:
                return self._body
            started = self._clock()
            body = await asyncio.get_running_loop().run_in_executor(None, self._make)
            self._body, self._made_at = body, started
            self.made += 1
            return body
