"""Two things a new user meets in the first hour: Spark's JVM start-up noise before
tupletree's own output, and a session of their own whose executors cannot import
tupletree. Each in a process of its own (one SparkContext per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.standalone import bare_python
from tupletree.spark.errors import executor_python_hint
from tupletree.spark.session import jvm_output_to

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "word_count.py"
# Lines the JVM prints as a session starts (the six); none is tupletree's.
JVM_NOISE = (
    "Using incubator modules",
    "Using Spark's default log4j profile",
    "resolves to a loopback address",
    "native-hadoop",
    "Setting default log level",
)


def test_a_process_started_in_the_block_writes_its_stderr_to_the_file(tmp_path, capfd):
    """The JVM inherits stderr as it starts: a child started inside ``jvm_output_to``
    writes into the file for its whole life; this process's stderr is back after."""
    log = tmp_path / "jvm.log"
    script = "import sys, time; print('early', file=sys.stderr, flush=True); "
    script += "time.sleep(0.5); print('late', file=sys.stderr, flush=True)"
    with jvm_output_to(log):
        child = subprocess.Popen([sys.executable, "-c", script])
    print("ours", file=sys.stderr, flush=True)
    child.wait(timeout=30)
    assert log.read_text().split() == ["early", "late"]
    assert "ours" in capfd.readouterr().err
    with jvm_output_to(None):  # --verbose: nothing redirected
        subprocess.run([sys.executable, "-c", "import sys; print('shown', file=sys.stderr)"])
    assert "shown" in capfd.readouterr().err


