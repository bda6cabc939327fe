"""The ``tupletree run`` command on the example, in-process (LocalCluster)."""

from __future__ import annotations

from pathlib import Path

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
