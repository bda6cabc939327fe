"""Trident in the web view: REST (``trident`` in the topology's answer), /metrics and the
page show each coordinator's current txid, its active batches with attempt and phase,
batches replayed, each committer's last committed txid, and a spout stuck on a batch
it cannot emit, with the txid and the partition."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tupletree import Config, Fields, LocalCluster
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.state import MemoryMapState
from tupletree.ui.views import trident_view

from ..registry import Box
from ..trident.support import RecordingFactory, SeqTransactional
from .support import get, text

API = "/api/v1/topology"


def test_trident_view_from_plain_metrics() -> None:
    metrics = {
        "__mastercoord-bg0": {
            "custom": {
                "trident": {
                    1: {
                        "kind": "coordinator",
                        "currentTxid": 4,
                        "lastCommittedTxid": 3,
                        "replayed": 2,
                        "active": [{"txid": 4, "attempt": 1, "phase": "PROCESSING"}],
                        "spouts": ["s"],
                    }
                }
            }
        },
        "b-0": {
            "custom": {
                "trident": {
                    2: {"kind": "bolt", "lastCommittedTxid": {"state-1": 3}, "stuck": {}},
                    3: {
                        "kind": "bolt",
                        "lastCommittedTxid": {},
                        "stuck": {"s": {"txid": 4, "partition": "p1", "error": "x"}},
                    },
                }
            }
        },
        "plain": {"custom": {}},
    }
    view = trident_view(metrics)
    assert view is not None
    (c,) = view["coordinators"]
    assert c["currentTxid"] == 4 and c["active"][0]["phase"] == "PROCESSING"
    assert view["committers"] == [
        {"component": "b-0", "task": 2, "state": "state-1", "lastCommittedTxid": 3}
    ]
    (stuck,) = view["stuck"]
    assert stuck["partition"] == "p1" and stuck["txid"] == 4 and stuck["task"] == 3
    assert trident_view({"plain": {"custom": {}}}) is None


def stuck_topology() -> tuple[Any, Box]:
    """The transactional spout of tests/trident/test_spouts.py: txid 3's first commit
    fails and partition p1 turns unreadable, so the replay cannot re-emit it."""
    box = Box()
    factory = RecordingFactory(
        MemoryMapState.Factory(), fail_begin={3}, on_fail=(box, {"unreadable": {"p1"}})
    )
    t = TridentTopology()
    t.new_stream("seq", SeqTransactional(box)).group_by(Fields("word")).persistent_aggregate(
        factory, Count(), Fields("count")
    )
    return t.build(), box


CONF = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100}


@pytest.fixture
def sim():
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        yield cluster


def test_rest_and_metrics_show_txids_phases_commits_and_the_stuck_batch(sim) -> None:
    built, box = stuck_topology()
    sim.submit_topology("tri", CONF, built)
    sim.advance_time(8)
    topo = get(f"{sim.ui_url}{API}/tri")
    t = topo["trident"]
    (coord,) = t["coordinators"]
    assert coord["currentTxid"] == 3 and coord["lastCommittedTxid"] == 2
    assert coord["replayed"] >= 2
    # Between two attempts the failed batch is not active; its attempts say it is tried.
    assert [(a["txid"], a["phase"]) for a in coord["active"]] in ([], [(3, "PROCESSING")])
    assert coord["attempts"]["3"] >= 2
    assert {c["lastCommittedTxid"] for c in t["committers"]} == {2}
    (stuck,) = t["stuck"]
    assert stuck["spout"] == "seq" and stuck["component"] == "seq"
    assert stuck["txid"] == 3 and stuck["partition"] == "p1"
    assert "unavailable" in stuck["error"]

    families = {f.name: f for f in text_string_to_metric_families(text(f"{sim.ui_url}/metrics"))}
    (current,) = families["tupletree_trident_current_txid"].samples
    assert current.value == 3 and current.labels["topology"] == "tri"
    phases = {
        s.labels["phase"]: s.value for s in families["tupletree_trident_active_batches"].samples
    }
    assert set(phases) == {"PROCESSING", "PROCESSED", "COMMITTING"} and sum(phases.values()) <= 1
    (replayed,) = families["tupletree_trident_replayed_batches"].samples
    assert replayed.value >= 2
    (stuck_sample,) = families["tupletree_trident_stuck_txid"].samples
    assert stuck_sample.labels["partition"] == "p1" and stuck_sample.value == 3
    committed = families["tupletree_trident_state_committed_txid"].samples
    assert {s.value for s in committed} == {2}

    box.get()["unreadable"] = set()  # readable again: it moves on, nothing stuck
    sim.advance_time(5)
    t = get(f"{sim.ui_url}{API}/tri")["trident"]
    assert t["stuck"] == [] and t["coordinators"][0]["currentTxid"] > 4


def test_a_plain_topology_has_no_trident_section(sim) -> None:
    from .support import CONF as PLAIN
    from .support import word_count

    sim.submit_topology("wc", PLAIN, word_count(limit=10))
    sim.wait_idle()
    assert "trident" not in get(f"{sim.ui_url}{API}/wc")


def test_the_page_shows_the_stuck_spout(sim) -> None:
    from .test_page import ARGS, CHROMIUM

    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    from pathlib import Path

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no {CHROMIUM}")
    built, _ = stuck_topology()
    sim.submit_topology("tri", CONF, built)
    sim.advance_time(8)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(sim.ui_url + "/")
        page.wait_for_selector("#trident-card:not([hidden])", timeout=30_000)
        page.wait_for_selector("#trident-stuck .stuck", timeout=30_000)
        stuck = page.inner_text("#trident-stuck")
        assert "STUCK" in stuck and "txid 3" in stuck and "partition p1" in stuck
        rows = page.inner_text("#trident-coordinators")
        assert "seq" in rows
        assert "state-1" in page.inner_text("#trident-committers")
        browser.close()