@pytest.mark.spark
@pytest.mark.slow
def test_verbose_shows_what_run_keeps_quiet(tmp_path):
    """With --verbose the JVM's start-up lines are printed (without it they are not:
    tests/spark/test_run_command.py checks the default run's stderr is empty)."""
    command = [str(Path(sys.executable).parent / "tupletree"), "run", str(EXAMPLE)]
    command += ["--master", "local[1]", "--workers", "1", "--no-ui", "--duration", "1"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [*command, "--verbose"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.startswith("tupletree: running word-count on Spark local[1,4]")
    assert sum(noise in done.stderr for noise in JVM_NOISE) >= 2, done.stderr


def test_the_hint_names_the_setting_and_pack():
    """A missing tupletree or pyzmq points at PYSPARK_PYTHON and `tupletree pack`; a
    missing library of the topology's at `pack --requirements`; other errors get none."""
    hint = executor_python_hint("... ModuleNotFoundError: No module named 'tupletree'", "python3")
    assert hint is not None
    assert "executors' Python (python3) cannot import tupletree" in hint
    assert "PYSPARK_PYTHON" in hint and "spark.pyspark.python" in hint
    assert "tupletree pack" in hint
    zmq = executor_python_hint("No module named 'zmq.backend'", "/usr/bin/python3")
    assert zmq is not None and "cannot import zmq.backend" in zmq
    other = executor_python_hint("No module named 'numpy'", "python3")
    assert other is not None and "tupletree pack --requirements" in other
    extra = executor_python_hint("No module named 'confluent_kafka'", "./environment/bin/python")
    assert extra is not None and "tupletree pack --extras kafka" in extra
    assert executor_python_hint("ValueError: bad input", "python3") is None


NO_PYTHON = (
    'java.io.IOException: Cannot run program "./environment/bin/python" (in directory '
    '"/work/app-1/0"): error=2, No such file or directory'
)


def test_a_shipped_archive_whose_interpreter_is_missing_is_not_told_to_ship_it():
    """spark.archives ships env.tar.gz as 'environment', yet ./environment/bin/python
    cannot run: its bin/python links to an interpreter (pack --python) the executor
    hosts lack. The hint says that, not "ship the archive" the user did ship."""
    hint = executor_python_hint(
        NO_PYTHON, "./environment/bin/python", "file:/home/me/env.tar.gz#environment"
    )
    assert hint is not None
    assert "file:/home/me/env.tar.gz is shipped as 'environment'" in hint
    assert "symlink to an interpreter outside the archive" in hint
    assert "--python" in hint and "ship the archive" not in hint


def test_an_archive_shipped_under_another_name_is_named():
    """--archives env.tar.gz#env with spark.pyspark.python=./environment/bin/python."""
    hint = executor_python_hint(NO_PYTHON, "./environment/bin/python", "file:/x/env.tar.gz#env")
    assert hint is not None
    assert "spark.archives ships file:/x/env.tar.gz as 'env', none as 'environment'" in hint
    # No archive at all: the original hint, to ship it.
    none = executor_python_hint(NO_PYTHON, "./environment/bin/python", "")
    assert none is not None and "ship the archive it lives in" in none


def test_an_archive_shipped_without_a_name_is_named_by_its_file_as_spark_does():
    """--archives env.tar.gz (no #NAME): Spark unpacks it into a directory named after
    the file, so ./environment/bin/python is not in it; the hint names that directory."""
    hint = executor_python_hint(NO_PYTHON, "./environment/bin/python", "file:/x/env.tar.gz")
    assert hint is not None
    assert "ships file:/x/env.tar.gz as 'env.tar.gz', none as 'environment'" in hint
    shipped = executor_python_hint(NO_PYTHON, "./environment/bin/python", "/x/environment/")
    assert shipped is not None and "is shipped as 'environment'" in shipped
    # Known to ship nothing (""), the hint does not wonder whether it is shipped;
    # unknown (None: the session's conf could not be read), it names both causes.
    none = executor_python_hint(NO_PYTHON, "./environment/bin/python", "")
    assert none is not None and "if it is shipped" not in none
    unknown = executor_python_hint(NO_PYTHON, "./environment/bin/python", None)
    assert unknown is not None and "if it is shipped" in unknown
    # An absolute path is no archive's, whatever spark.archives ships.
    absolute = executor_python_hint(
        NO_PYTHON.replace("./environment/bin/python", "/opt/py/bin/python"),
        "/opt/py/bin/python",
        "file:/x/env.tar.gz#environment",
    )
    assert absolute is not None and "none as" not in absolute and "is shipped" not in absolute


def test_an_executor_python_of_another_version_names_both_and_pack_python():
    """The archive's bin/python links to a Python 3.12 while the driver runs 3.11:
    PySpark's PYTHON_VERSION_MISMATCH gets what to do with the archive."""
    text = (
        "pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] "
        "Python in worker has different version: 3.12 than that in driver: 3.11, PySpark "
        "cannot run with different minor versions."
    )
    hint = executor_python_hint(text, "./environment/bin/python")
    assert hint is not None
    assert "(./environment/bin/python) is Python 3.12 and the driver's 3.11" in hint
    assert "--python naming a Python 3.11" in hint


def test_the_session_s_archives_reach_the_hint():
    """SparkCluster's submit passes the session's spark.archives to the hint."""
    from tupletree.spark.cluster import _with_python_hint
    from tupletree.spark.errors import SparkJobFailed

    class Conf:
        def get(self, key, default=None):
            return {"spark.archives": "file:/x/env.tar.gz#environment"}.get(key, default)

    class Context:
        pythonExec = "./environment/bin/python"

        def getConf(self):
            return Conf()

    class Session:
        sparkContext = Context()

    class Launcher:
        job_error = NO_PYTHON

    failed = _with_python_hint(SparkJobFailed("the job ended"), Launcher(), Session())
    assert failed is not None
    assert "file:/x/env.tar.gz is shipped as 'environment'" in str(failed)


USER_SESSION = textwrap.dedent(
    """
    import sys
    sys.path[:0] = sys.argv[1:]  # tupletree for this driver only, as if installed here
    from pyspark.sql import SparkSession
    from tupletree import SparkCluster, TopologyBuilder
    from tupletree.spark.errors import SparkJobFailed
    from tupletree.testing import FeederSpout

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]))
    with SparkCluster(spark=spark) as cluster:
        try:
            cluster.submit_topology("first-hour", {}, b.create_topology())
        except SparkJobFailed as exc:
            print("FAILED " + str(exc).replace("\\n", " "))
    """
)


@pytest.mark.spark
@pytest.mark.slow
def test_a_session_built_without_pyspark_python_fails_with_the_hint(tmp_path):
    """The user's own SparkSession, no PYSPARK_PYTHON: executors run ``python3``, which
    here has no tupletree. submit_topology fails saying so, naming the setting and
    `tupletree pack`, instead of a bare "No module named 'tupletree'"."""
    python = bare_python(tmp_path / "bare")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    failed = _user_session_failure(tmp_path, env)
    assert "No module named 'tupletree'" in failed or "cannot import tupletree" in failed
    assert "the executors' Python (python3) cannot import tupletree" in failed, failed
    assert "PYSPARK_PYTHON" in failed and "tupletree pack" in failed


def _user_session_failure(tmp_path: Path, env: dict[str, str]) -> str:
    """Run USER_SESSION (tupletree from this checkout, on the driver's path only) in a
    process of its own with ``env``; the line it printed for the failed submit."""
    script = tmp_path / "user.py"
    script.write_text(USER_SESSION)
    import tupletree

    source = str(Path(tupletree.__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, str(script), source],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("FAILED ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    return lines[0]


@pytest.mark.spark
@pytest.mark.slow
def test_a_submit_without_the_archive_fails_with_the_hint(tmp_path):
    """spark.pyspark.python names the archive's Python (./environment/bin/python, as
    `tupletree pack` prints) but no archive was shipped: submit_topology fails saying
    which Python is missing and how to ship it, instead of Spark's bare "Cannot run
    program"."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # What spark-submit makes of --conf spark.pyspark.python=... (a builder's config
    # of that key is not read: PySpark takes the executors' Python from this variable).
    env["PYSPARK_PYTHON"] = "./environment/bin/python"
    failed = _user_session_failure(tmp_path, env)
    assert "the executors have no Python at ./environment/bin/python" in failed, failed
    assert "--archives env.tar.gz#environment" in failed
