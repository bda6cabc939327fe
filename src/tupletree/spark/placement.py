"""Where a topology's workers run and how long their executors took to be ready: what
``tupletree run`` prints after its banner and in its summary.

Two reads of Spark (``executors``, ``archives``) and pure functions over plain values:

- ``executors(sc)``: the live executors from Spark's status store (id, host, cores, when
  each registered with the driver), the driver's own entry left out. ``[]`` where the
  store cannot be read (another Spark version): the lines then say less, never fail.
- ``archives(sc)``: ``spark.archives`` (``--archives``), with each local file's size.
- ``ready_secs``: per executor host, from the later of the executor's registration and
  the submit to the first worker on that host registering with the driver. Executors
  fetch and unpack the archives when they start, before they run a task; the Python
  worker that runs our task starts after that. So this figure is what shipping the
  environment costs (fetch, unpack, Python start), not the scheduler's wait for a slot;
  for an executor that was up before the submit it is Python's start alone.

Times are wall-clock seconds (the status store's); a worker's ``registered_at`` is the
driver's monotonic clock, converted by the caller (``to_wall``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class Executor:
    """One live executor: Spark's id, its host, cores, and when it registered (epoch s)."""

    id: str
    host: str
    cores: int
    added_at: float


@dataclass(frozen=True)
class Archive:
    """One entry of ``spark.archives``: as written, the directory it unpacks to, and
    the size of a local file (None for a remote one, or one that is gone)."""

    uri: str
    name: str
    size: int | None


@dataclass(frozen=True)
class Placed:
    """Where one worker runs: its index, data address host, host name, and when it
    registered (epoch s)."""

    worker: int
    ip: str
    hostname: str
    registered_at: float


def executors(sc: Any) -> list[Executor]:
    """The live executors, the driver's own entry left out; [] when unreadable."""
    try:
        store = sc._jsc.sc().statusStore()
        listed = sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(store.executorList(True))
        out = []
        for summary in listed:
            if summary.id() == "driver":
                continue
            host = str(summary.hostPort()).rsplit(":", 1)[0]
            out.append(
                Executor(
                    str(summary.id()),
                    host,
                    int(summary.totalCores()),
                    summary.addTime().getTime() / 1000.0,
                )
            )
        return sorted(out, key=lambda e: (e.host, e.id))
    except Exception:
        return []


def parse_archives(value: str | None) -> list[Archive]:
    """``spark.archives`` (comma-separated ``uri#name``) as Archives."""
    out = []
    for item in (value or "").split(","):
        uri = item.strip()
        if not uri:
            continue
        location, _, fragment = uri.partition("#")
        parsed = urlparse(location)
        path = unquote(parsed.path) if parsed.scheme in ("", "file", "local") else None
        name = fragment or os.path.basename(parsed.path) or location
        size = None
        if path is not None:
            try:
                size = os.path.getsize(path)
            except OSError:
                size = None
        out.append(Archive(uri, name, size))
    return out


def archives(sc: Any) -> list[Archive]:
    """The archives the session ships to its executors (``--archives``)."""
    try:
        return parse_archives(sc.getConf().get("spark.archives"))
    except Exception:
        return []


def address_host(address: str) -> str:
    """``tcp://127.0.0.2:5555`` -> ``127.0.0.2`` (IPv6 brackets dropped)."""
    host_port = address.split("://", 1)[-1]
    return host_port.rpartition(":")[0].strip("[]") or host_port


def to_wall(
    monotonic_at: float, now_wall: float | None = None, now_mono: float | None = None
) -> float:
    """A driver ``time.monotonic()`` reading as epoch seconds."""
    wall = time.time() if now_wall is None else now_wall
    mono = time.monotonic() if now_mono is None else now_mono
    return wall - (mono - monotonic_at)


def placed(workers: Mapping[int, Any]) -> list[Placed]:
    """``SparkCluster.workers(name)`` (WorkerInfo per index) as Placed, by index."""
    now_wall, now_mono = time.time(), time.monotonic()
    return [
        Placed(i, address_host(w.address), w.host, to_wall(w.registered_at, now_wall, now_mono))
        for i, w in sorted(workers.items())
    ]


def ready_secs(
    workers: Iterable[Placed], execs: Iterable[Executor], submitted_at: float
) -> dict[str, float]:
    """Per executor host that runs a worker: seconds from the later of its executor's
    registration and ``submitted_at`` (epoch s) to its first worker's registration.
    A host with several executors counts from the latest of them that registered before
    that worker (the one that ran it, or a later one)."""
    by_host: dict[str, list[float]] = {}
    for e in execs:
        by_host.setdefault(e.host, []).append(e.added_at)
    first: dict[str, float] = {}
    for w in workers:
        if w.ip in by_host:
            first[w.ip] = min(first.get(w.ip, w.registered_at), w.registered_at)
    out = {}
    for host, at in sorted(first.items()):
        before = [a for a in by_host[host] if a <= at]
        start = max([submitted_at, *before])
        out[host] = max(0.0, at - start)
    return out


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def describe_archives(items: Iterable[Archive]) -> str:
    """``environment (env.tar.gz, 13.2 MB)`` for each, comma-separated."""
    parts = []
    for a in items:
        file = os.path.basename(urlparse(a.uri.partition("#")[0]).path) or a.uri
        size = f", {_mb(a.size)}" if a.size is not None else ""
        parts.append(f"{a.name} ({file}{size})")
    return ", ".join(parts)


def where_lines(
    workers: list[Placed],
    execs: list[Executor],
    shipped: list[Archive],
    submitted_at: float,
) -> list[str]:
    """The banner's lines after the start: the executors (host, cores), each worker's
    host, and how long the executors took to be ready with the environment."""
    lines = []
    if execs:
        hosts = ", ".join(f"{e.host} ({e.cores} core{'s' if e.cores != 1 else ''})" for e in execs)
        lines.append(f"executors: {len(execs)} on {hosts}")
    if workers:
        lines.append("workers: " + ", ".join(_worker(w) for w in workers))
    ready = ready_secs(workers, execs, submitted_at)
    if ready:
        each = ", ".join(f"{secs:.1f} s on {host}" for host, secs in ready.items())
        what = (
            f"archive {describe_archives(shipped)} fetched and unpacked, Python started"
            if shipped
            else "Python started (no spark.archives)"
        )
        lines.append(f"executors ready: {each} ({what})")
    return lines


def _worker(w: Placed) -> str:
    name = f" ({w.hostname})" if w.hostname and w.hostname != w.ip else ""
    return f"{w.worker} on {w.ip}{name}"


def summary_line(master: str, workers: list[Placed]) -> str:
    """The summary's line on where the topology ran: master and each worker's host."""
    where = ", ".join(_worker(w) for w in workers) or "none registered"
    return f"ran on {master}: workers {where}"
