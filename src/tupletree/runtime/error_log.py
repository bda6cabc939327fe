"""Error texts and error logging with bounds: what a worker keeps and logs of the
exceptions its tasks report.

``task_error`` turns a task's exception into a ``TaskError`` record
(records/errors.py) with the bounds below; ``format_error`` is its text.

A user's exception can be anything: a message of megabytes, a ``__str__`` that raises,
a bolt raising on every tuple. So:

- ``format_error`` never raises (a failing ``str``/``repr`` becomes a placeholder) and
  returns at most ``MAX_ERROR_CHARS`` characters: the exception's own text is cut to
  ``MAX_MESSAGE_CHARS``, each traceback line likewise, and a long traceback keeps its
  innermost frames (the end, where the error was raised).
- ``ErrorLogLimiter`` (from ``tupletree.log_limit``) decides which reports reach the
  log: at most ``burst`` per key (a task, where in it, the exception's type) in each
  ``window`` seconds, Storm's throttle on error reports (5 per 10 s per executor by
  default); the next report that is logged for the key says how many were not. At most
  ``max_keys`` keys are told apart; reports under further keys share one.

A worker keeps at most ``MAX_ERRORS_KEPT`` task errors (the newest) in its
``ErrorBook`` (runtime/error_book.py), so the texts it holds are bounded by
``MAX_ERRORS_KEPT * MAX_ERROR_CHARS`` characters, and its own events apart from them.
"""

from __future__ import annotations

import traceback

# The limiter lives below every layer (the web view and the DRPC server use it too).
from tupletree.log_limit import (  # noqa: F401 - re-exported for the runtime
    LOG_BURST,
    LOG_MAX_KEYS,
    LOG_WINDOW_SECS,
    ErrorLogLimiter,
)
from tupletree.records.errors import TaskError

MAX_ERRORS_KEPT = 1000
MAX_ERROR_CHARS = 4000
MAX_MESSAGE_CHARS = 1000


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def safe_str(value: object, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``str(value)``, cut to ``limit`` characters; a placeholder if ``str`` raises."""
    try:
        text = str(value)
    except BaseException as exc:  # user code: anything can come out
        return f"<str() of {type(value).__name__} raised {type(exc).__name__}>"
    return _cut(text, limit)


def safe_repr(value: object, limit: int = 200) -> str:
    """``repr(value)`` for error messages, cut to ``limit``; a placeholder if it raises."""
    try:
        text = repr(value)
    except BaseException as exc:  # user code: anything can come out
        return f"<{type(value).__name__}, repr() raised {type(exc).__name__}>"
    return _cut(text, limit)


def describe(exc: BaseException) -> str:
    """``Type: message``, bounded and never raising."""
    return f"{type(exc).__name__}: {safe_str(exc)}"


def task_error(component: str, task: int, where: str, exc: BaseException, time: float) -> TaskError:
    """The record kept for an exception raised by a task's user code: its message cut to
    ``MAX_MESSAGE_CHARS``, its traceback to what keeps the whole text (``render()``)
    within ``MAX_ERROR_CHARS``. Never raises."""
    record = TaskError(component, task, where, type(exc).__name__, safe_str(exc), "", time)
    budget = MAX_ERROR_CHARS - len(record.render())
    return TaskError(
        component, task, where, record.exception, record.message, _traceback(exc, budget), time
    )


def format_error(component: str, task: int, where: str, exc: BaseException) -> str:
    """The text kept and logged for an exception raised by a task's user code."""
    return task_error(component, task, where, exc, 0.0).render()


def bounded(text: str) -> str:
    """A text reported by the runtime itself, cut to ``MAX_ERROR_CHARS``."""
    return _cut(text, MAX_ERROR_CHARS)


def _traceback(exc: BaseException, budget: int) -> str:
    try:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    except BaseException as err:  # a traceback that cannot be formatted
        return f"(traceback unavailable: {type(err).__name__})\n"
    text = "".join(_cut(line, MAX_MESSAGE_CHARS) for line in lines)
    if len(text) <= budget:
        return text
    keep = max(0, budget - 60)
    return f"... [{len(text) - keep} characters of traceback cut]\n{text[len(text) - keep :]}"
