"""Getting a SparkSession that can run tupletree workers.

Two things go wrong often enough to check before Spark starts, because Spark's own
failures for them are unhelpful:

- Java. Spark 4 needs Java 17 or newer; without it the JVM gateway dies and py4j reports
  only that the gateway exited. ``check_java`` runs first and says what is missing.
- The executors' Python. PySpark starts executors with ``PYSPARK_PYTHON`` (or
  ``spark.pyspark.python``) and falls back to plain ``python3``, which usually lacks
  pyzmq and tupletree. We point both at the running interpreter unless the user chose.

Spark's JVM writes half a dozen lines to stderr as it starts (an incubator-module
warning, the log4j profile, the host name on loopback, native-hadoop) and its log4j
console after that. ``jvm_log`` sends them to a file instead (``jvm_output_to``): the
JVM inherits the file descriptor it is started with, so stderr is pointed at the file
only while the session starts, and this process's own stderr is back right after.

Nothing here imports pyspark at module level, so importing tupletree never needs Java.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tupletree.spark.errors import SparkUnavailableError
from tupletree.spark.slots import slots_from_master

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA_MAJOR = 17
"""Spark 4 is built for Java 17; older JVMs fail with UnsupportedClassVersionError."""

DEFAULT_MAX_FAILURES = 4
"""Task attempts Spark allows in local mode (``local[N,F]``): a worker may die F-1 times."""

_JAVA_INSTALL_HINT = (
    "Install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`) "
    "and put it on PATH or point JAVA_HOME at it."
)


@dataclass(frozen=True)
class JavaInfo:
    """The java executable Spark will use, and its major version."""

    path: str
    major: int
    version: str


def find_java() -> str | None:
    """Return the java executable that spark-submit would run, or None.

    Spark's launcher scripts use ``$JAVA_HOME/bin/java`` when JAVA_HOME is set and
    ``java`` on PATH otherwise; we look in the same order so we check the same binary.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def parse_java_major(version_output: str) -> tuple[int, str]:
    """Parse ``java -version`` output into (major, version string).

    Handles both the old ``1.8.0_351`` scheme (major 8) and the new ``17.0.15`` /
    ``21`` scheme. Raises ValueError when no version is found.
    """
    match = re.search(r'version "([^"]+)"', version_output)
    if not match:
        raise ValueError(f"no version in java -version output: {version_output!r}")
    version = match.group(1)
    parts = re.split(r"[._+-]", version)
    major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])
    return major, version


