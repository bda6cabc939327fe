"""Counting and reporting input that was refused (frames that fail authentication, are
too large, or do not parse), with bounds an attacker cannot grow.

A stranger who can reach a socket can send as many bad frames as it likes, under as
many made-up sender names as it likes; what we keep about them must not grow with
that, and neither must the log. So: a total, counts for at most ``max_senders``
distinct senders (the rest are added up under ``OTHER_SENDERS``), and a report at most
once per ``report_every`` seconds that says how many were dropped since the last one.
The report of a burst is not left waiting for the next bad frame: the owner calls
``due(now)`` on a timer and gets the report once it is due. Pure: the caller passes
``now``.
"""

from __future__ import annotations

OTHER_SENDERS = "(other senders)"


class Rejections:
    """Refused frames of one kind (``what``, e.g. "data frames"), counted and reported
    with bounds."""

    def __init__(self, what: str, max_senders: int = 64, report_every: float = 10.0) -> None:
        if max_senders < 1:
            raise ValueError(f"max_senders must be >= 1, got {max_senders}")
        self.what = what
        self.max_senders = max_senders
        self.report_every = report_every
        self.total = 0
        self.by_sender: dict[str, int] = {}
        self._since_report = 0
        self._next_report = float("-inf")
        self._latest = ("", "")  # (sender, reason) of the latest refused frame

    def reject(self, sender: str, reason: str, now: float) -> str | None:
        """Count one refused frame from ``sender`` (as it claims to be: unauthenticated
        input names itself). Returns a report to log when one is due, else None."""
        self.total += 1
        self._since_report += 1
        key = sender[:200]
        if key not in self.by_sender and len(self.by_sender) >= self.max_senders:
            key = OTHER_SENDERS
        self.by_sender[key] = self.by_sender.get(key, 0) + 1
        self._latest = (key, reason)
        return self.due(now)

    def due(self, now: float) -> str | None:
        """The report of the frames refused since the last one, if there are any and a
        report is due at ``now``; else None."""
        if not self._since_report or now < self._next_report:
            return None
        count, self._since_report = self._since_report, 0
        self._next_report = now + self.report_every
        key, reason = self._latest
        return (
            f"dropped {count} {self.what} since the last report (latest from {key!r}: "
            f"{reason}); {self.total} in all, from {len(self.by_sender)} sender(s); "
            f"reports at most every {self.report_every:g} s"
        )
