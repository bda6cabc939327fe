"""LocalDRPC: an in-process DRPC server for topologies on a LocalCluster.

    drpc = LocalDRPC()
    cluster.submit_topology("t", conf, builder.create_local_topology(drpc))
    drpc.execute("exclamation", "aaa")     # blocks this thread until the result

No sockets: the topology's DRPC spout and ReturnResults reach this object's request
book through ``tupletree.drpc.registry``. ``execute`` blocks the calling thread, so
the cluster must run in real time (``LocalCluster()``): with simulated time nothing
would fetch the request while the caller waits.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from tupletree.drpc import registry
from tupletree.drpc.pending import (
    DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    PendingRequests,
    timeout_from_conf,
)


class LocalDRPC:
    """In-process DRPC: ``execute(function, args) -> result``; thread-safe.

    ``conf`` may set ``drpc.request.timeout.secs`` (default 600).
    """

    def __init__(
        self,
        conf: Mapping[str, Any] | None = None,
        *,
        unknown_function_wait_secs: float = DEFAULT_UNKNOWN_FUNCTION_WAIT_SECS,
    ) -> None:
        timeout = timeout_from_conf(conf)
        self.key = f"local-drpc-{uuid.uuid4().hex}"
        self._book = PendingRequests(
            timeout_secs=timeout, unknown_function_wait_secs=unknown_function_wait_secs
        )
        registry.register(self.key, self._book)

    @property
    def book(self) -> PendingRequests:
        return self._book

    def execute(self, function: str, args: str) -> str:
        """Run ``function`` on ``args`` and return its result; raise DRPCExecutionError
        when the topology fails the request, DRPCTimeoutError after
        drpc.request.timeout.secs, DRPCUnknownFunctionError when nothing serves it."""
        return self._book.execute(function, args)

    def pending_requests(self) -> int:
        """How many requests this server holds state for (0 once all are answered)."""
        return self._book.pending()

    def shutdown(self) -> None:
        """Fail waiting requests and detach from the registry (Storm's shutdown)."""
        self._book.close("LocalDRPC was shut down")
        registry.unregister(self.key)

    def __reduce__(self) -> tuple[Any, ...]:
        # A LocalDRPC inside a pickled component travels as its key; the copy is a
        # handle on the same book (same process only).
        return (_from_registry, (self.key,))

    def __enter__(self) -> LocalDRPC:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"LocalDRPC({self.key}, pending={self._book.pending()})"


def _from_registry(key: str) -> LocalDRPC:
    drpc = LocalDRPC.__new__(LocalDRPC)
    drpc.key = key
    drpc._book = registry.lookup(key)
    return drpc
