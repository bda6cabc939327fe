"""DRPC's errors: what a caller of ``execute`` can get instead of a result.

Each error carries the function name and the reason as attributes (``function``,
``reason``), so callers can branch on them without parsing the message, and the
subclasses also subclass the matching built-in (TimeoutError, LookupError,
ConnectionError), so ``except TimeoutError`` works as a Python user would expect.
``DRPCBusyError`` (a bound of the server is reached) is a plain DRPCExecutionError.
"""

from __future__ import annotations


class DRPCExecutionError(RuntimeError):
    """A DRPC request did not produce a result (Storm's DRPCExecutionException).

    Raised when the topology failed the request (a tuple of it failed, or a
    FinishedCallback raised FailedException), and as the base of the more specific
    errors below.
    """

    def __init__(self, function: str, reason: str) -> None:
        super().__init__(f"DRPC request to function {function!r} failed: {reason}")
        self.function = function
        self.reason = reason

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Keep (function, reason) through pickling (BaseException would pass the message).
        return (type(self), (self.function, self.reason))


class DRPCTimeoutError(DRPCExecutionError, TimeoutError):
    """The request got no answer within ``drpc.request.timeout.secs``."""


class DRPCUnknownFunctionError(DRPCExecutionError, LookupError):
    """No running topology serves this function (no DRPC spout fetches it)."""


class DRPCConnectionError(DRPCExecutionError, ConnectionError):
    """The DRPC server could not be reached, or answered something that is not DRPC."""


class DRPCBusyError(DRPCExecutionError):
    """The DRPC server refused the request because one of its bounds is reached (pending
    requests, their arguments, bodies being read, distinct functions, connections);
    nothing of it was kept. Try again later (HTTP 503, ``X-DRPC-Error: busy``)."""
