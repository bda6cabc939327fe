"""What shipping the executors' environment costs on a Spark standalone cluster: the
archive's size, how long packing took, and how long the executors took to be ready.

    python bench/standalone.py                # tupletree pack's archive
    python bench/standalone.py --whole-venv   # every distribution of this venv (what
                                              # venv-pack of a development venv ships)

Starts a master and two 1-core workers on 127.0.0.2/.3 whose executors' own Python has
no tupletree (``tupletree.spark.standalone``), then submits the word count with the
spark-submit options ``tupletree pack`` prints (docs/spark-cluster.md), and prints the
run's banner lines: the session's start, the submit, and "executors ready" per host
(from the executor's registration or the submit, whichever is later, to its first
worker's registration: fetching and unpacking the archive, starting Python). The
executors' own log says when each fetched and unpacked the archive; those lines are
printed too.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def whole_venv(out: Path) -> tuple[int, float]:
    """Every installed distribution (pyspark and test tools included), venv's layout."""
    from tupletree.spark import pack

    started = time.monotonic()
    tupletree_source, _, _ = pack._tupletree()
    sources = [tupletree_source]
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name is None or name.lower() == "tupletree" or dist.files is None:
            continue
        try:
            sources.append(pack._Source(name, dist.version, pack._record_files(dist)))
        except pack.PackError:
            continue
    pack._write(out, sources, pack.base_python())
    return out.stat().st_size, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--whole-venv", action="store_true")
    args = parser.parse_args(argv)

    from tupletree.spark.errors import SparkUnavailableError
    from tupletree.spark.pack import driver_options, pack, submit_options
    from tupletree.spark.standalone import StandaloneCluster, spark_home

    where = Path(tempfile.mkdtemp(prefix="tupletree-bench-standalone-"))
    archive = where / "env.tar.gz"
    if args.whole_venv:
        size, secs = whole_venv(archive)
    else:
        packed = pack(archive)
        size, secs = packed.size, packed.seconds
    print(f"archive: {size / 2**20:.1f} MB, packed in {secs:.1f} s", flush=True)
    bare = where / "executor-venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(bare)], check=True)
    cluster = StandaloneCluster(
        workers=2, cores=1, executor_python=bare / "bin" / "python3", log_dir=where / "spark"
    )
    started = time.monotonic()
    try:
        cluster.start()
    except SparkUnavailableError as exc:
        print(f"skipped: {exc}")
        return 0
    try:
        print(f"cluster up in {time.monotonic() - started:.1f} s ({cluster.url})", flush=True)
        conf = [w for k, v in cluster.session_conf().items() for w in ("--conf", f"{k}={v}")]
        command = [
            str(spark_home() / "bin" / "spark-submit"),
            *("--master", cluster.url),
            *conf,
            *submit_options(archive),
            *driver_options(sys.executable),
            str(REPO / "src" / "tupletree" / "cli.py")
            if (REPO / "src" / "tupletree" / "cli.py").exists()
            else __import__("tupletree.cli").cli.__file__,
            *("run", str(REPO / "examples" / "word_count.py"), "--no-ui"),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        submitted = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        total = time.monotonic() - submitted
        for line in done.stdout.splitlines():
            if line.startswith(("tupletree:", "done:", "ran on")):
                print(line)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        print(f"spark-submit to exit: {total:.1f} s")
        for log in cluster.executor_logs()[:2]:
            times = {}
            for line in log.read_text(errors="replace").splitlines():
                for what in ("Starting executor ID", "Fetching spark://", "Unpacking an archive"):
                    if what in line and what not in times:
                        times[what] = line[:17]
                if "Got assigned task" in line:
                    times.setdefault("first task", line[:17])
            print(f"{log.parent.name}@{log.parents[2].name}: {times}")
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
