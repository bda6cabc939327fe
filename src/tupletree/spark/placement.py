"""Where a topology's workers run and how long their executors took to be ready: what
``tupletree run`` prints after its banner and in its summary.

Two reads of Spark (``executors``, ``archives``) and pure functions over plain values:

- ``executors(sc)``: the live executors from Spark's status store (id, host, cores, when
  each registered with the driver), the driver's own entry left out. ``[]`` where the
  store cannot be read (another Spark version): the lines then say less, never fail.
- ``archives(sc)``: ``spark.archives`` (``--archives``), with each local file's size.
- ``ready_secs``: from the later of the submit and the registration of the last
  executor that runs a worker, to the moment every worker was ready (the submit
  returned). Executors register with the driver, then fetch and unpack the archives,
  then run tasks; the Python worker that runs ours starts after that. So this figure is
  what shipping the environment costs the slowest executor (fetch, unpack, Python
  start, the worker's own start), not the wait for executors to be launched; for
  executors up before the submit it is the Python and worker start alone.

Times are wall-clock seconds (the status store's, ``time.time()``).
"""

from __future__ import annotations

import os
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
    """Where one worker runs: its index, the host of its data address, its host name."""

    worker: int
    ip: str
    hostname: str


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


def placed(workers: Mapping[int, Any]) -> list[Placed]:
    """``SparkCluster.workers(name)`` (a WorkerInfo per index) as Placed, by index."""
    return [Placed(i, address_host(w.address), w.host) for i, w in sorted(workers.items())]


def ready_secs(
    workers: Iterable[Placed], execs: Iterable[Executor], submitted_at: float, ready_at: float
) -> float | None:
    """Seconds from the later of ``submitted_at`` and the registration of the last
    executor on a worker's host (registered by ``ready_at``) to ``ready_at``; None when
    no worker runs on an executor's host (a local master: workers on the driver's)."""
    hosts = {w.ip for w in workers}
    added = [e.added_at for e in execs if e.host in hosts and e.added_at <= ready_at]
    if not added:
        return None
    return max(0.0, ready_at - max(submitted_at, *added))


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
    ready_at: float,
) -> list[str]:
    """The banner's lines after the start: the executors (host, cores), each worker's
    host, and how long the executors took to be ready with the environment."""
    lines = []
    if execs:
        hosts = ", ".join(f"{e.host} ({e.cores} core{'s' if e.cores != 1 else ''})" for e in execs)
        lines.append(f"executors: {len(execs)} on {hosts}")
    if workers:
        lines.append("workers: " + ", ".join(_worker(w) for w in workers))
    ready = ready_secs(workers, execs, submitted_at, ready_at)
    if ready is not None:
        what = (
            f"archive {describe_archives(shipped)} fetched and unpacked, Python started"
            if shipped
            else "Python started; no spark.archives"
        )
        lines.append(f"executors ready in {ready:.1f} s ({what})")
    return lines


def _worker(w: Placed) -> str:
    name = f" ({w.hostname})" if w.hostname and w.hostname != w.ip else ""
    return f"{w.worker} on {w.ip}{name}"


def summary_line(master: str, workers: list[Placed]) -> str:
    """The summary's line on where the topology ran: master and each worker's host."""
    where = ", ".join(_worker(w) for w in workers) or "none registered"
    return f"ran on {master}: workers {where}"
