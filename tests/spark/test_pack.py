"""`tupletree pack`: the archive it writes is a Python environment on which a bare
interpreter imports tupletree and its runtime dependencies, without pyspark or the test
tools (tests/spark/test_standalone.py runs Spark's executors on it)."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from tupletree import cli
from tupletree.spark.pack import PackError, pack, submit_options

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
