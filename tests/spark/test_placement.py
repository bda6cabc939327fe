"""spark/placement.py: the run's lines on executors, workers and readiness, from plain
values (tests/spark/test_standalone.py sees them on a real cluster)."""

from __future__ import annotations

from tupletree.spark.placement import (
    Archive,
    Executor,
    Placed,
    address_host,
    describe_archives,
    parse_archives,
    ready_secs,
    summary_line,
    where_lines,
)

T = 1_800_000_000.0  # an epoch second


def test_ready_counts_from_the_later_of_the_last_executor_and_the_submit():
    """Executors registered after the submit: from the last of them (its archive is
    fetched then); executors up before the submit: from the submit."""
    workers = [Placed(0, "10.0.0.2", "a"), Placed(1, "10.0.0.3", "b")]
    late = [Executor("0", "10.0.0.2", 1, T + 5.0), Executor("1", "10.0.0.3", 1, T + 6.0)]
    assert ready_secs(workers, late, submitted_at=T, ready_at=T + 8.5) == 2.5
    early = [Executor("0", "10.0.0.2", 1, T - 60), Executor("1", "10.0.0.3", 1, T - 50)]
    assert ready_secs(workers, early, submitted_at=T, ready_at=T + 1.5) == 1.5


def test_ready_ignores_executors_that_run_no_worker_or_came_after():
    """An executor on a host without a worker, or one added after every worker was
    ready, ran none of them; a local master's workers (on the driver's address) get no
    figure."""
    workers = [Placed(0, "10.0.0.2", "a")]
    execs = [
        Executor("0", "10.0.0.2", 1, T + 1.0),
        Executor("1", "10.0.0.9", 1, T + 4.0),  # no worker there
        Executor("2", "10.0.0.2", 1, T + 9.0),  # after the workers were ready
    ]
    assert ready_secs(workers, execs, submitted_at=T, ready_at=T + 3.0) == 2.0
    assert ready_secs([Placed(0, "127.0.0.1", "vm")], execs, T, T + 3.0) is None


def test_archives_are_read_with_their_local_size(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"x" * 2048)
    parsed = parse_archives(f"file://{archive}#environment, hdfs:///envs/other.tgz")
    assert parsed == [
        Archive(f"file://{archive}#environment", "environment", 2048),
        Archive("hdfs:///envs/other.tgz", "other.tgz", None),
    ]
    assert parse_archives(None) == [] and parse_archives("") == []
    assert describe_archives(parsed) == "environment (env.tar.gz, 0.0 MB), other.tgz (other.tgz)"


def test_the_lines_name_executors_workers_and_readiness():
    execs = [Executor("0", "127.0.0.2", 1, T), Executor("1", "127.0.0.3", 1, T)]
    workers = [Placed(0, "127.0.0.2", "vm"), Placed(1, "127.0.0.3", "vm")]
    shipped = [Archive("file:///x/env.tar.gz#environment", "environment", 13 * 2**20)]
    lines = where_lines(workers, execs, shipped, submitted_at=T, ready_at=T + 2.5)
    assert lines == [
        "executors: 2 on 127.0.0.2 (1 core), 127.0.0.3 (1 core)",
        "workers: 0 on 127.0.0.2 (vm), 1 on 127.0.0.3 (vm)",
        "executors ready in 2.5 s (archive environment (env.tar.gz, 13.0 MB) fetched and "
        "unpacked, Python started)",
    ]
    # A local master: no executors listed, workers on the driver's address.
    local = where_lines([Placed(0, "127.0.0.1", "vm")], [], [], T, T + 1)
    assert local == ["workers: 0 on 127.0.0.1 (vm)"]
    assert summary_line("spark://m:7077", workers) == (
        "ran on spark://m:7077: workers 0 on 127.0.0.2 (vm), 1 on 127.0.0.3 (vm)"
    )


def test_addresses_and_clocks():
    assert address_host("tcp://127.0.0.2:5555") == "127.0.0.2"
    assert address_host("tcp://[::1]:5555") == "::1"
