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
    to_wall,
    where_lines,
)

T = 1_800_000_000.0  # an epoch second


def test_ready_counts_from_the_later_of_registration_and_submit():
    """An executor that registered after the submit counts from its registration (its
    archive is fetched then); one up before the submit counts from the submit."""
    execs = [Executor("0", "10.0.0.2", 1, T + 5.0), Executor("1", "10.0.0.3", 1, T - 60.0)]
    workers = [Placed(0, "10.0.0.2", "a", T + 7.5), Placed(1, "10.0.0.3", "b", T + 1.0)]
    assert ready_secs(workers, execs, submitted_at=T) == {"10.0.0.2": 2.5, "10.0.0.3": 1.0}


def test_ready_takes_each_host_s_first_worker_and_ignores_hosts_without_executors():
    """Two workers on one host: the first to register counts. A worker whose host is not
    an executor's (the driver's, on a local master) has no figure."""
    execs = [Executor("0", "10.0.0.2", 2, T)]
    workers = [
        Placed(0, "10.0.0.2", "a", T + 4.0),
        Placed(1, "10.0.0.2", "a", T + 3.0),
        Placed(2, "127.0.0.1", "vm", T + 1.0),
    ]
    assert ready_secs(workers, execs, submitted_at=T) == {"10.0.0.2": 3.0}


def test_ready_with_several_executors_on_a_host_counts_from_the_latest_before_it():
    """An executor added after the worker registered did not run it."""
    execs = [Executor("0", "h", 1, T), Executor("1", "h", 1, T + 2.0), Executor("2", "h", 1, T + 9)]
    assert ready_secs([Placed(0, "h", "h", T + 5.0)], execs, submitted_at=T - 1) == {"h": 3.0}


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
    workers = [Placed(0, "127.0.0.2", "vm", T + 2.0), Placed(1, "127.0.0.3", "vm", T + 2.5)]
    shipped = [Archive("file:///x/env.tar.gz#environment", "environment", 13 * 2**20)]
    lines = where_lines(workers, execs, shipped, submitted_at=T)
    assert lines == [
        "executors: 2 on 127.0.0.2 (1 core), 127.0.0.3 (1 core)",
        "workers: 0 on 127.0.0.2 (vm), 1 on 127.0.0.3 (vm)",
        "executors ready: 2.0 s on 127.0.0.2, 2.5 s on 127.0.0.3 (archive environment "
        "(env.tar.gz, 13.0 MB) fetched and unpacked, Python started)",
    ]
    # A local master: no executors listed, workers on the driver's address.
    local = where_lines([Placed(0, "127.0.0.1", "vm", T)], [], [], T)
    assert local == ["workers: 0 on 127.0.0.1 (vm)"]
    assert summary_line("spark://m:7077", workers) == (
        "ran on spark://m:7077: workers 0 on 127.0.0.2 (vm), 1 on 127.0.0.3 (vm)"
    )


def test_addresses_and_clocks():
    assert address_host("tcp://127.0.0.2:5555") == "127.0.0.2"
    assert address_host("tcp://[::1]:5555") == "::1"
    assert to_wall(90.0, now_wall=T, now_mono=100.0) == T - 10.0
