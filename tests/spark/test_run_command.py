"""The README's main command, `tupletree run examples/word_count.py`, as a user runs it:
the installed entry point, in a process of its own, on its embedded local Spark; and
stopping such a run with SIGTERM or Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "word_count.py"


def test_run_word_count_on_spark_acks_every_sentence(spark):
    """Every sentence acked on 2 Spark workers, the summary and top words printed, exit 0;
    the banner names the session's real master and comes first: none of the JVM's
    start-up lines before it (they go to a file). (The ``spark`` fixture only skips
    where Java or pyspark is missing.)"""
    command = Path(sys.executable).parent / "tupletree"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [str(command), "run", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert re.match(
        r"tupletree: running word-count on Spark local\[\d+,4\], 2 worker\(s\)", done.stdout
    )
    assert done.stderr == "", done.stderr[-3000:]
    assert "tupletree: workers: 0 on 127.0.0.1" in done.stdout, done.stdout[-2000:]
    assert "done: 100,000 trees acked, 0 failed" in done.stdout
    assert "top words: the " in done.stdout


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_on_spark_close_the_spouts_and_print_the_summary(
    spark, tmp_path: Path, signum: int
) -> None:
    """`tupletree run` on Spark stopped by SIGTERM or SIGINT: the summary is printed, the
    worker's spout is closed (its close() ran in the Spark task), exit status 130.
    (PySpark's own SIGINT handler would cancel the Spark job: no close().)"""
    from tests.test_cli import RUN_FILE

    file = tmp_path / "endless.py"
    file.write_text(RUN_FILE)
    marks = tmp_path / "marks"
    marks.mkdir()
    command = Path(sys.executable).parent / "tupletree"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "MARKS": str(marks)}
    child = subprocess.Popen(
        [str(command), "run", "--no-ui", "--workers", "1", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (marks / "executing").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the topology never ran"
        time.sleep(0.1)
    child.send_signal(signum)
    try:
        out, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"still running 120 s after the signal:\n{out}\n{err}") from None
    name = signal.Signals(signum).name
    assert child.returncode == 130, out[-2000:] + err[-4000:]
    assert f"tupletree: {name}: stopping endless" in out
    assert "done: " in out and "worker restarts: 0" in out
    assert (marks / "closed").exists(), "the spout's close() did not run"


def test_more_workers_than_slots_is_one_line_naming_both(spark, capsys) -> None:
    """`--workers 3` on a session of 2 slots (the suite's, which `run` takes as it
    would under spark-submit): the run ends with one line saying what it needs and what
    Spark has, not NotEnoughSlotsError's traceback."""
    from tupletree import cli

    code = cli.main(["run", "--no-ui", "--workers", "3", str(EXAMPLE)])
    assert code == 1
    err = capsys.readouterr().err
    assert "tupletree run: word-count did not start: " in err
    assert "needs 3 worker slots but Spark has only 2" in err
    assert "Traceback" not in err


def test_a_master_that_cannot_be_used_is_said(spark, capsys) -> None:
    """`run --master ...` in a process whose session runs already (the suite's, as
    under spark-submit): the run goes on that session, and says --master was not used
    and where it runs instead, rather than letting the banner alone tell."""
    from tupletree import cli

    code = cli.main(
        ["run", "--no-ui", "--master", "spark://elsewhere:7077", "--duration", "1", str(EXAMPLE)]
    )
    assert code == 0
    captured = capsys.readouterr()
    master = spark.sparkContext.master
    said = "--master spark://elsewhere:7077 is not used: this process's Spark session"
    assert f"{said} runs already, on {master}" in captured.err
    assert f"running word-count on Spark {master}" in captured.out
