"""SparkCluster against a Spark standalone cluster: a master and two workers (one core
each) started on loopback from the pyspark install, the topology submitted from a
separate driver process (one SparkContext per process: the suite's local session lives
in this one). Skips with the reason when the cluster cannot be started."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = textwrap.dedent(
    """
    import json, sys, time
    from collections import Counter
    from tupletree import BasicBolt, Config, Spout, TopologyBuilder
    from tupletree.spark.cluster import SparkCluster

    WORDS = "alpha beta gamma delta".split()

    class Words(Spout):
        outputs = ["word"]
        def open(self, conf, context, collector):
            self.collector, self.n = collector, 0
        def next_tuple(self):
            if self.n < 400:
                self.collector.emit([WORDS[self.n % 4]], msg_id=self.n)
                self.n += 1

    class CountsMetric:
        def __init__(self, bolt):
            self.bolt = bolt
        def __call__(self):
            return dict(self.bolt.counts)

    class Count(BasicBolt):
        outputs = []
        def prepare(self, conf, context):
            self.counts = Counter()
            context.register_metric("counts", CountsMetric(self))
        def execute(self, tup, collector):
            self.counts[tup[0]] += 1

    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("count", Count(), parallelism=2).fields_grouping("words", ["word"])
    with SparkCluster(master=sys.argv[1]) as cluster:
        cluster.spark.sparkContext.setLogLevel("FATAL")
        conf = {Config.TOPOLOGY_WORKERS: 2, Config.TOPOLOGY_ACKER_EXECUTORS: 2}
        cluster.submit_topology("standalone", conf, b.create_topology())
        deadline = time.monotonic() + 60
        while cluster.metrics("standalone")["words"]["acked"] < 400:
            assert time.monotonic() < deadline, cluster.metrics("standalone")
            time.sleep(0.2)
        m = cluster.metrics("standalone")
        counts = Counter()
        for per_task in m["count"]["custom"]["counts"].values():
            counts.update(per_task)
        pids = {w.pid for w in cluster.workers("standalone").values()}
        cluster.kill_topology("standalone")
    print("RESULT " + json.dumps({"counts": counts, "failed": m["words"]["failed"],
                                  "workers": len(pids)}))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(path: Path, text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.3)
    return False


@pytest.fixture(scope="module")
def standalone(spark: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:PORT with two 1-core workers; torn down afterwards."""
    spark_class = shutil.which("spark-class", path=str(Path(sys.executable).parent))
    if spark_class is None:
        pytest.skip("spark-class is not installed next to this Python (pyspark's scripts)")
    logs = tmp_path_factory.mktemp("standalone")
    env = {
        **os.environ,
        "SPARK_LOG_DIR": str(logs),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(args: list[str], log: Path) -> None:
        procs.append(
            subprocess.Popen(
                [spark_class, *args],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )

    try:
        start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(_free_port()),
            ],
            logs / "master.log",
        )
        if not _wait_for(logs / "master.log", "Starting Spark master", 60):
            pytest.skip(
                f"the standalone master did not start: {(logs / 'master.log').read_text()[-500:]}"
            )
        for i in range(2):
            start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(logs / f"work{i}"),
                ],
                logs / f"worker{i}.log",
            )
        for i in range(2):
            if not _wait_for(logs / f"worker{i}.log", "Successfully registered", 60):
                pytest.skip(f"standalone worker {i} did not register")
        yield url
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_word_count_on_a_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    """Two topology workers as tasks on two standalone Spark workers: every tuple is
    acked and the counts are exact."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run(
        [sys.executable, str(script), standalone],
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["counts"] == {"alpha": 100, "beta": 100, "gamma": 100, "delta": 100}
    assert result["failed"] == 0
    assert result["workers"] == 2
