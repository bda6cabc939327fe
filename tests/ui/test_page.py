"""The page at / in a real headless browser (Debian's chromium, driven by Playwright):
it loads, draws the running word count, its numbers move, its buttons steer.

Set TUPLETREE_UI_SCREENSHOT=path.png to keep the screenshot, taken after a minute of
charting (docs/ui.png was made so); it is always saved under the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tupletree import LocalCluster
from tupletree.cluster import RESTART, WorkerEvent

from .support import CONF, eventually, never_acked, word_count

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no {CHROMIUM}: apt-get install -y chromium (as .ci/run does)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


class _RestartedOnce(LocalCluster):
    """A LocalCluster whose worker reports one restart (as a SparkCluster worker would)."""

    def worker_events(self, name: str) -> list[WorkerEvent]:
        restart = WorkerEvent(RESTART, "restarted (restart 1): attempt 0 ended", 0.0, 0, 0)
        return [*super().worker_events(name), restart]


def _cell(page, component: str, column: str) -> str:
    return page.inner_text(f"tr.component[data-id={component}] td.{column}")


def test_page_shows_the_word_count_live_and_its_buttons_steer(browser, tmp_path):
    """The graph and the table show the word count's components; the spout's emitted
    count moves while tuples flow; a task view opens; Deactivate turns the topology
    inactive in the cluster; Kill (confirmed) removes it. Errors are drawn from their
    records (where, when), a worker's restart apart from them."""
    with _RestartedOnce(ui_port=0) as cluster:
        cluster.submit_topology("word-count", CONF, word_count(fail_every=500))
        page = browser.new_page(viewport={"width": 1440, "height": 1150})
        page.goto(cluster.ui_url + "/")
        for cid in ("sentences", "split", "count"):
            page.wait_for_selector(f"#graph g.node[data-id={cid}]", timeout=30_000)
            page.wait_for_selector(f"tr.component[data-id={cid}]", timeout=30_000)
        assert page.inner_text("#name") == "word-count"
        assert page.inner_text("#status") == "ACTIVE"
        assert page.locator("#graph g.edge").count() == 2

        first = _cell(page, "sentences", "emitted")
        eventually(lambda: _cell(page, "sentences", "emitted") != first, 30, "emitted to move")
        eventually(lambda: page.locator("#chart #acked-line").count() == 1, 30, "the acked line")
        eventually(lambda: "unlucky" in page.inner_text("#errors"), 60, "an error listed")
        newest = page.inner_text("#errors details summary >> nth=0")
        assert " s ago count[task " in newest and "] execute: " in newest, newest
        page.wait_for_selector("#events-card:not([hidden])", timeout=30_000)
        assert "worker 0 restarted (restart 1)" in page.inner_text("#events")
        page.click("tr.component[data-id=split]")
        page.wait_for_selector("tr.task", timeout=30_000)
        assert page.locator("tr.task").count() == 2  # split's two tasks
        keep = os.environ.get("TUPLETREE_UI_SCREENSHOT")
        # A few samples on the chart; a screenshot kept for the docs gets a minute of them.
        page.wait_for_timeout(60_000 if keep else 1500)
        shot = tmp_path / "ui.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        if keep:
            shutil.copy(shot, keep)

        page.click("#deactivate")
        page.wait_for_function(
            "document.getElementById('status').textContent === 'INACTIVE'", timeout=30_000
        )
        eventually(lambda: not cluster.topology_info("word-count")["active"], 30, "inactive")
        assert page.is_disabled("#deactivate") and page.is_enabled("#activate")

        page.on("dialog", lambda dialog: dialog.accept())
        page.click("#kill")
        eventually(lambda: cluster.topologies() == [], 30, "the kill")
        page.wait_for_selector("#empty:not([hidden])", timeout=30_000)

        cluster.submit_topology("stuck", {"topology.message.timeout.secs": 1}, never_acked(3))
        page.wait_for_selector("#stalls-card:not([hidden])", timeout=30_000)
        eventually(lambda: "hold[task" in page.inner_text("#stalls"), 60, "the stalled trees")
        assert "src[task" in page.inner_text("#stalls")


@pytest.mark.parametrize("fragment", ["%E0%A4%A", "word%2Dcount"])
def test_a_link_with_a_malformed_hash_still_updates(browser, fragment):
    """A link whose #hash is not a valid escape (cut short, a stray %): the page shows
    the running topology and keeps updating; a valid escape names its topology."""
    with LocalCluster(ui_port=0) as cluster:
        cluster.submit_topology("other", CONF, word_count())
        cluster.submit_topology("word-count", CONF, word_count())
        page = browser.new_page()
        page.goto(f"{cluster.ui_url}/#{fragment}")
        page.wait_for_selector("#graph g.node[data-id=sentences]", timeout=30_000)
        expected = "word-count" if fragment == "word%2Dcount" else "other"
        assert page.inner_text("#name") == expected
        first = _cell(page, "sentences", "emitted")
        eventually(lambda: _cell(page, "sentences", "emitted") != first, 30, "emitted to move")
        assert page.inner_text("#live") == "live"


def test_the_page_opened_with_its_token_reads_and_steers(browser):
    """A web view with a token: the page opened as /#token=... shows the topology (its
    calls carry the token), drops the token from the address bar, and its Deactivate
    button steers; opened without the token it shows no topology."""
    token = "page-token-" + "p" * 30
    with LocalCluster(ui_port=0, ui_options={"token": token}) as cluster:
        cluster.submit_topology("word-count", CONF, word_count())
        page = browser.new_page()
        page.goto(cluster.ui_url + "/")
        page.wait_for_timeout(1500)
        assert page.locator("tr.component").count() == 0  # 401s: nothing to draw
        page = browser.new_page()
        page.goto(f"{cluster.ui_url}/#token={token}")
        page.wait_for_selector("tr.component[data-id=sentences]", timeout=30_000)
        assert token not in page.url
        page.click("#deactivate")
        eventually(lambda: not cluster.topology_info("word-count")["active"], 30, "inactive")
