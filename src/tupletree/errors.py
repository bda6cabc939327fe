"""Exceptions raised by tupletree.

Each error carries the offending names as attributes (as attrs does), so a test or a
caller can tell *what* was wrong without parsing the message, and the message names
them so a person can too.
"""

from __future__ import annotations


class FailedException(Exception):
    """Raise from a BasicBolt's ``execute`` to fail the input tuple (Storm's FailedException).

    The tuple's spout tuple(s) are failed at once, so the spout can replay them without
    waiting for the message timeout.
    """


class InvalidTopologyError(ValueError):
    """A topology's structure is wrong: an unknown component, stream or field, a bad id...

    ``component``, ``stream`` and ``field`` name the offender (None where not relevant).
    """

    def __init__(
        self,
        message: str,
        *,
        component: str | None = None,
        stream: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.component = component
        self.stream = stream
        self.field = field


class InvalidConfigError(ValueError):
    """A known config key has a value of the wrong type or range; ``key`` names it."""

    def __init__(self, message: str, *, key: str, value: object) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


class EmitError(ValueError):
    """An emit that cannot be routed: an undeclared stream, a wrong number of values,
    ``emit`` on a direct stream or ``emit_direct`` on a regular one.

    Raised inside the user's ``execute``/``next_tuple`` call, where the mistake was made.
    """

    def __init__(self, message: str, *, component: str, stream: str) -> None:
        super().__init__(message)
        self.component = component
        self.stream = stream


class TopologyNotFoundError(KeyError):
    """No running topology has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no topology named {self.name!r} is running"


class WorkerDiedError(RuntimeError):
    """A topology's worker stopped running on its own: a bug in tupletree itself (a
    user's exception is reported in ``errors`` and never ends a worker). ``name`` is
    the topology; ``cause`` says what ended the worker."""

    def __init__(self, name: str, cause: str) -> None:
        super().__init__(f"the worker of topology {name!r} died: {cause}")
        self.name = name
        self.cause = cause


class TopologyRebalancingError(RuntimeError):
    """A call that a rebalance in progress refuses (activate, deactivate, another
    rebalance): the rebalance puts back the status it found when it ends. ``name`` is
    the topology."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
