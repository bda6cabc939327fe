"""The README's main command, `tupletree run examples/word_count.py`, as a user runs it:
the installed entry point, in a process of its own, on its embedded local Spark."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
