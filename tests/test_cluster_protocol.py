"""The ``Cluster`` protocol holds everything the web view (``ui/``) and the testing
helpers (``testing/``) call on a cluster, and both clusters implement all of it: so
neither needs a ``getattr`` probe or a ``type: ignore`` to reach a cluster, and a
method one cluster lacks is found here rather than by a user.

Read from the sources (ast): a call ``cluster.x(...)``, ``self.cluster.x``,
``service.cluster.x`` names ``x``; each must be a member of ``Cluster``. And mypy checks
both packages against the protocol's types: a metric read by a name the declared shape
lacks (``records/metrics.py``), or an error field a record lacks, fails there."""

from __future__ import annotations

import ast
import logging
import os
import re
import socket
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from tupletree import BasicBolt, LocalCluster, SparkCluster, TopologyBuilder
from tupletree.cluster import Cluster
from tupletree.errors import TopologyNotFoundError
from tupletree.runtime.error_log import MAX_ERROR_CHARS
from tupletree.testing import FeederSpout

SRC = Path(__file__).resolve().parents[1] / "src" / "tupletree"
USERS = sorted([*(SRC / "ui").rglob("*.py"), *(SRC / "testing").rglob("*.py")])


def protocol_members() -> set[str]:
    names = {n for n in vars(Cluster) if not n.startswith("_")}
    return names | set(Cluster.__annotations__)


def _is_cluster(node: ast.expr) -> bool:
    """``cluster`` or ``<anything>.cluster``."""
    if isinstance(node, ast.Name):
        return node.id == "cluster"
    return isinstance(node, ast.Attribute) and node.attr == "cluster"


def cluster_uses(path: Path) -> tuple[set[str], list[str]]:
    """(the attributes read on a cluster, the getattr probes of a cluster) in ``path``."""
    tree = ast.parse(path.read_text())
    used: set[str] = set()
    probes: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_cluster(node.value):
            used.add(node.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
            and _is_cluster(node.args[0])
        ):
            probes.append(f"{path.name}:{node.lineno}")
    return used, probes


def test_ui_and_testing_call_only_the_protocol_and_never_probe() -> None:
    members = protocol_members()
    outside: dict[str, list[str]] = {}
    probes: list[str] = []
    for path in USERS:
        used, found = cluster_uses(path)
        if used - members:
            outside[str(path.relative_to(SRC))] = sorted(used - members)
        probes += found
    assert outside == {}, f"add these to the Cluster protocol (cluster.py): {outside}"
    assert probes == []


def test_no_type_ignore_where_a_cluster_is_used() -> None:
    lines = [
        f"{path.relative_to(SRC)}:{number}"
        for path in USERS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore" in line and "cluster" in line
    ]
    assert lines == []


@pytest.mark.slow
def test_ui_and_testing_type_check_against_the_protocol(tmp_path: Path) -> None:
    """mypy over ui/ and testing/ (about 7 s, cold cache): what they read of metrics,
    error records and worker stats exists under that name and type."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install '.[dev]')")
    config = SRC.parents[1] / "pyproject.toml"
    options = ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache")]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *options, "tupletree/ui", "tupletree/testing"],
        cwd=SRC.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_sees_a_probe_and_a_call_outside_the_protocol(tmp_path: Path) -> None:
    """The reader above is not blind: it finds what it must refuse."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(service):\n"
        "    stats = getattr(service.cluster, 'worker_stats', None)\n"
        "    return service.cluster.rebalance_all(), stats\n"
    )
    used, probes = cluster_uses(bad)
    assert "rebalance_all" in used - protocol_members()
    assert probes == ["bad.py:2"]


@pytest.mark.parametrize("cls", [LocalCluster, SparkCluster])
def test_both_clusters_implement_every_member(cls: type) -> None:
    missing = sorted(m for m in protocol_members() - {"simulate_time"} if not hasattr(cls, m))
    assert missing == []


class Warns(BasicBolt):
    """Logs a warning for every tuple, and raises on "bad"."""

    outputs = ["x"]

    def execute(self, tup: Any, collector: Any) -> None:
        logging.getLogger("user.bolt").warning("saw %s", tup[0])
        if tup[0] == "bad":
            raise ValueError("cannot take bad")
        collector.emit([tup[0]])


def _warns(feeder: FeederSpout) -> Any:
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("warns", Warns()).shuffle_grouping("feed")
    return b.create_topology()


def test_local_cluster_answers_worker_stats_logs_and_records(sim_cluster: Any) -> None:
    """LocalCluster's one worker is this process; its logs are the WARNING records its
    components logged (not tupletree's own, not another thread's); a task's error is a
    record with its time, and its text as ever."""
    assert isinstance(sim_cluster, Cluster)
    feeder = FeederSpout(["w"])
    sim_cluster.submit_topology("t", {}, _warns(feeder))
    (stats,) = sim_cluster.worker_stats("t").values()
    assert (stats["pid"], stats["attempt"], stats["restarts"]) == (os.getpid(), 0, 0)
    assert stats["host"] == socket.gethostname()
    assert stats["rss_bytes"] is None or stats["rss_bytes"] > 1_000_000
    logging.getLogger("user.elsewhere").warning("not on the worker's thread")
    before = time.time()
    for word in ("good", "bad"):
        feeder.feed([word])
    assert sim_cluster.wait_idle()
    assert sim_cluster.logs("t") == [
        "WARNING: user.bolt: saw good",
        "WARNING: user.bolt: saw bad",
    ]
    (record,) = sim_cluster.error_records("t")
    assert (record.component, record.where, record.exception) == ("warns", "execute", "ValueError")
    assert record.message == "cannot take bad" and "raise ValueError" in record.traceback
    assert before <= record.time <= time.time()
    assert sim_cluster.errors("t") == [record.render()]
    assert sim_cluster.errors("t")[0].startswith("warns[task ")
    assert sim_cluster.worker_events("t") == []
    for method in (sim_cluster.worker_stats, sim_cluster.logs, sim_cluster.error_records):
        with pytest.raises(TopologyNotFoundError):
            method("nope")
    # A line is cut as an error's text is (the web view serves the newest 500).
    feeder.feed(["y" * 1_000_000])
    assert sim_cluster.wait_idle()
    last = sim_cluster.logs("t")[-1]
    assert last.startswith("WARNING: user.bolt: saw yyy") and len(last) < MAX_ERROR_CHARS + 100


def test_the_docs_page_example_runs() -> None:
    """docs/errors-and-metrics.md's example runs as written, in a module of its own."""
    page = SRC.parents[1] / "docs" / "errors-and-metrics.md"
    (block,) = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    module = types.ModuleType("errors_and_metrics_example")
    sys.modules[module.__name__] = module
    try:
        exec(compile(block, str(page), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
