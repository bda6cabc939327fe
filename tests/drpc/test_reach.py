"""examples/reach.py: Storm's reach computation answers from its shipped data."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tupletree.drpc import LocalDRPC

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reach.py"


@pytest.fixture(scope="module")
def reach():
    """The example, imported under a name pickle can find its bolt classes by."""
    spec = importlib.util.spec_from_file_location("reach_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["reach_example"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["reach_example"]


def test_reach_values(reach, cluster, drpc: LocalDRPC):
    """Reach is the number of distinct followers of a URL's tweeters (Storm's data)."""
    cluster.submit_topology("reach", {}, reach.build().create_local_topology(drpc))
    assert drpc.execute("reach", "foo.com/blog/1") == "16"
    assert drpc.execute("reach", "engineering.twitter.com/blog/5") == "14"
    assert drpc.execute("reach", "tech.backtype.com/blog/123") == "7"
    assert drpc.execute("reach", "unknown.url/") == "0"
    urls = list(reach.TWEETERS_DB) * 20
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        got = list(pool.map(lambda u: drpc.execute("reach", u), urls))
    assert got == [str(reach.expected_reach(u)) for u in urls]
    assert cluster.errors("reach") == []


def test_reach_main(reach, capsys):
    """``python examples/reach.py`` prints the reach of a few URLs and exits 0."""
    assert reach.main() == 0
    out = capsys.readouterr().out
    assert "Reach of foo.com/blog/1: 16" in out
