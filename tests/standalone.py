"""The suite's real Spark cluster: a standalone master and two workers on 127.0.0.2 and
127.0.0.3 (``tupletree.spark.standalone``), whose executors run a Python that has
neither tupletree nor pyzmq; what they import of ours reaches them only in the archive
``tupletree pack`` writes, shipped the way PySpark documents (``spark.archives``).

A driver on it is a process of its own (one SparkContext per process: the suite's local
session lives in the test process), started with ``spark-submit`` and the options
``tupletree pack`` prints, as docs/spark-cluster.md tells users to. ``RemoteCluster``
drives a SparkCluster in such a process over an authenticated local connection, so the
scenario suite runs on it through the same harness as on the other clusters.

Packing is not cached across runs: it takes 2-3 s, less than the cluster's start, and a
cache keyed on the sources would also have to key on every installed dependency.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

from tupletree.spark.pack import driver_options, pack, submit_options
from tupletree.spark.standalone import StandaloneCluster, spark_home

REPO = Path(__file__).resolve().parents[1]
CALL_TIMEOUT_SECS = 300.0
DRIVER_START_SECS = 180.0


@dataclass
class Standalone:
    """The running cluster, the archive for its executors, and their bare Python."""

    cluster: StandaloneCluster
    archive: Path
    executor_python: Path

    @property
    def url(self) -> str:
        return self.cluster.url

    def app_options(self) -> list[str]:
        """``--conf`` of ``StandaloneCluster.session_conf``: loopback, one core a host."""
        return [
            word
            for key, value in self.cluster.session_conf().items()
            for word in ("--conf", f"{key}={value}")
        ]

    def submit(self, app: str | Path, *args: str) -> list[str]:
        """The spark-submit command for ``app`` docs/spark-cluster.md gives: this
        cluster's master, the archive's options and the driver's Python (client mode),
        and this cluster's application settings."""
        return [
            str(spark_home() / "bin" / "spark-submit"),
            *("--master", self.url),
            *self.app_options(),
            *submit_options(self.archive),
            *driver_options(sys.executable),
            str(app),
            *args,
        ]

    def driver_env(self) -> dict[str, str]:
        """The driver's environment: on loopback (SPARK_LOCAL_IP, as spark-env.sh would
        set it), with the tupletree this test process imports (PYTHONPATH kept), and no
        PYSPARK_PYTHON of its own (the submit's options decide)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT")
        }
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["SPARK_HOME"] = str(spark_home())
        return env


def bare_python(where: Path) -> Path:
    """A venv of the base interpreter with nothing in it (not even pip): what the
    executors run as ``python3``. Spark's worker needs only the standard library and
    pyspark.zip, which Spark puts on its path."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run(
        [base, "-m", "venv", "--without-pip", str(where)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    python = where / "bin" / "python3"
    probe = subprocess.run(
        [str(python), "-c", "import tupletree"],
        capture_output=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=60,
        check=False,
    )
    assert probe.returncode != 0, f"{python} imports tupletree: the test would prove nothing"
    return python


def start(where: Path) -> Standalone:
    """Pack the archive, make the executors' Python, start the cluster."""
    archive = pack(where / "env.tar.gz").path
    python = bare_python(where / "executor-venv")
    cluster = StandaloneCluster(workers=2, cores=2, executor_python=python, log_dir=where / "spark")
    cluster.start()
    return Standalone(cluster, archive, python)


# ------------------------------------------------------------- a SparkCluster elsewhere

DRIVER = textwrap.dedent(
    """
    # Serves a SparkCluster (on the session spark-submit made) to the test process over
    # an authenticated connection; started by tests/standalone.py's RemoteCluster.
    import os, pickle, sys, traceback
    from multiprocessing.connection import Listener

    from pyspark import cloudpickle

    from tupletree.spark.cluster import SparkCluster


    def executor_pythons(sc):
        def where(_):
            import sys
            import tupletree
            yield (sys.executable, tupletree.__file__)
        return sorted(set(sc.parallelize(range(2), 2).mapPartitions(where).collect()))


    def answer(conn, ok, value):
        try:
            data = pickle.dumps((ok, value))
        except Exception:
            data = pickle.dumps((False, RuntimeError(repr(value))))
        conn.send_bytes(data)


    key = bytes.fromhex(os.environ.pop("TUPLETREE_TEST_DRIVER_KEY"))
    with SparkCluster() as cluster:
        cluster.spark.sparkContext.setLogLevel("ERROR")
        with Listener(("127.0.0.1", 0), authkey=key) as listener:
            partial = sys.argv[1] + ".partial"
            with open(partial, "w") as f:
                f.write("%s:%d" % listener.address)
            os.replace(partial, sys.argv[1])
            conn = listener.accept()
            while True:
                method, args, kwargs = cloudpickle.loads(conn.recv_bytes())
                if method == "_stop":
                    answer(conn, True, None)
                    break
                try:
                    if method == "_kill_all":
                        value = [cluster.kill_topology(n) for n in cluster.topologies()]
                    elif method == "_executor_pythons":
                        value = executor_pythons(cluster.spark.sparkContext)
                    elif method == "_master":
                        value = cluster.master
                    else:
                        value = getattr(cluster, method)(*args, **kwargs)
                except BaseException as exc:
                    exc.__traceback__ = None
                    exc.remote_traceback = traceback.format_exc()
                    answer(conn, False, exc)
                else:
                    answer(conn, True, value)
    """
)


class RemoteCluster:
    """A SparkCluster in a driver process of its own, submitted to ``standalone`` with
    spark-submit; its methods are called over a connection (arguments by cloudpickle,
    the classes of test modules by value, as SparkCluster ships them to executors)."""

    simulate_time = False
    conn: Connection | None = None

    def __init__(self, standalone: Standalone, where: Path) -> None:
        script = where / "remote_driver.py"
        script.write_text(DRIVER)
        address_file = where / "driver.address"
        key = secrets.token_bytes(32)
        env = standalone.driver_env()
        env["TUPLETREE_TEST_DRIVER_KEY"] = key.hex()
        self.log = where / "driver.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                standalone.submit(script, str(address_file)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                cwd=where,
            )
        deadline = time.monotonic() + DRIVER_START_SECS
        while not address_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the remote driver did not start:\n{self._log_tail()}")
            time.sleep(0.2)
        host, port = address_file.read_text().rsplit(":", 1)
        self.conn = Client((host, int(port)), authkey=key)

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from pyspark import cloudpickle

        if self.conn is None:
            raise RuntimeError("the remote driver is not connected")
        self.conn.send_bytes(cloudpickle.dumps((method, args, kwargs)))
        if not self.conn.poll(CALL_TIMEOUT_SECS):
            raise TimeoutError(f"remote {method} gave no answer in {CALL_TIMEOUT_SECS} s")
        ok, value = pickle.loads(self.conn.recv_bytes())
        if not ok:
            raise value
        return value

    def submit_topology(
        self, name: str, conf: dict[str, Any] | None, topology: Any, inactive: bool = False
    ) -> None:
        from tupletree.spark.cluster import _ship_user_modules_by_value

        _ship_user_modules_by_value(topology)  # test modules: by value, to the driver too
        self.call("submit_topology", name, conf, topology, inactive)

    def kill_all(self) -> None:
        self.call("_kill_all")

    @property
    def master(self) -> str:
        return self.call("_master")

    def executor_pythons(self) -> list[tuple[str, str]]:
        """(sys.executable, tupletree.__file__) as the executors' Python workers see them."""
        return self.call("_executor_pythons")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.call("_stop")
            self.conn.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
