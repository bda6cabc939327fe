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

An error text reaches terminals and log files as it is, and its message is the user's
(or a stranger's: a broker message quoted in it): so no text leaves here with a control
character a terminal acts on (ESC, CR, backspace, the bidirectional overrides such as
RLO): each is written as its escape (``\x1b``, ``\r``, ``\u202e``). And a report is
one line at the start of a line, its continuation lines (the message's own lines, the
traceback) indented: a message holding a newline cannot start a line that passes for
another report.
"""

from __future__ import annotations

import re
import traceback
import unicodedata

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


# What a terminal acts on or draws out of order: controls (but tab and newline), format
# characters (zero-width, the bidirectional overrides), line and paragraph separators,
# lone surrogates. Candidates are found by a regex (anything not printable ASCII), then
# told apart by their Unicode category.
_CANDIDATES = re.compile("[^\x20-\x7e\t\n]")
_ESCAPED_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
CONTINUATION = "  "  # the indent of a report's lines after its first


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every control character written as its escape and every line after
    the first indented by CONTINUATION: safe to print, and one report."""
    text = _CANDIDATES.sub(_escape, text)
    if "\n" not in text:
        return text
    first, *rest = text.rstrip("\n").split("\n")
    tail = "\n" if text.endswith("\n") else ""
    return first + "".join(f"\n{CONTINUATION}{line}" for line in rest) + tail


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
    within ``MAX_ERROR_CHARS``; both printable, every line after the first indented, so
    the rendered text is one report (see the module's docstring). Never raises."""
    # Escapes lengthen a message (a control character becomes six): cut it again.
    message = _cut(printable(safe_str(exc)), 2 * MAX_MESSAGE_CHARS)
    record = TaskError(component, task, where, type(exc).__name__, message, "", time)
    budget = MAX_ERROR_CHARS - len(record.render())
    return TaskError(
        component, task, where, record.exception, record.message, _traceback(exc, budget), time
    )


def format_error(component: str, task: int, where: str, exc: BaseException) -> str:
    """The text kept and logged for an exception raised by a task's user code."""
    return task_error(component, task, where, exc, 0.0).render()


def bounded(text: str) -> str:
    """A text reported by the runtime itself, cut to ``MAX_ERROR_CHARS``, printable."""
    return _cut(printable(text), MAX_ERROR_CHARS)


def _traceback(exc: BaseException, budget: int) -> str:
    """The traceback's lines, printable and indented as a report's continuation; a long
    one keeps its end (the innermost frames), cut at a line's start."""
    try:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    except BaseException as err:  # a traceback that cannot be formatted
        return f"{CONTINUATION}(traceback unavailable: {type(err).__name__})\n"
    text = "".join(_cut(line, MAX_MESSAGE_CHARS) for line in lines)
    text = CONTINUATION + printable(text)
    if len(text) <= budget:
        return text
    keep = text[len(text) - max(0, budget - 60) :]
    keep = keep[keep.find("\n") + 1 :] if "\n" in keep else ""  # from a line's start
    return f"{CONTINUATION}... [{len(text) - len(keep)} characters of traceback cut]\n{keep}"
