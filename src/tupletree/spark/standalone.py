"""A Spark standalone cluster on this machine, for tests and benchmarks: a master and N
workers started from pyspark's own ``spark-class`` (nothing is downloaded), each worker
on its own loopback address (127.0.0.2, 127.0.0.3, ...) as if on its own host.

What makes it a stand-in for a real cluster, and where it is not one:

- Each worker and its executors bind their own address: ``SPARK_LOCAL_IP`` is set for
  the worker (as ``spark-env.sh`` would on a host), executors and their Python workers
  inherit it, and tupletree's workers advertise it. A socket that binds 127.0.0.1 where
  it should bind the host's address shows up as a worker address on the wrong host.
- The executors' ``python3`` is ``executor_python`` (first on the workers' PATH), and
  the workers get no PYTHONPATH: give it a Python without tupletree and the executors
  can import tupletree only through what the application ships them (``spark.archives``).
- Not covered: every "host" shares this machine's file system, processes and clock, so
  a path only the driver has (other than through PATH and PYTHONPATH) still works.

The master binds 127.0.0.1 on a free port, its REST submission server is off (it would
take the fixed port 6066), web UIs take free ports. Logs go to ``log_dir`` (the master's
and each worker's, and the executors' stdout/stderr under ``work<i>/``). ``stop`` ends
every process it started (executors with their worker) and waits for them.

Linux routes all of 127.0.0.0/8 to the loopback interface; elsewhere (macOS) the extra
addresses need an alias first, and ``start`` says so. Cost: three JVMs (about 10 s to
start on two cores, 300 MB of memory each) plus an executor JVM per worker and
application.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tupletree.spark.errors import SparkUnavailableError
from tupletree.spark.session import check_java, check_pyspark

START_TIMEOUT_SECS = 90.0
STOP_TIMEOUT_SECS = 20.0
_MASTER_UP = "I have been elected leader"
_WORKER_UP = "Successfully registered with master"


def worker_host(index: int) -> str:
    """The loopback address worker ``index`` binds: 127.0.0.2, 127.0.0.3, ..."""
    if not 0 <= index < 250:
        raise ValueError(f"worker index must be in [0, 250), got {index}")
    return f"127.0.0.{index + 2}"


def spark_home() -> Path:
    """pyspark's install directory, which is a Spark distribution (bin/, jars/)."""
    check_pyspark()
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file():
        raise SparkUnavailableError(f"pyspark at {home} has no bin/spark-class")
    return home


def check_bindable(host: str) -> None:
    """Raise SparkUnavailableError, saying how to fix it, when ``host`` cannot be bound."""
    with socket.socket() as probe:
        try:
            probe.bind((host, 0))
        except OSError as exc:
            raise SparkUnavailableError(
                f"cannot bind {host} ({exc}): Linux routes all of 127.0.0.0/8 to loopback; "
                f"elsewhere add the address first (macOS: sudo ifconfig lo0 alias {host})"
            ) from None


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """``with StandaloneCluster(workers=2) as cluster: ... cluster.url ...``

    ``cores`` and ``memory`` are each worker's; ``executor_python`` is the ``python3``
    (and ``python``) the executors find on their PATH (default: whatever PATH has).
    ``session_conf()`` is what an application adds to stay on loopback and to take one
    core on every worker (not all of them, Spark's default): with ``cores`` 2, two
    applications at once each get an executor on every host."""

    def __init__(
        self,
        workers: int = 2,
        *,
        cores: int = 2,
        memory: str = "2g",
        executor_python: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = START_TIMEOUT_SECS,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.executor_python = None if executor_python is None else str(executor_python)
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="spark-sa-"))
        self.start_timeout = start_timeout
        self.hosts = [worker_host(i) for i in range(workers)]
        self.url = ""
        self._procs: list[subprocess.Popen[bytes]] = []

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker registered.
        Raises SparkUnavailableError (with the log's tail) when one does not come up."""
        check_java()
        home = spark_home()
        for host in self.hosts:
            check_bindable(host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = self._base_env(home)
        try:
            port = _free_port("127.0.0.1")
            self.url = f"spark://127.0.0.1:{port}"
            master_env = {
                **env,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            }
            self._spawn(
                home,
                [
                    "org.apache.spark.deploy.master.Master",
                    *("--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"),
                ],
                "master",
                master_env,
            )
            self._wait("master", _MASTER_UP)
            for i, host in enumerate(self.hosts):
                work = self.log_dir / f"work{i}"
                worker_env = {
                    **env,
                    "SPARK_LOCAL_IP": host,
                    "SPARK_LOCAL_DIRS": str(work / "local"),
                    "PATH": self._executor_path(env["PATH"]),
                }
                self._spawn(
                    home,
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        self.url,
                        *("--host", host, "--cores", str(self.cores), "--memory", self.memory),
                        *("--webui-port", "0", "--work-dir", str(work)),
                    ],
                    f"worker{i}",
                    worker_env,
                )
            for i in range(self.workers):
                self._wait(f"worker{i}", _WORKER_UP)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every process group started (a worker's executors are in its group),
        wait, then SIGKILL what is left."""
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECS
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what a driver needs ------------------------------------------------------

    def session_conf(self) -> dict[str, str]:
        """Settings for an application of a driver on this machine: its endpoints on
        127.0.0.1 too (Spark would otherwise advertise the host's name, off loopback);
        one single-core executor on each worker (the master spreads an application's
        cores over the workers), of half a worker's memory."""
        return {
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.cores.max": str(self.workers),
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
        }

    def executor_logs(self) -> list[Path]:
        """The executors' stderr files, newest application first."""
        return sorted(self.log_dir.glob("work*/app-*/*/stderr"), reverse=True)

    # -- helpers ------------------------------------------------------------------

    def _base_env(self, home: Path) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
            and not k.startswith("SPARK_")
        }
        env["SPARK_HOME"] = str(home)
        env["SPARK_LOG_DIR"] = str(self.log_dir)
        env.setdefault("PATH", os.defpath)
        return env

    def _executor_path(self, path: str) -> str:
        """PATH with a directory first whose ``python3`` and ``python`` are
        ``executor_python`` (PySpark's default executor Python is ``python3``)."""
        if self.executor_python is None:
            return path
        bin_dir = self.log_dir / "executor-bin"
        bin_dir.mkdir(exist_ok=True)
        for name in ("python3", "python"):
            link = bin_dir / name
            link.unlink(missing_ok=True)
            link.symlink_to(self.executor_python)
        return f"{bin_dir}{os.pathsep}{path}"

    def _spawn(self, home: Path, args: list[str], name: str, env: dict[str, str]) -> None:
        log = (self.log_dir / f"{name}.log").open("wb")
        try:
            self._procs.append(
                subprocess.Popen(
                    [str(home / "bin" / "spark-class"), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
            )
        finally:
            log.close()

    def _wait(self, name: str, text: str) -> None:
        log = self.log_dir / f"{name}.log"
        proc = self._procs[-1] if name == "master" else None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            content = log.read_text(errors="replace") if log.exists() else ""
            if text in content:
                return
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"
        raise SparkUnavailableError(
            f"the standalone {name} did not come up within {self.start_timeout:.0f} s "
            f"(log {log}):\n{tail}"
        )
