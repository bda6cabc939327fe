"""`tupletree pack`: the archive it writes is a Python environment on which a bare
interpreter imports tupletree and its runtime dependencies, without pyspark or the test
tools (tests/spark/test_standalone.py runs Spark's executors on it)."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tupletree import cli
from tupletree.spark.pack import Packed, PackError, check_python, describe, pack, submit_options

SITE = "lib/python{0.major}.{0.minor}/site-packages".format(__import__("sys").version_info)


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("pack") / "env.tar.gz"
    return pack(out)


def _top_level(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {
            n[len(SITE) + 1 :].split("/")[0]
            for n in tar.getnames()
            if n.startswith(SITE + "/") and n != SITE
        }


@pytest.mark.slow
def test_the_archive_holds_tupletree_and_its_runtime_dependencies_only(packed):
    """tupletree, pyzmq and the rest of its runtime requirements are in; pyspark, py4j
    and the dev tools (pytest, hypothesis, ruff) are not."""
    top = _top_level(packed.path)
    assert {"tupletree", "zmq", "packaging"} <= top
    names = {n.lower() for n, _ in packed.distributions}
    assert {"tupletree", "pyzmq"} <= names
    for absent in ("pyspark", "py4j", "pytest", "hypothesis", "ruff", "_pytest", "redis"):
        assert absent not in top and absent not in names
    # Small enough to ship: the venv-pack of the dev environment was 589 MB.
    assert packed.size < 40 * 2**20, packed.size


@pytest.mark.slow
def test_the_archive_unpacks_to_a_venv_whose_python_imports_tupletree(packed, tmp_path):
    """Unpacked as Spark does (``#environment``), ``./environment/bin/python`` run from
    the directory above, without PYTHONPATH, imports tupletree from the archive, and
    the worker's own modules."""
    target = tmp_path / "environment"
    target.mkdir()
    with tarfile.open(packed.path) as tar:
        tar.extractall(target, filter="tar")
    assert os.readlink(target / "bin" / "python") == packed.python
    assert (
        (target / "pyvenv.cfg").read_text().startswith(f"home = {os.path.dirname(packed.python)}\n")
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [
            "./environment/bin/python",
            "-c",
            "import tupletree, zmq, tupletree.distributed.worker_main, sys; "
            "print(tupletree.__file__); print(sys.prefix)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    where, prefix = done.stdout.split()
    assert Path(where).is_relative_to(target)
    assert Path(prefix) == target


@pytest.mark.slow
def test_the_same_environment_packs_to_the_same_bytes(packed, tmp_path):
    """Sorted entries, no timestamps of its own: a rebuild is byte-identical."""
    again = pack(tmp_path / "again.tar.gz")
    assert again.path.read_bytes() == packed.path.read_bytes()


@pytest.mark.slow
def test_the_topology_s_requirements_are_packed_with_their_own(tmp_path):
    """A requirements file's names come with what they require (psycopg brings
    typing-extensions and its binary part through its extra)."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# the topology's own\npsycopg[binary]\n")
    packed = pack(tmp_path / "env.tar.gz", requirements=requirements)
    top = _top_level(packed.path)
    assert {"psycopg", "psycopg_binary", "tupletree"} <= top


@pytest.mark.slow
def test_extras_bring_their_clients(tmp_path):
    """`--extras redis,kafka`: the broker clients of those extras (with hiredis, asked
    by the redis extra as redis[hiredis]), and not the others'."""
    packed = pack(tmp_path / "env.tar.gz", extras=["redis", "kafka"])
    top = _top_level(packed.path)
    assert {"redis", "hiredis", "confluent_kafka", "tupletree"} <= top
    assert not {"pika", "nats", "psycopg"} & top


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("surely-not-installed-here>=1", "'surely-not-installed-here>=1', which is not installed"),
        ("pyzmq<1", "'pyzmq<1', but this Python has pyzmq"),
        ("--index-url https://example.org/simple", "is a pip option"),
    ],
)
def test_a_requirement_this_python_cannot_meet_is_refused_by_name(tmp_path, line, message):
    """No archive is written that executors would fail on an hour later."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{line}\n")
    with pytest.raises(PackError, match=message):
        pack(tmp_path / "env.tar.gz", requirements=requirements)
    assert not (tmp_path / "env.tar.gz").exists()


def test_an_unknown_extra_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(PackError, match=r"tupletree has no extra nope; its extras: .*dev"):
        pack(tmp_path / "env.tar.gz", extras=["nope"])


@pytest.mark.slow
def test_the_command_prints_the_options_that_ship_it(tmp_path, capsys):
    """`tupletree pack -o FILE` prints the --archives and spark.pyspark.python options
    (API.md's), and the driver's Python for client mode."""
    out = tmp_path / "env.tar.gz"
    assert cli.main(["pack", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert " ".join(submit_options(out)) in printed
    assert f"--archives {out}#environment --conf spark.pyspark.python=./environment/bin/python" in (
        printed
    )
    assert "spark.pyspark.driver.python=" in printed
    assert out.stat().st_size > 0
    assert cli.main(["pack", "-o", str(out), "--extras", "nope"]) == 1
    assert "tupletree pack: tupletree has no extra nope" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("", "-o wants a file name ending in .tar.gz, got ''"),
        (".", "is a directory: name the archive"),
        ("env.zip", "Spark unpacks archives by their suffix: name it env.tar.gz or env.tgz"),
        ("notes.txt", "Spark unpacks archives by their suffix"),
        ("missing/env.tar.gz", "there is no directory"),
        ("my env.tar.gz", "Spark would misread a path with a space in --archives"),
        ("a,b.tar.gz", "Spark would misread a path with ',' in --archives"),
        ("env#1.tar.gz", "Spark would misread a path with '#' in --archives"),
    ],
)
def test_an_output_that_would_not_do_is_refused_before_packing(
    tmp_path, monkeypatch, capsys, output, message
):
    """`pack -o` into a directory, an empty name, a name Spark would not unpack as a
    gzip tar, a directory that does not exist: one line naming it, nothing written (an
    existing file is left as it was; no directory is made)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    started = time.monotonic()
    assert cli.main(["pack", "-o", output]) == 1
    assert time.monotonic() - started < 2  # refused before reading a single file
    err = capsys.readouterr().err
    assert err.startswith("tupletree pack: ") and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_the_executors_python_must_be_an_absolute_path(tmp_path):
    with pytest.raises(PackError, match=r"--python wants the absolute path .* got 'python3'"):
        pack(tmp_path / "env.tar.gz", python="python3")
    assert not (tmp_path / "env.tar.gz").exists()


def test_an_output_directory_that_cannot_be_written_is_refused_before_packing(
    tmp_path, monkeypatch, capsys
):
    """`pack -o /proc/env.tar.gz`, or into a read-only mount: one line naming the
    directory and why, at once, not a FileNotFoundError traceback on a hidden
    `.env.tar.gz.partial-PID` after seconds of packing."""
    real_open = os.open

    def read_only(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    started = time.monotonic()
    assert cli.main(["pack", "-o", str(tmp_path / "env.tar.gz")]) == 1
    assert time.monotonic() - started < 2
    err = capsys.readouterr().err
    assert err == (
        f"tupletree pack: -o {tmp_path / 'env.tar.gz'}: cannot write in the directory "
        f"{tmp_path}: Read-only file system\n"
    ), err
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_midway_is_one_line_and_keeps_the_old_archive(
    tmp_path, monkeypatch, capsys
):
    """A disk that fills while packing: `tupletree pack` says so in one line naming
    the archive, exit 1; the archive of a previous pack is left as it was and no
    partial file remains."""
    out = tmp_path / "env.tar.gz"
    out.write_bytes(b"the previous archive")
    written = 0

    def fill_up(self, tarinfo, fileobj=None):
        nonlocal written
        written += 1
        if written > 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_addfile(self, tarinfo, fileobj)

    real_addfile = tarfile.TarFile.addfile
    monkeypatch.setattr(tarfile.TarFile, "addfile", fill_up)
    assert cli.main(["pack", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"tupletree pack: -o {out}: cannot write the archive: No space left on device\n"
    assert out.read_bytes() == b"the previous archive"
    assert [p.name for p in tmp_path.iterdir()] == ["env.tar.gz"]


def _fake_python(tmp_path: Path, body: str) -> str:
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.skipif(sys.platform == "win32", reason="a /bin/sh script as the interpreter")
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("echo 3.99", r"--python .*/bin/python3 is Python 3\.99, but the archive is for Python"),
        (
            "echo boom >&2; exit 3",
            r"--python .*/bin/python3 does not run as a Python here \(exit 3\): boom",
        ),
    ],
)
def test_a_python_of_another_version_is_refused_when_packing(tmp_path, body, message):
    """`pack --python PATH` whose interpreter is another X.Y than the packing Python's
    (whose lib/pythonX.Y and compiled extensions the archive holds): refused naming
    both versions, rather than an archive whose executors fail with PySpark's
    PYTHON_VERSION_MISMATCH (or a missing module) at submit. The path is asked when
    it exists here."""
    python = _fake_python(tmp_path, body)
    with pytest.raises(PackError, match=message):
        pack(tmp_path / "env.tar.gz", python=python)
    assert not (tmp_path / "env.tar.gz").exists()


def test_a_python_named_for_another_version_is_refused_without_running_it():
    """A path only the executor hosts have: its name, when it says X.Y, must say this
    Python's; `python3` or this very interpreter pass."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    other = "3.99" if here != "3.99" else "3.98"
    with pytest.raises(
        PackError, match=rf"is Python {other}, but the archive is for Python {here}"
    ):
        check_python(f"/opt/nowhere/bin/python{other}")
    check_python(f"/opt/nowhere/bin/python{here}")
    check_python("/opt/nowhere/bin/python3")
    check_python(sys.executable)


def test_the_printed_options_paste_into_a_shell_as_they_are(tmp_path):
    """The --archives option of `pack -o "it's/env.tar.gz"` is shell-quoted: pasted,
    the shell gives spark-submit the path pack wrote."""
    path = Path("/tmp/it's $HOME/env.tar.gz")
    text = describe(Packed(path, 1, [("tupletree", "0")], sys.executable, 0.1))
    line = text.splitlines()[3]
    assert shlex.split(line) == submit_options(path), line