def check_java(min_major: int = MIN_JAVA_MAJOR) -> JavaInfo:
    """Make sure a Java >= ``min_major`` is there, or raise SparkUnavailableError saying
    what is missing (instead of letting py4j fail with 'Java gateway process exited')."""
    java = find_java()
    if java is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']!r} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no `java` on PATH and JAVA_HOME is not set"
        )
        raise SparkUnavailableError(
            f"Spark 4 needs Java {min_major} or newer, but {where}. {_JAVA_INSTALL_HINT}"
        )
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
        major, version = parse_java_major(proc.stderr + proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise SparkUnavailableError(
            f"Spark 4 needs Java {min_major} or newer, but `{java} -version` failed: {exc}. "
            f"{_JAVA_INSTALL_HINT}"
        ) from exc
    if major < min_major:
        raise SparkUnavailableError(
            f"Spark 4 needs Java {min_major} or newer, but {java} is Java {version}. "
            f"{_JAVA_INSTALL_HINT}"
        )
    return JavaInfo(path=java, major=major, version=version)


def check_pyspark() -> str:
    """Return pyspark's version, or raise SparkUnavailableError if it is not installed."""
    try:
        import pyspark
    except ImportError as exc:
        raise SparkUnavailableError(
            "SparkCluster needs pyspark 4.x (`pip install 'pyspark>=4,<5'`); "
            f"it could not be imported: {exc}"
        ) from exc
    return pyspark.__version__


def use_this_python() -> None:
    """Point PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON at the running interpreter unless
    the user set them, so executors run the Python that has tupletree and pyzmq."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_master(slots: int | None = None, max_failures: int = DEFAULT_MAX_FAILURES) -> str:
    """The master URL for a local session: ``local[slots,max_failures]``.

    Plain ``local[N]`` allows a task one attempt only, so a killed worker would fail the
    whole job; the second number turns on Spark's task retry (our supervisor).
    """
    n = slots if slots is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError(f"slots must be >= 1, got {n}")
    if max_failures < 1:
        raise ValueError(f"max_failures must be >= 1, got {max_failures}")
    return f"local[{n},{max_failures}]"


def local_session_conf(slots: int | None = None) -> dict[str, str]:
    """The Spark settings tupletree uses for a session it builds itself, and why:

    - no web UI and no console progress bar: a stage of long-running worker tasks would
      otherwise redraw a progress bar on stderr for the topology's whole life;
    - few shuffle partitions: tupletree's own jobs never shuffle, and 200 is slow on a
      small machine for anything else the user runs in the session;
    - ``spark.python.worker.reuse=false``: a worker's Python process then exits when its
      task ends, instead of idling in Spark's pool with whatever threads the topology left.
    """
    n = slots if slots is not None else (os.cpu_count() or 1)
    return {
        "spark.app.name": "tupletree",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(1, min(n, 8))),
        "spark.python.worker.reuse": "false",
        "spark.pyspark.python": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }


@contextlib.contextmanager
def jvm_output_to(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within the block, file descriptor 2 (stderr) is ``path`` (appended to), so a JVM
    started in it writes its stderr there for its whole life. ``None``: no change.

    Process-wide while it lasts: anything this process writes to stderr meanwhile goes
    to the file too (the block is a session's start, a few seconds)."""
    if path is None:
        yield
        return
    target = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(target, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def default_jvm_log() -> Path:
    """Where ``tupletree run`` sends Spark's own output unless ``--verbose``."""
    import tempfile

    return Path(tempfile.gettempdir()) / f"tupletree-spark-{os.getpid()}.log"


def build_local_session(
    slots: int | None = None,
    *,
    max_failures: int = DEFAULT_MAX_FAILURES,
    conf: Mapping[str, str] | None = None,
    jvm_log: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Start a local SparkSession for tupletree with ``slots`` task slots (default: cores).

    Checks pyspark and Java first. ``conf`` entries override the defaults of
    ``local_session_conf``. If a SparkContext is already running in this process, Spark
    hands that one back and ignores the master and settings given here (Spark allows one
    context per process); use ``get_or_create_session`` to get it explicitly.
    """
    return build_session(local_master(slots, max_failures), slots=slots, conf=conf, jvm_log=jvm_log)


def build_session(
    master: str,
    *,
    slots: int | None = None,
    conf: Mapping[str, str] | None = None,
    jvm_log: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Start a SparkSession on ``master`` with tupletree's settings
    (``local_session_conf(slots)``, overridden by ``conf``). Checks pyspark and Java.
    ``jvm_log``: a file for the JVM's own stderr (``jvm_output_to``)."""
    check_pyspark()
    check_java()
    check_standalone_master(master)
    use_this_python()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    settings = local_session_conf(slots)
    settings.update(conf or {})
    # PySpark's SparkContext takes the executors' Python from PYSPARK_PYTHON alone
    # (spark-submit exports its spark.pyspark.python there): a conf given here must too.
    if conf and "spark.pyspark.python" in conf:
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    for key, value in settings.items():
        builder = builder.config(key, value)
    with jvm_output_to(jvm_log):
        return builder.getOrCreate()


MASTER_CONNECT_SECS = 5.0


def check_standalone_master(master: str, timeout: float = MASTER_CONNECT_SECS) -> None:
    """For a standalone master (``spark://host:port``, or several, comma-separated for
    standby masters), check that one of them accepts a connection. Spark itself tries
    for a minute, then stops the context, and what the caller sees is a page of Py4J
    saying the context is stopped; the log file alone names the master."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master[len("spark://") :].split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SparkUnavailableError(
                f"cannot read host:port in the Spark master {master!r} (at {address!r})"
            )
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
            return
        except OSError as exc:
            problems.append(f"{host}:{port}: {exc.strerror or exc}")
    raise SparkUnavailableError(
        f"cannot reach the Spark master {master} ({'; '.join(problems)}): is it running, "
        "and is this its address and port (spark-class ...Master prints both)?"
    )


def active_session() -> SparkSession | None:
    """The SparkSession already running in this process, if any (no JVM is started)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is None:
        return None
    # A context may run without a session object (created via SparkContext directly);
    # getOrCreate then wraps it and does not start anything new.
    return SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()


def get_or_create_session(
    master: str | None = None, *, jvm_log: str | os.PathLike[str] | None = None
) -> tuple[SparkSession, bool]:
    """Return ``(session, created)``: the session running in this process; under
    spark-submit, the one its options describe; else a new one on ``master`` (default
    ``local[*]``). A local ``local[N]`` becomes ``local[N,4]``: without the retry count
    Spark would not re-run a worker that died, and the topology would stop with it.

    ``created`` tells the caller whether it owns the session and should stop it when it
    is done (SparkCluster's ``__exit__``); one that was already running is left alone.
    ``jvm_log``: a file for the JVM's own stderr when a JVM is started here (under
    spark-submit it is running already).

    The process's SIGINT handler is kept: PySpark puts in one, when it starts a
    SparkContext, that cancels every Spark job before raising KeyboardInterrupt, so
    Ctrl-C would end the workers' tasks without closing their spouts or cleaning up their
    bolts. Kept, Ctrl-C reaches the caller (``with SparkCluster() ...``, ``tupletree
    run``), whose ``kill_topology`` stops the workers properly.
    """
    with _keeping_sigint():
        return _get_or_create_session(master, jvm_log)


@contextlib.contextmanager
def _keeping_sigint() -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGINT, previous)


def _get_or_create_session(
    master: str | None, jvm_log: str | os.PathLike[str] | None
) -> tuple[SparkSession, bool]:
    existing = active_session()
    if existing is not None:
        return existing, False
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Launched by spark-submit: its --master and --conf already apply.
        use_this_python()
        from pyspark.sql import SparkSession

        return SparkSession.builder.appName("tupletree").getOrCreate(), True
    master = master or "local[*]"
    if master == "local" or master.startswith("local["):
        slots = slots_from_master(master)
        if slots is None:
            raise ValueError(f"cannot read a slot count from the Spark master {master!r}")
        return build_local_session(slots, jvm_log=jvm_log), True
    return build_session(master, jvm_log=jvm_log), True
