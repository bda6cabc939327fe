"""What ``tupletree list|stats|activate|deactivate|kill|rebalance`` call: a running cluster's web
service, over its REST API (the same answers a script gets from curl).

Errors the service answers (an unknown topology: 404) and a service that cannot be
reached raise ``UIClientError`` with a message that names the address.

A service with a token needs it on every call: ``UIClient(address, token)``; the CLI
reads it from ``TUPLETREE_UI_TOKEN`` (an environment variable, not an argument that
every user of the machine could read in the process list).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from tupletree.http_guard import bearer

DEFAULT_ADDRESS = "127.0.0.1:8080"
TOKEN_ENV = "TUPLETREE_UI_TOKEN"
TIMEOUT_SECS = 30.0
MAX_ANSWER_BYTES = 16 * 1024 * 1024
# What another service at the address answers (a Spark master's own web UI takes 8080,
# the default here, and `tupletree run` then serves on a free port it prints).
NOT_OURS = (
    "not an answer of tupletree's web service: is --ui the address `tupletree run` "
    "printed? (a Spark master's web UI also listens on 8080)"
)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """tupletree's service never redirects: a redirect is answered as an error, and
    the token is never sent to the place it names."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class UIClientError(RuntimeError):
    """A call to the web service failed; ``status`` is its HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def base_url(address: str) -> str:
    """``HOST:PORT`` (or a full ``http://`` URL) -> ``http://HOST:PORT``."""
    if "://" in address:
        return address.rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UIClientError(f"--ui wants HOST:PORT (e.g. {DEFAULT_ADDRESS}), got {address!r}")
    return f"http://{host}:{port}"


def token_from_env() -> str | None:
    """The web view's token from ``TUPLETREE_UI_TOKEN`` (None when unset or empty)."""
    return os.environ.get(TOKEN_ENV) or None


class UIClient:
    def __init__(self, address: str = DEFAULT_ADDRESS, token: str | None = None) -> None:
        self.url = base_url(address)
        self._headers = {} if token is None else bearer(token)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if method != "POST" else b"" if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, method=method, data=data, headers=self._headers
        )
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(request, timeout=TIMEOUT_SECS) as response:
                raw = response.read(MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            raw = exc.read(MAX_ANSWER_BYTES)
            try:
                message = json.loads(raw)["errorMessage"]
            except (ValueError, KeyError, TypeError):
                text = raw.decode("utf-8", "replace").strip()
                if exc.code == 503 and text.startswith("tupletree-ui: "):
                    message = text[:300]  # the service's own "too many connections"
                else:
                    message = f"{exc.reason} ({NOT_OURS})"
            if exc.code == 401:
                message = f"{message} (set {TOKEN_ENV} to the web view's token)"
            raise UIClientError(f"{self.url}: {exc.code} {message}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UIClientError(
                f"cannot reach the tupletree web service at {self.url}: {reason} "
                "(is a cluster running with ui_port set, and is --ui its address?)"
            ) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise UIClientError(f"{self.url}: {NOT_OURS}")
        return answer

    @staticmethod
    def _quoted(name: str) -> str:
        return urllib.parse.quote(name, safe="")

    def topologies(self) -> list[dict[str, Any]]:
        answer = self._call("GET", "/api/v1/topology/summary").get("topologies")
        if not isinstance(answer, list):
            raise UIClientError(f"{self.url}: {NOT_OURS}")
        return answer

    def topology(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/api/v1/topology/{self._quoted(name)}")

    def component(self, name: str, component: str) -> dict[str, Any]:
        return self._call(
            "GET", f"/api/v1/topology/{self._quoted(name)}/component/{self._quoted(component)}"
        )

    def activate(self, name: str) -> dict[str, Any]:
        return self._call("POST", f"/api/v1/topology/{self._quoted(name)}/activate")

    def deactivate(self, name: str) -> dict[str, Any]:
        return self._call("POST", f"/api/v1/topology/{self._quoted(name)}/deactivate")

    def kill(self, name: str, wait_secs: float) -> dict[str, Any]:
        return self._call("POST", f"/api/v1/topology/{self._quoted(name)}/kill/{wait_secs:g}")

    def rebalance(
        self,
        name: str,
        wait_secs: float,
        workers: int | None = None,
        executors: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """Storm UI's rebalance; the answer comes once the options are checked."""
        options: dict[str, Any] = {}
        if workers is not None:
            options["numWorkers"] = workers
        if executors:
            options["executors"] = executors
        return self._call(
            "POST",
            f"/api/v1/topology/{self._quoted(name)}/rebalance/{wait_secs:g}",
            {"rebalanceOptions": options},
        )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_list(topologies: list[dict[str, Any]]) -> str:
    """``storm list``'s table."""
    if not topologies:
        return "No topologies running."
    rows = [
        ("Topology_name", "Status", "Num_tasks", "Num_workers", "Uptime_secs", "Acked", "Failed")
    ]
    for t in topologies:
        rows.append(
            (
                t["name"],
                t["status"],
                str(t.get("tasksTotal", "-")),
                str(t.get("workersTotal", "-")),
                str(t.get("uptimeSeconds", "-")),
                f"{t.get('acked', 0):,}",
                f"{t.get('failed', 0):,}",
            )
        )
    return _table(rows)


def _count(key: str) -> Any:
    return lambda c: f"{c[key]:,}"


# (column, how to show it) of the stats tables: Storm's names, the page's figures.
SPOUT_COLUMNS = (
    ("spout", lambda c: c["spoutId"]),
    ("tasks", lambda c: str(c["tasks"])),
    ("emitted", _count("emitted")),
    ("acked", _count("acked")),
    ("failed", _count("failed")),
    ("timed_out", _count("timedOut")),
    ("pending", _count("pending")),
    ("complete_ms", lambda c: _ms(c["completeLatency"])),
)
BOLT_COLUMNS = (
    ("bolt", lambda c: c["boltId"]),
    ("tasks", lambda c: str(c["tasks"])),
    ("executed", _count("executed")),
    ("emitted", _count("emitted")),
    ("acked", _count("acked")),
    ("failed", _count("failed")),
    ("capacity", lambda c: f"{c['capacity']:.3f}"),
    ("execute_ms", lambda c: _ms(c["executeLatency"])),
)


def format_stats(topo: dict[str, Any]) -> str:
    """A topology's components, one line each (what the page's table shows)."""
    lines = [
        f"{topo['name']}  {topo['status']}  up {topo['uptime']}  "
        f"acked {topo['acked']:,}  failed {topo['failed']:,}"
    ]
    for columns, components in ((SPOUT_COLUMNS, topo["spouts"]), (BOLT_COLUMNS, topo["bolts"])):
        rows = [tuple(name for name, _ in columns)]
        rows += [tuple(show(c) for _, show in columns) for c in components]
        lines += ["", _table(rows)]
    errors = topo.get("errors") or []
    if errors:
        last = errors[-1]
        lines += [
            "",
            f"{len(errors)} recent error(s); the last: {last['component']}: {last['error']}",
        ]
    return "\n".join(lines)


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
