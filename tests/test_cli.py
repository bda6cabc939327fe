"""The ``tupletree run`` command: the example in-process (LocalCluster); stopping a run
(SIGINT, SIGTERM, a kill from the web view); bad options and files."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tupletree import cli

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "word_count.py"


def test_run_local_word_count_prints_summary_and_top_words(capsys):
    """`tupletree run --local examples/word_count.py` acks every sentence and prints the
    summary and the example's top words."""
    assert cli.main(["run", "--local", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "done: 100,000 trees acked, 0 failed" in out
    assert "top words: the " in out
    assert "sentences acked 100,000, failed 0" in out


def test_run_rejects_a_file_without_topology(tmp_path):
    """A file that defines no topology() gets a clear message, not a traceback."""
    bad = tmp_path / "nothing.py"
    bad.write_text("x = 1\n")
    with pytest.raises(SystemExit, match="must define topology"):
        cli.main(["run", "--local", str(bad)])


@pytest.mark.parametrize("command", ["run", "visualize"])
def test_a_file_that_is_not_python_is_a_one_line_error(command: str) -> None:
    """`tupletree run README.md` (or visualize): one line naming the file, not a bare
    AssertionError."""
    readme = EXAMPLE.parents[1] / "README.md"
    args = [command, "--local", str(readme)] if command == "run" else [command, str(readme)]
    with pytest.raises(SystemExit, match=f"tupletree {command}: .*README.md is not a Python"):
        cli.main(args)


@pytest.mark.parametrize(
    ("given", "meant"),
    [("examples.word_count", "examples/word_count.py"), ("examples/word_count", None)],
)
def test_a_module_name_or_a_name_without_py_points_at_the_file(
    monkeypatch: pytest.MonkeyPatch, given: str, meant: str | None
) -> None:
    """`tupletree run examples.word_count` (a module name, as `python -m` takes) or
    `run examples/word_count`: the one-line error names what was given and the file
    it may have meant, not a bare "no such file"."""
    monkeypatch.chdir(EXAMPLE.parents[1])
    meant = meant or f"{given}.py"
    with pytest.raises(SystemExit) as raised:
        cli.main(["run", "--local", given])
    assert str(raised.value) == (
        f"tupletree run: no such file: {given} (it wants a .py file's path: did you mean {meant}?)"
    )
    with pytest.raises(SystemExit, match=r"no such file: nowhere_at_all \(it wants the path"):
        cli.main(["run", "--local", "nowhere_at_all"])


def test_summary_line_on_worker_restarts():
    """`tupletree run` on SparkCluster ends its summary with the restarts per worker."""
    assert cli.restarts_line({0: 0, 1: 0}) == "worker restarts: 0"
    line = cli.restarts_line({0: 2, 1: 0, 2: 5})
    assert line.startswith("worker restarts: 7 (worker 0: 2, worker 2: 5)")


def test_version_and_help_answer_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` prints the version (not the usage text); ``--help`` describes the
    command in plain words, with no reST markup from the module's docstring."""
    from tupletree.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("tupletree ")
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text
    assert "usage: tupletree" in text and "run" in text


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["rebalance", "wc", "-n", "0"], "a number of workers, 1 or more, got '0'"),
        (["rebalance", "wc", "-n", "two"], "a number of workers, 1 or more, got 'two'"),
        (["kill", "wc", "-w", "-1"], "seconds, 0 or more, got -1"),
        (["rebalance", "wc", "-w", "nan"], "seconds, 0 or more, got nan"),
        (["kill", "wc", "-w", "soon"], "wants a number of seconds, got 'soon'"),
    ],
)
def test_remote_verbs_refuse_a_bad_count_or_wait_before_asking_the_service(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-n 0`` and ``-w -1`` are refused by the CLI with the option's rule, as argparse
    refuses anything unreadable, before any request (they used to reach the service)."""
    from tupletree.cli import main

    with pytest.raises(SystemExit) as done:
        main([*argv, "--ui", "http://127.0.0.1:9"])
    assert done.value.code == 2
    assert said in capsys.readouterr().err


# -- stopping a run: signals, a kill from outside, bad arguments ------------------------

RUN_FILE = """
import os, time
from tupletree import Bolt, Config, Spout, TopologyBuilder

CONF = {Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS: 0.5}
MARKS = os.environ["MARKS"]

def mark(what):
    with open(os.path.join(MARKS, what), "w"):
        pass

class Numbers(Spout):
    outputs = ["n"]
    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0
    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)
    def close(self):
        mark("closed")

class Sink(Bolt):
    outputs = []
    def prepare(self, conf, context, collector):
        self.collector = collector
    def execute(self, tup):
        mark("executing")
        if os.environ.get("BLOCK"):
            time.sleep(3600)
        self.collector.ack(tup)

def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("sink", Sink()).shuffle_grouping("numbers")
    return b.create_topology()
"""


def _run_until(tmp_path: Path, mark: str, block: bool) -> subprocess.Popen[str]:
    """``tupletree run --local`` of RUN_FILE in a child process, once ``mark`` exists."""
    file = tmp_path / "endless.py"
    file.write_text(RUN_FILE)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "MARKS": str(marks), "PYTHONPATH": os.pathsep.join(sys.path)}
    if block:
        env["BLOCK"] = "1"
    child = subprocess.Popen(
        [sys.executable, "-m", "tupletree.cli", "run", "--local", "--no-ui", str(file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not (marks / mark).exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, f"{mark} never happened"
        time.sleep(0.05)
    return child


@pytest.mark.parametrize(
    ("signum", "block"), [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGTERM, False)]
)
def test_ctrl_c_and_sigterm_end_a_run_with_the_summary(
    tmp_path: Path, signum: int, block: bool
) -> None:
    """SIGINT or SIGTERM during a run: it prints the summary and ends (status 130), also
    with a bolt stuck in execute (named on stderr after the bounded wait); with nothing
    stuck, the spout's close() ran before it ended."""
    child = _run_until(tmp_path, "executing", block)
    child.send_signal(signum)
    try:
        out, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"still running 60 s after {signum!r}:\n{out}\n{err}") from None
    assert child.returncode == 130, err
    name = signal.Signals(signum).name
    assert f"tupletree: {name}: stopping endless" in out
    assert "done: " in out and "  sink " in out
    assert "Traceback" not in err
    if block:
        assert "bolt 'sink' (task" in err and "in execute" in err
    else:
        assert (tmp_path / "marks" / "closed").exists()


def _run_steered(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    source: str,
    steer: Callable[[Any], None],
) -> Path:
    """``tupletree run --local`` of ``source`` (saved as NAME.py, MARKS its marks
    folder) with its web view on a free port, while another thread, once the topology
    is listed there, calls ``steer(client)``. Asserts the run exits 0; returns the
    marks folder."""
    from tupletree.ui.client import UIClient

    file = tmp_path / f"{name}.py"
    file.write_text(source)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS", str(marks))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def when_listed() -> None:
        client = UIClient(f"127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if [t["name"] for t in client.topologies()] == [name]:
                    steer(client)
                    return
            except Exception:
                pass  # not serving yet
            time.sleep(0.05)

    steering = threading.Thread(target=when_listed, daemon=True)
    steering.start()
    assert cli.main(["run", "--local", "--ui-port", str(port), str(file)]) == 0
    steering.join(10)
    return marks


def test_a_run_killed_from_the_web_view_ends_with_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tupletree kill` (the web view's kill) of the topology a `tupletree run` watches:
    the run ends with a line saying so and the summary, not a traceback."""
    _run_steered(tmp_path, monkeypatch, "endless", RUN_FILE, lambda c: c.kill("endless", 0))
    out = capsys.readouterr().out
    assert "tupletree: endless was killed (from the web view or `tupletree kill`)" in out
    assert "done: " in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--ui-port", "70000"], "wants a port from 0 to 65535, got 70000"),
        (["--duration", "nan"], "wants a finite number of seconds above 0, got nan"),
        (["--duration", "-1"], "wants a finite number of seconds above 0, got -1"),
        (["--ui-host", "999.1.1.1"], "tupletree run: "),
    ],
)
def test_bad_run_options_are_one_line_errors(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port out of range, a NaN or negative duration, an address that cannot be
    listened on: one line naming the value, no traceback, nothing run."""
    with pytest.raises(SystemExit) as done:
        cli.main(["run", "--local", *args, str(EXAMPLE)])
    text = str(done.value.code) if isinstance(done.value.code, str) else capsys.readouterr().err
    assert done.value.code != 0
    assert expected in text
    assert "Traceback" not in text
    if args[0] == "--ui-host":
        assert "999.1.1.1" in text and "\n" not in text.strip()


def test_a_topology_function_returning_none_is_a_one_line_error(tmp_path: Path) -> None:
    """topology() that returns None (a forgotten return): one line saying what it got."""
    file = tmp_path / "forgot.py"
    file.write_text("def topology():\n    pass\n")
    with pytest.raises(SystemExit, match=r"must return a Topology .* it returned NoneType"):
        cli.main(["run", "--local", "--no-ui", str(file)])


PAUSED_FILE = """
import logging
import os
from tupletree import Bolt, Spout, TopologyBuilder

MARKS = os.environ["MARKS"]

class Numbers(Spout):
    '''Emits for ever until deactivated once; once active again, 100 more, then stops.'''
    outputs = ["n"]
    def open(self, conf, context, collector):
        self.collector, self.n, self.last = collector, 0, None
    def next_tuple(self):
        if self.last is None or self.n < self.last:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)
    def deactivate(self):
        self.last = self.n + 100
        open(os.path.join(MARKS, "deactivated"), "w").close()
    def close(self):
        with open(os.path.join(MARKS, "emitted"), "w") as f:
            f.write(str(self.n))

class Sink(Bolt):
    outputs = []
    def prepare(self, conf, context, collector):
        self.collector = collector
    def execute(self, tup):
        self.collector.ack(tup)

def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("sink", Sink(), parallelism=1, tasks=2).shuffle_grouping("numbers")
    return b.create_topology()
"""


def test_a_run_deactivated_or_rebalanced_from_outside_goes_on_until_it_is_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topology paused from outside (`tupletree deactivate`, a rebalance) emits nothing
    while paused; the run must not take that quiet for the end and kill it. It says
    each change of status, and ends once the topology, active again, ran dry."""
    monkeypatch.setattr(cli, "QUIET_SECS", 0.3)
    steps: list[str] = []

    def steer(client: Any) -> None:
        client.deactivate("paused")
        time.sleep(1.0)  # three times the quiet that ended a run before
        steps.append(client.topology("paused")["status"])
        client.rebalance("paused", 0, None, {"sink": 2})
        while client.topology("paused")["status"] == "REBALANCING":
            time.sleep(0.05)
        time.sleep(1.0)
        steps.append(client.topology("paused")["status"])
        client.activate("paused")

    marks = _run_steered(tmp_path, monkeypatch, "paused", PAUSED_FILE, steer)
    assert steps == ["INACTIVE", "INACTIVE"]
    out = capsys.readouterr().out
    emitted = int((marks / "emitted").read_text())
    assert f"done: {emitted:,} trees acked, 0 failed" in out
    # (A rebalance with nothing in flight can begin and end between two looks.)
    lines = [
        line
        for line in out.splitlines()
        if line.startswith("tupletree: paused ") and "REBALANCING" not in line
    ]
    assert lines[1:] == [
        "tupletree: paused is INACTIVE",
        "tupletree: paused runs on 1 worker(s), executors numbers=1, sink=2",
        "tupletree: paused is ACTIVE again",
    ]


@pytest.mark.parametrize("where", [["--local"], []])
def test_a_bad_config_is_a_one_line_error_before_any_session(
    where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--workers 0`: refused naming the key and the value, at once (on Spark before a
    session takes seconds to start), without a traceback."""
    started = time.monotonic()
    with pytest.raises(SystemExit) as done:
        cli.main(["run", *where, "--no-ui", "--workers", "0", str(EXAMPLE)])
    assert time.monotonic() - started < 5
    message = str(done.value.code)
    assert message.startswith("tupletree run: ")
    assert "'topology.workers'" in message and "got 0" in message


def test_a_master_that_does_not_answer_is_named_at_once() -> None:
    """A standalone master at an address where nothing listens (a wrong port): one line
    naming it, in seconds; Spark alone would try for a minute and end in Py4J's page
    on a stopped context."""
    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.session import check_java, check_pyspark

    try:
        check_pyspark()
        check_java()
    except SparkUnavailableError as exc:
        pytest.skip(str(exc))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    started = time.monotonic()
    # A process of its own: in this one a test may have started a session already,
    # which `run` would use (as under spark-submit) whatever --master says.
    master = f"spark://127.0.0.1:{port}"
    done = subprocess.run(
        [sys.executable, "-m", "tupletree.cli", "run", "--master", master, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 20
    assert f"cannot reach the Spark master spark://127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_py_file_is_named_without_a_module_name_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A FILE given with .py that is not there is a wrong path, not a module name: the
    error says no more than that."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        cli.main(["run", "--local", "missing.py"])
    assert str(raised.value) == "tupletree run: no such file: missing.py"


FAILING_FILE = """
from tupletree import Bolt, TopologyBuilder
from tupletree.testing import FeederSpout


class Breaks(Bolt):
    outputs = []

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        raise RuntimeError("the bolt broke on " + tup.values[0])


def topology():
    feeder = FeederSpout(["line"])
    feeder.feed(["the-one-line"])
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("breaks", Breaks()).shuffle_grouping("feed")
    return b.create_topology()
"""


def test_a_task_error_is_printed_once_and_named_in_one_line_at_the_end(tmp_path: Path) -> None:
    """A LocalCluster logs a task's error as it happens (traceback and all); the end of
    the run names it in one line instead of printing the whole text a second time."""
    file = tmp_path / "breaks.py"
    file.write_text(FAILING_FILE)
    done = subprocess.run(
        [sys.executable, "-m", "tupletree.cli", "run", "--local", "--no-ui", str(file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    err = done.stderr
    # The traceback (its source line is quoted once per printing of it), once.
    assert err.count('raise RuntimeError("the bolt broke on "') == 1, err
    assert err.count("Traceback (most recent call last)") == 1, err
    hint = [line for line in err.splitlines() if "error(s) reported" in line]
    assert hint == [
        "tupletree: 1 error(s) reported, logged above as they happened; the first: "
        "breaks[task 2] execute: RuntimeError: the bolt broke on the-one-line"
    ], err


def test_a_task_error_not_logged_during_the_run_is_printed_whole_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When the error was not logged as it happened (tupletree's logger turned down here;
    a Spark driver does not log its workers' task errors), the end prints its text."""
    file = tmp_path / "breaks_quietly.py"
    file.write_text(FAILING_FILE)
    logger = logging.getLogger("tupletree")
    level = logger.level
    logger.setLevel(logging.ERROR)  # setLevel, not the attribute: it clears the caches
    try:
        assert cli.main(["run", "--local", "--no-ui", str(file)]) == 0
    finally:
        logger.setLevel(level)
    err = capsys.readouterr().err
    assert err.count('raise RuntimeError("the bolt broke on "') == 1, err
    assert "1 error(s) reported; the first:\nbreaks[task 2] execute: RuntimeError" in err
