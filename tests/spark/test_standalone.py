"""tupletree on a Spark standalone cluster of two "hosts" (127.0.0.2 and 127.0.0.3),
whose executors run a Python without tupletree: it reaches them only in the archive
``tupletree pack`` writes (tests/standalone.py, the ``standalone`` fixture). The word
count is submitted with the command docs/spark-cluster.md gives, and the banner names
what the run really used. The scenario suite's ``standalone`` cluster is the same one."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tupletree.spark.pack import ARCHIVE_NAME
from tupletree.spark.standalone import spark_home

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "spark-cluster.md"


def _doc_standalone_command() -> list[str]:
    """The standalone spark-submit of docs/spark-cluster.md, as words: the ``sh`` block
    after the heading 'On a standalone cluster', its last command."""
    text = DOC.read_text()
    section = text.split("### On a standalone cluster", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = [line for line in joined.splitlines() if line.startswith("spark-submit")]
    return shlex.split(commands[-1])


def test_the_executors_import_tupletree_from_the_archive_only(standalone_driver, standalone):
    """Each executor's Python is ./environment/bin/python of its working directory and
    tupletree comes from there; the executors' own python3 cannot import it."""
    seen = standalone_driver.executor_pythons()
    assert seen, "no executor answered"
    for python, module in seen:
        assert f"/{ARCHIVE_NAME}/bin/python" in python, python
        assert f"/{ARCHIVE_NAME}/lib/" in module, module
        assert not Path(module).is_relative_to(REPO), module


def test_workers_bind_the_address_of_their_own_host(standalone_driver):
    """Two workers, one per single-core executor: each on its executor's address
    (127.0.0.2, 127.0.0.3), none on the driver's 127.0.0.1. A data socket bound to
    loopback where it should bind the host's address fails here."""
    from tupletree import Config, TopologyBuilder
    from tupletree.testing import FeederSpout

    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["x"]))
    conf = {Config.TOPOLOGY_WORKERS: 2}
    standalone_driver.submit_topology("hosts", conf, b.create_topology())
    try:
        workers = standalone_driver.workers("hosts")
    finally:
        standalone_driver.kill_topology("hosts")
    hosts = sorted(w.address.split("://")[1].rsplit(":", 1)[0] for w in workers.values())
    assert hosts == ["127.0.0.2", "127.0.0.3"], workers


def test_word_count_submitted_as_the_docs_say(standalone, tmp_path):
    """docs/spark-cluster.md's standalone command, with this cluster's master and archive:
    every sentence acked on two workers, one per host; the banner names the real master,
    the executors' hosts, and how long the archive took to reach them."""
    words = _doc_standalone_command()
    import tupletree.cli

    # The doc's placeholders, each of which must be in it, and what they are here.
    here = {
        "spark-submit": str(spark_home() / "bin" / "spark-submit"),
        "spark://master-host:7077": standalone.url,
        f"env.tar.gz#{ARCHIVE_NAME}": f"{standalone.archive}#{ARCHIVE_NAME}",
        "spark.pyspark.driver.python=python": f"spark.pyspark.driver.python={sys.executable}",
        "$(python -c 'import tupletree.cli as c; print(c.__file__)')": tupletree.cli.__file__,
        "examples/word_count.py": str(REPO / "examples" / "word_count.py"),
    }
    assert set(here) <= set(words), sorted(set(here) - set(words))
    command = [here.get(word, word) for word in words] + ["--no-ui"]
    # The doc's options, then this cluster's (one core a host: another application,
    # the scenario suite's driver, may be running on it too).
    command[1:1] = standalone.app_options()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env=standalone.driver_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert f"running word-count on Spark {standalone.url}, 2 worker(s)" in out, out
    assert "executors: 2 on 127.0.0.2 (1 core), 127.0.0.3 (1 core)" in out, out
    assert re.search(r"workers: 0 on 127\.0\.0\.[23]\b.*1 on 127\.0\.0\.[23]\b", out), out
    ready = re.search(
        rf"executors ready in [\d.]+ s \(archive {ARCHIVE_NAME} \(env\.tar\.gz, [\d.]+ MB\) "
        rf"fetched and unpacked",
        out,
    )
    assert ready, out
    assert "done: 100,000 trees acked, 0 failed" in out, out
    assert f"ran on {standalone.url}: workers 0 on 127.0.0." in out, out
