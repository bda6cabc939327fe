"""The one way the driver waits: for a value computed under a lock, or a timeout.

``wait_for(condition, check, timeout)`` takes the condition's lock and calls ``check()``
each time the condition is notified (whoever changes what ``check`` reads notifies it)
until it returns something other than None, which is returned; None once ``timeout``
seconds passed first (``None``: no limit). ``check`` may raise to end the wait with an
error (a job that failed). One helper, so no wait in the driver hand-rolls a deadline
loop on a condition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: threading.Condition, check: Callable[[], T | None], timeout: float | None
) -> T | None:
    """The first value of ``check()`` that is not None, or None after ``timeout``."""
    found: list[T] = []

    def ready() -> bool:
        value = check()
        if value is None:
            return False
        found.append(value)
        return True

    with condition:
        condition.wait_for(ready, timeout)
    return found[0] if found else None
