"""The ``tupletree`` command.

    tupletree run FILE [--local | --master URL] [--workers N] [--duration SECS]
                       [--ui-port PORT | --no-ui] [--ui-host HOST] [--ui-allow-host NAME]
                       [--verbose]
    tupletree pack [-o env.tar.gz] [--requirements FILE] [--extras kafka,redis]
                   [--python PATH]
    tupletree list [--ui HOST:PORT]
    tupletree stats NAME [--ui HOST:PORT]
    tupletree activate|deactivate NAME [--ui HOST:PORT]
    tupletree kill NAME [-w SECS] [--ui HOST:PORT]
    tupletree rebalance NAME [-w SECS] [-n WORKERS] [-e COMPONENT=N ...] [--ui HOST:PORT]
    tupletree visualize FILE [--format mermaid|dot] [-o OUT.png|OUT.svg]
    tupletree drpc FUNCTION ARGS [--host H] [--port P]

``run`` loads a Python file that defines ``topology()`` (returning a Topology) and,
optionally, ``CONF`` (a config dict) and ``report(metrics) -> str`` (printed at the
end), submits it, shows a live progress line and ends with a summary once the topology
is quiet (active, no pending trees and nothing emitted for a moment) or ``--duration``
passed. A topology deactivated or rebalancing is not quiet: the run waits for it, and
says each change of status and of layout.
Ctrl-C (SIGINT) or SIGTERM stops it early the same way: the summary so far, then the
topology is killed (spouts closed, bolts cleaned up, a bounded wait for a task in the
middle of a call); a topology killed from the web view or ``tupletree kill`` ends the
run with the summary too.
It serves the web view (page, REST, /metrics) while it runs, on 127.0.0.1:8080 (or a
free port when that one is taken) and prints its address; ``list``, ``stats``,
``activate``, ``deactivate``, ``kill`` and ``rebalance`` talk to that service
(``--ui``). On Spark it names the session's real master, the executors' hosts and how
long they took to be ready with the shipped environment; Spark's own start-up lines go
to a file unless ``--verbose``. ``pack`` writes the archive of the Python environment
Spark's executors need and prints the spark-submit options that ship it
(``tupletree.spark.pack``).

The web view's token (docs/security.md), for ``run`` and the commands that talk to it
alike, comes from the environment variable ``TUPLETREE_UI_TOKEN``: ``run`` then
requires it on every request and prints the page's address with it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.util
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from tupletree.errors import TopologyNotFoundError

QUIET_SECS = 1.0
DEFAULT_UI_PORT = 8080  # Storm UI's
DEFAULT_UI_ADDRESS = f"127.0.0.1:{DEFAULT_UI_PORT}"


def load_module(path: str, command: str = "run") -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise SystemExit(f"tupletree {command}: no such file: {path}{_file_hint(path)}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:  # Python finds no loader for its suffix
        raise SystemExit(
            f"tupletree {command}: {path} is not a Python file (.py) defining topology()"
        )
    module = importlib.util.module_from_spec(spec)
    # Registered under its own name so pickled components can be found again in
    # worker processes (the file's directory is put on sys.path for them too).
    sys.modules[file.stem] = module
    sys.path.insert(0, str(file.parent.resolve()))
    spec.loader.exec_module(module)
    value = getattr(module, "topology", None)
    if not callable(value):
        from tupletree.topology.builder import Topology

        if isinstance(value, Topology):  # the README tour's `topology = ...create_topology()`
            raise SystemExit(
                f"tupletree {command}: {path} sets topology to a Topology, not a function: "
                "write def topology(): return builder.create_topology()"
            )
        raise SystemExit(f"tupletree {command}: {path} must define topology() returning a Topology")
    return module


def _file_hint(path: str) -> str:
    """What a ``run`` FILE that is not a file may have meant: a module name
    (``examples.word_count``) or a file name without ``.py``."""
    if path.endswith(".py"):
        return ""
    candidates = [Path(path + ".py")]
    if "." in path and "/" not in path and os.sep not in path:
        candidates.insert(0, Path(*path.split(".")).with_suffix(".py"))
    for candidate in candidates:
        if candidate.is_file():
            return f" (it wants a .py file's path: did you mean {candidate}?)"
    return " (it wants the path of a .py file defining topology(), not a module name)"


def _totals(metrics: dict[str, dict[str, Any]], spouts: list[str]) -> dict[str, float]:
    out = {"emitted": 0, "acked": 0, "failed": 0, "pending": 0}
    for cid in spouts:
        m = metrics.get(cid, {})
        for key in out:
            out[key] += m.get(key, 0)
    return out


class Stop(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM while ``tupletree run`` runs: stop the topology,
    print the summary. A KeyboardInterrupt, so code that lets Ctrl-C through lets this
    through too."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame


class Signals:
    """The SIGINT/SIGTERM that ``stop_on_signals`` caught. Until ``defer()`` (just before
    the submit) the first raises Stop where the main thread is (loading the file, the
    Spark session's start); after it, it only sets ``event``, which the watch loop waits
    on: an exception raised by a signal
    handler lands inside whatever library call runs, and some swallow it (py4j catches
    a KeyboardInterrupt while it talks to the JVM), so once the topology runs the stop
    is a flag, not an exception. A second signal only says the stop is under way."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signame: str | None = None
        self.deferred = False

    def defer(self) -> None:
        self.deferred = True

    def handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signame is not None:
            print(f"tupletree: {name} again: already stopping", file=sys.stderr, flush=True)
            return
        self.signame = name
        self.event.set()
        if not self.deferred:
            raise Stop(name)


# The Signals of the running ``tupletree run`` (None outside one, or off the main thread).
_signals: Signals | None = None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Signals | None]:
    """SIGINT and SIGTERM stop the run, once (see Signals); off the main thread nothing
    changes."""
    global _signals
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    signals = _signals = Signals()
    previous = {sig: signal.signal(sig, signals.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield signals
    finally:
        _signals = None
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class Watched:
    """What ``watch`` saw: the last metrics, the ack rate over the observed window (None
    before two observations) and why it ended early, if it did: ``"killed"`` (killed
    from outside: the web view, ``tupletree kill``) or the signal's name."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    rate: float | None = None
    ended: str | None = None


def watch(cluster: Any, name: str, spouts: list[str], duration: float | None) -> Watched:
    """Print a progress line until the topology is quiet, ``duration`` passed, it was
    killed from outside, or SIGINT/SIGTERM stopped the run (``stop_on_signals``).

    Quiet means active, not rebalancing, nothing pending and nothing emitted for
    QUIET_SECS: a topology deactivated or rebalanced from outside (``tupletree
    deactivate``, the web view) emits nothing until it runs again, and is not done.
    A change of status is a line of its own.

    The rate is measured over the observed window: work starts before submit returns,
    so the time since submit would overstate it.
    """
    from tupletree.ui.views import status as status_of

    interactive = sys.stdout.isatty()
    start = last_print = last_change = time.monotonic()
    last_emitted = -1
    last_acked = 0
    last_status, last_layout = "ACTIVE", None
    nl = "\n" if interactive else ""  # after the progress line's \r
    first: tuple[float, float] | None = None  # (time, acked) when first seen working
    end: tuple[float, float] | None = None
    seen = Watched()
    signals = _signals
    stopped = signals.event if signals is not None else threading.Event()
    try:
        while True:
            if stopped.wait(0.2):
                seen.ended = signals.signame if signals is not None else "stopped"
                break
            now = time.monotonic()
            try:
                metrics = cluster.metrics(name)
                info = cluster.topology_info(name)
            except TopologyNotFoundError:
                seen.ended = "killed"
                break
            seen.metrics = metrics
            status, layout = status_of(info), _layout(info)
            if status != last_status:
                again = " again" if status == "ACTIVE" else ""
                print(f"{nl}tupletree: {name} is {status}{again}", flush=True)
                last_status = status
            if layout != last_layout:
                if last_layout is not None:  # a rebalance
                    print(f"{nl}tupletree: {name} runs on {layout}", flush=True)
                last_layout = layout
            if status != "ACTIVE":
                last_change = now  # paused from outside: not done
            t = _totals(metrics, spouts)
            if t["emitted"] != last_emitted:
                last_emitted, last_change = t["emitted"], now
                end = (now, t["acked"])
                if first is None and t["emitted"]:
                    first = (now, t["acked"])
            if interactive or now - last_print >= 2.0:
                rate = (t["acked"] - last_acked) / max(now - last_print, 1e-9)
                line = (
                    f"acked {t['acked']:>9,}  failed {t['failed']:>6,}  "
                    f"pending {t['pending']:>6,}  {rate:>9,.0f} trees/s"
                )
                print(
                    ("\r" + line) if interactive else line,
                    end="" if interactive else "\n",
                    flush=True,
                )
                last_print, last_acked = now, t["acked"]
            if duration is not None and now - start >= duration:
                end = (now, t["acked"])
                break
            if duration is None and t["pending"] == 0 and now - last_change >= QUIET_SECS:
                break
    except Stop as stop:  # a signal before the run deferred them (tests call watch)
        seen.ended = stop.signame
    if interactive:
        print()
    if first is not None and end is not None and end[0] > first[0]:
        seen.rate = (end[1] - first[1]) / (end[0] - first[0])
    return seen


def _layout(info: dict[str, Any]) -> str:
    """``2 worker(s), executors count=4, split=2``: what a rebalance changes."""
    executors = ", ".join(f"{c}={n}" for c, n in sorted(info["executors"].items()))
    return f"{info['workers']} worker(s), executors {executors}"


def summary(metrics: dict[str, dict[str, Any]], spouts: list[str], rate: float | None) -> str:
    t = _totals(metrics, spouts)
    speed = f", {rate:,.0f} trees/s" if rate is not None else ""
    lines = [f"done: {t['acked']:,} trees acked, {t['failed']:,} failed{speed}"]
    lat = [metrics.get(s, {}).get("complete_latency_p50_ms") for s in spouts]
    p99 = [metrics.get(s, {}).get("complete_latency_p99_ms") for s in spouts]
    if any(v is not None for v in lat):
        lines.append(
            f"complete latency p50 {max(v or 0 for v in lat):.2f} ms, "
            f"p99 {max(v or 0 for v in p99):.2f} ms"
        )
    for cid, m in sorted(metrics.items()):
        lines.append(
            f"  {cid:<14} emitted {m['emitted']:>9,}  executed {m['executed']:>9,}  "
            f"acked {m['acked']:>9,}  failed {m['failed']:>6,}  errors {m['errors']:>4,}"
        )
    return "\n".join(lines)


def restarts_line(restarts: dict[int, int]) -> str:
    """The summary's line on worker restarts, e.g. ``worker restarts: 3 (worker 1: 3)``."""
    total = sum(restarts.values())
    if not total:
        return "worker restarts: 0"
    each = ", ".join(f"worker {w}: {n}" for w, n in sorted(restarts.items()) if n)
    return f"worker restarts: {total} ({each}); why: errors reported below"


def cmd_run(args: argparse.Namespace) -> int:
    with stop_on_signals():
        try:
            return _run_file(args)
        except Stop as stop:  # before the topology ran, or while it was being stopped
            print(f"tupletree run: stopped by {stop.signame}", file=sys.stderr)
            return 130


def _run_file(args: argparse.Namespace) -> int:
    from tupletree.config import Config, validate
    from tupletree.errors import InvalidConfigError
    from tupletree.topology.builder import Topology

    module = load_module(args.file)
    topology = module.topology()
    if not isinstance(topology, Topology):
        raise SystemExit(
            f"tupletree run: topology() in {args.file} must return a Topology "
            f"(TopologyBuilder.create_topology()), it returned {type(topology).__name__}"
        )
    conf = dict(getattr(module, "CONF", {}) or {})
    if args.workers is not None:
        conf[Config.TOPOLOGY_WORKERS] = args.workers
    try:
        validate(conf)  # before a Spark session takes seconds to start
    except InvalidConfigError as exc:
        raise SystemExit(f"tupletree run: {exc}") from None
    name = Path(args.file).stem.replace("_", "-")
    if args.local:
        from tupletree.local import LocalCluster

        cluster: Any = _with_ui(LocalCluster, args)
        with cluster:
            print(f"tupletree: running {name} on LocalCluster (in-process)", flush=True)
            return _run(cluster, module, name, conf, topology, args)
    return _run_on_spark(module, name, conf, topology, args)


def _run_on_spark(
    module: ModuleType, name: str, conf: dict[str, Any], topology: Any, args: argparse.Namespace
) -> int:
    """``run`` on Spark: the session first (its real master for the banner; the JVM's
    own output to a file unless ``--verbose``), then the topology on it."""
    from tupletree.config import Config
    from tupletree.spark.cluster import SparkCluster
    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import default_jvm_log, get_or_create_session

    jvm_log = None if args.verbose else default_jvm_log()
    started = time.monotonic()
    ok = False
    try:
        try:
            session, owned = get_or_create_session(args.master, jvm_log=jvm_log)
        except SparkUnavailableError as exc:
            print(f"tupletree run: {exc}", file=sys.stderr)
            return 1
        up = f" (session up in {time.monotonic() - started:.1f} s)" if owned else ""
        if args.master and (not owned or os.environ.get("PYSPARK_GATEWAY_PORT")):
            # Under spark-submit (or beside a session of the caller's) the session
            # exists, on the master it was given: a --master here cannot move it.
            print(
                f"tupletree: --master {args.master} is not used: this process's Spark "
                f"session runs already, on {session.sparkContext.master} (under "
                "spark-submit, its own --master decides)",
                file=sys.stderr,
                flush=True,
            )
        try:
            with _with_ui(SparkCluster, args, spark=session) as cluster:
                workers = conf.get(Config.TOPOLOGY_WORKERS, 1)
                print(
                    f"tupletree: running {name} on Spark {cluster.master}, {workers} worker(s){up}",
                    flush=True,
                )
                code = _run(cluster, module, name, conf, topology, args, session)
                ok = code == 0
                return code
        finally:
            if owned:
                session.stop()
    finally:
        if jvm_log is not None:  # kept, and named, when the run failed
            if ok:
                jvm_log.unlink(missing_ok=True)
            elif jvm_log.exists():
                print(f"Spark's own log: {jvm_log}", file=sys.stderr)


class _LoggedLines(logging.Filter):
    """Notes the first line of each record tupletree's loggers pass on during a run (a
    LocalCluster logs each task error as it is reported, traceback and all; a Spark
    driver, each worker restart), so that the end of the run names in one line an error
    already shown instead of printing it again. Lets every record through; keeps at
    most LIMIT lines."""

    LIMIT = 10_000
    LOGGERS = ("tupletree", "tupletree.spark.launcher")  # a filter sees its logger's own

    def __init__(self) -> None:
        super().__init__()
        self.lines: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if len(self.lines) < self.LIMIT:
            with contextlib.suppress(Exception):  # bad arguments: the handler says so
                self.lines.add(_headline(record.getMessage()))
        return True

    def shown(self, text: str) -> bool:
        first = _headline(text)
        return any(line.endswith(first) for line in list(self.lines))


def _headline(text: str) -> str:
    """An error text's first line (``component[task N] where: Type: message``)."""
    return text.split("\n", 1)[0]


@contextlib.contextmanager
def _noting_logged() -> Iterator[_LoggedLines]:
    noted = _LoggedLines()
    loggers = [logging.getLogger(name) for name in _LoggedLines.LOGGERS]
    for logger in loggers:
        logger.addFilter(noted)
    try:
        yield noted
    finally:
        for logger in loggers:
            logger.removeFilter(noted)


def errors_report(errors: list[str], shown: Callable[[str], bool]) -> str:
    """The end of a run's word on its errors: the first one's text, or, when it was
    logged already as it happened, one line naming it (not its whole text again)."""
    first = errors[0]
    if shown(first):
        return (
            f"tupletree: {len(errors)} error(s) reported, logged above as they happened; "
            f"the first: {_headline(first)}"
        )
    return f"{len(errors)} error(s) reported; the first:\n{first}"


def _run(
    cluster: Any,
    module: ModuleType,
    name: str,
    conf: dict[str, Any],
    topology: Any,
    args: argparse.Namespace,
    spark: Any = None,
) -> int:
    """Submit, watch, summarize, kill: the part of ``run`` both clusters share; on Spark
    (``spark`` the session) with where the workers run and how long executors took."""
    with _noting_logged() as logged:
        return _submit_and_watch(cluster, module, name, conf, topology, args, spark, logged)


def _submit_and_watch(
    cluster: Any,
    module: ModuleType,
    name: str,
    conf: dict[str, Any],
    topology: Any,
    args: argparse.Namespace,
    spark: Any,
    logged: _LoggedLines,
) -> int:
    from tupletree.errors import InvalidConfigError, InvalidTopologyError
    from tupletree.spark.errors import SparkJobFailed, SparkLaunchError

    spouts = [s.id for s in topology.spouts]
    if cluster.ui_url is not None:
        page = f"{cluster.ui_url}/" + ("#token=$TUPLETREE_UI_TOKEN" if _ui_token_set() else "")
        print(f"tupletree: web view at {page} (REST /api/v1, /metrics)", flush=True)
    started = time.monotonic()
    submitted_at = time.time()
    if _signals is not None:
        # From now on a signal is a flag: the submit completes (its own timeouts bound
        # it), then the watch below ends at once, the summary is printed and the
        # topology killed; raised inside a submit, it could leave workers half started.
        _signals.defer()
    try:
        cluster.submit_topology(name, conf, topology)
    except (InvalidConfigError, InvalidTopologyError, SparkLaunchError) as exc:
        # What the user can mend (a bad config or topology, too few slots, executors
        # that cannot start): the message says what, a traceback would bury it.
        print(f"tupletree run: {name} did not start: {exc}", file=sys.stderr)
        return 1
    ready_at = time.time()  # submit returns once every worker is ready
    print(f"tupletree: {name} started in {time.monotonic() - started:.1f} s", flush=True)
    if spark is not None:
        from tupletree.spark import placement

        sc = spark.sparkContext
        for line in placement.where_lines(
            placement.placed(cluster.workers(name)),
            placement.executors(sc),
            placement.archives(sc),
            submitted_at,
            ready_at,
        ):
            print(f"tupletree: {line}", flush=True)
    try:
        seen = watch(cluster, name, spouts, args.duration)
    except SparkJobFailed as exc:  # the workers' Spark job is gone
        if sys.stdout.isatty():
            print()
        print(f"tupletree: {name} stopped: {exc}", file=sys.stderr)
        for text in cluster.errors(name)[:1]:
            print(f"the first error reported:\n{text}", file=sys.stderr)
        cluster.kill_topology(name)
        return 1
    if seen.ended == "killed":
        print(f"tupletree: {name} was killed (from the web view or `tupletree kill`)")
        print(summary(seen.metrics, spouts, seen.rate))
        return 0
    if seen.ended is not None:
        print(f"tupletree: {seen.ended}: stopping {name}", flush=True)
        with contextlib.suppress(TopologyNotFoundError, SparkJobFailed):
            seen.metrics = cluster.metrics(name)  # the figures up to the signal
    print(summary(seen.metrics, spouts, seen.rate))
    if spark is not None:
        from tupletree.spark import placement

        print(placement.summary_line(cluster.master, placement.placed(cluster.workers(name))))
        print(restarts_line(cluster.worker_restarts(name)))
    report = getattr(module, "report", None)
    if callable(report) and seen.ended is None:
        print(report(seen.metrics))
    errors = cluster.errors(name)
    if errors:
        print(errors_report(errors, logged.shown), file=sys.stderr)
    cluster.kill_topology(name)
    return 130 if seen.ended is not None else 0


def _with_ui(cls: Any, args: argparse.Namespace, **kwargs: Any) -> Any:
    """The cluster, serving the web view unless ``--no-ui``; when the default port is
    taken, on a free one instead (an explicit ``--ui-port`` that is taken, or an address
    that cannot be listened on, is a one-line error)."""
    if args.no_ui:
        return cls(**kwargs)
    from tupletree.ui.client import token_from_env

    port = DEFAULT_UI_PORT if args.ui_port is None else args.ui_port
    options = {"token": token_from_env(), "allowed_hosts": args.ui_allow_host}
    try:
        return cls(ui_port=port, ui_host=args.ui_host, ui_options=options, **kwargs)
    except ValueError as exc:  # a bad token or host name: say which, without a traceback
        raise SystemExit(f"tupletree run: {exc}") from None
    except OSError as exc:
        if args.ui_port is not None or exc.errno != errno.EADDRINUSE:
            raise SystemExit(f"tupletree run: {exc}") from None
    try:
        return cls(ui_port=0, ui_host=args.ui_host, ui_options=options, **kwargs)
    except OSError as exc:
        raise SystemExit(f"tupletree run: {exc}") from None


def _ui_token_set() -> bool:
    from tupletree.ui.client import token_from_env

    return token_from_env() is not None


def _port(text: str) -> int:
    """``--ui-port``: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"wants a port from 0 to 65535, got {port}")
    return port


def _seconds(text: str) -> float:
    """``--duration``: a finite number of seconds above 0."""
    try:
        secs = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number of seconds, got {text!r}") from None
    if not math.isfinite(secs) or secs <= 0:
        raise argparse.ArgumentTypeError(f"wants a finite number of seconds above 0, got {text}")
    return secs


def _wait_seconds(text: str) -> float:
    """``-w``: a finite number of seconds, 0 or more (Storm's wait; 0: at once)."""
    try:
        secs = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants a number of seconds, got {text!r}") from None
    if not math.isfinite(secs) or secs < 0:
        raise argparse.ArgumentTypeError(f"wants a finite number of seconds, 0 or more, got {text}")
    return secs


def _workers_option(text: str) -> int:
    """``-n``: a number of workers, 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"wants a number of workers, 1 or more, got {text!r}")
    return int(text)


def cmd_remote(args: argparse.Namespace) -> int:
    """list, stats, activate, deactivate, kill, rebalance: against a running cluster's
    web service."""
    from tupletree.ui.client import (
        UIClient,
        UIClientError,
        format_list,
        format_stats,
        token_from_env,
    )

    try:
        client = UIClient(args.ui, token_from_env())
        if args.command == "list":
            print(format_list(client.topologies()))
        elif args.command == "stats":
            print(format_stats(client.topology(args.name)))
        elif args.command in ("activate", "deactivate"):
            getattr(client, args.command)(args.name)
            print(f"tupletree: {args.command}d {args.name}")
        else:
            wait = args.wait
            if wait is None:  # Storm's default: the topology's message timeout
                try:
                    wait = float(client.topology(args.name).get("msgTimeout") or 0)
                except UIClientError as exc:
                    if exc.status != 500:
                        raise
                    wait = 0.0  # its page fails (its Spark job ended): nothing in flight
            if args.command == "kill":
                client.kill(args.name, wait)
                when = "now" if wait == 0 else f"after {wait:g} s (deactivated now)"
                print(f"tupletree: killed {args.name} {when}")
            else:
                client.rebalance(args.name, wait, args.workers, dict(args.executors or []))
                print(
                    f"tupletree: rebalancing {args.name}: deactivated now, the trees in "
                    f"flight get up to {wait:g} s; `tupletree list` says REBALANCING until "
                    "it runs on its new layout"
                )
    except UIClientError as exc:
        print(f"tupletree {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


def _executors_option(text: str) -> tuple[str, int]:
    """``-e count=8`` -> ("count", 8)."""
    component, sep, number = text.rpartition("=")
    if not sep or not component or not number.isdigit():
        raise argparse.ArgumentTypeError(f"wants COMPONENT=N (e.g. count=8), got {text!r}")
    return component, int(number)


def cmd_pack(args: argparse.Namespace) -> int:
    """Write the executors' archive and print the spark-submit options that ship it."""
    from tupletree.spark.pack import PackError, describe, pack

    extras = [e for e in (args.extras or "").split(",") if e.strip()]
    try:
        packed = pack(
            args.output, requirements=args.requirements, extras=extras, python=args.python
        )
    except PackError as exc:
        print(f"tupletree pack: {exc}", file=sys.stderr)
        return 1
    print(describe(packed))
    return 0


def cmd_visualize(args: argparse.Namespace) -> int:
    """Print the topology of FILE as Mermaid or DOT text, or render it with Graphviz."""
    import shutil
    import subprocess

    from tupletree.ui.graph import to_dot, to_mermaid

    module = load_module(args.file, "visualize")
    topology = module.topology()
    name = Path(args.file).stem.replace("_", "-")
    if args.output is None:
        print(to_mermaid(topology) if args.format == "mermaid" else to_dot(topology, name), end="")
        return 0
    suffix = Path(args.output).suffix.lstrip(".").lower()
    if suffix not in ("png", "svg", "pdf"):
        raise SystemExit(
            f"tupletree visualize: -o wants a .png, .svg or .pdf file, got {args.output}"
        )
    dot = shutil.which("dot")
    if dot is None:
        raise SystemExit(
            "tupletree visualize: rendering an image needs Graphviz's `dot` (e.g. apt-get "
            "install graphviz); without it, print the text with --format dot or mermaid"
        )
    done = subprocess.run(
        [dot, f"-T{suffix}", "-o", args.output],
        input=to_dot(topology, name).encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"tupletree visualize: dot failed: {done.stderr.decode(errors='replace')}")
    print(f"tupletree: wrote {args.output}")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tupletree")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tupletree",
        description="Run, watch and steer tupletree topologies (Storm's model, in Python, "
        "on LocalCluster or Spark).",
        epilog="'tupletree COMMAND --help' tells more of each command.",
    )
    parser.add_argument("--version", action="version", version=f"tupletree {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a topology file and report on it")
    run.add_argument("file", help="a .py file defining topology() and optionally CONF, report()")
    run.add_argument("--local", action="store_true", help="use the in-process LocalCluster")
    run.add_argument(
        "--master",
        default=None,
        help="Spark master (default: local[*], every core; a local master runs as "
        "local[N,4], so a worker that dies is started again, up to 3 times)",
    )
    run.add_argument("--workers", type=int, default=None, help="topology.workers")
    run.add_argument("--duration", type=_seconds, default=None, help="stop after SECS")
    run.add_argument(
        "--ui-port",
        type=_port,
        default=None,
        help=f"web view port (default {DEFAULT_UI_PORT}, or a free one when it is taken)",
    )
    run.add_argument("--ui-host", default="127.0.0.1", help="web view address (127.0.0.1)")
    run.add_argument(
        "--ui-allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the web view answers to besides this machine's (repeatable; "
        "'.example.com' allows every name under it)",
    )
    run.add_argument("--no-ui", action="store_true", help="do not serve the web view")
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print Spark's own start-up and log lines (default: into a file in the temp "
        "directory, named if the run fails)",
    )
    run.set_defaults(func=cmd_run)
    ui_help = f"the cluster's web service, HOST:PORT (default {DEFAULT_UI_ADDRESS})"
    listing = sub.add_parser("list", help="list the topologies of a running cluster")
    listing.add_argument("--ui", default=DEFAULT_UI_ADDRESS, help=ui_help)
    listing.set_defaults(func=cmd_remote)
    for command, text in (
        ("stats", "show a running topology's components"),
        ("activate", "activate a topology (its spouts are polled again)"),
        ("deactivate", "deactivate a topology (its spouts are no longer polled)"),
        ("kill", "kill a topology: deactivate, wait, stop"),
        ("rebalance", "spread a topology over other workers or executors (Storm's)"),
    ):
        p = sub.add_parser(command, help=text)
        p.add_argument("name", help="the topology's name")
        p.add_argument("--ui", default=DEFAULT_UI_ADDRESS, help=ui_help)
        if command in ("kill", "rebalance"):
            p.add_argument(
                "-w",
                "--wait",
                type=_wait_seconds,
                default=None,
                help=f"seconds between deactivating and the {command} (default: its message "
                "timeout)",
            )
        if command == "rebalance":
            p.add_argument(
                "-n", "--num-workers", dest="workers", type=_workers_option, default=None
            )
            p.add_argument(
                "-e",
                "--executors",
                action="append",
                type=_executors_option,
                metavar="COMPONENT=N",
                help="a component's executors (repeat for several)",
            )
        p.set_defaults(func=cmd_remote)
    packer = sub.add_parser(
        "pack", help="write an archive of the Python environment for Spark's executors"
    )
    packer.add_argument("-o", "--output", default="env.tar.gz", help="(default env.tar.gz)")
    packer.add_argument(
        "--requirements", default=None, help="the topology's own requirements (names)"
    )
    packer.add_argument("--extras", default=None, help="tupletree's extras, e.g. kafka,redis")
    packer.add_argument(
        "--python",
        default=None,
        help="the executors' interpreter path, if not this Python's base interpreter",
    )
    packer.set_defaults(func=cmd_pack)
    vis = sub.add_parser("visualize", help="draw a topology file: Mermaid, DOT, or an image")
    vis.add_argument("file", help="a .py file defining topology()")
    vis.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    vis.add_argument("-o", "--output", default=None, help="render to .png/.svg/.pdf (Graphviz)")
    vis.set_defaults(func=cmd_visualize)
    # Listed for --help only: "drpc" is handed to the DRPC CLI below, before parsing.
    sub.add_parser("drpc", help="call a DRPC function: tupletree drpc FUNCTION ARGS")
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "drpc":
        # Options may come before the function name: hand everything to the DRPC CLI.
        from tupletree.drpc import cli_main

        return cli_main(argv[1:])
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
