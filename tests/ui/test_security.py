"""The web view under a hostile neighbour: rebound names on every bind, pages on other
local ports, a token for binds beyond loopback, secrets in the configuration, a
/metrics scrape storm, and options checked (NaN included)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import urllib.request

import pytest

from tupletree import LocalCluster
from tupletree.ui import client as ui_client
from tupletree.ui.scrape import ScrapeCache

from .support import CONF, call, word_count

API = "/api/v1/topology"
TOKEN = "ui-token-" + "u" * 30


@pytest.fixture
def sim():
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        yield cluster


def test_a_rebound_name_is_refused_on_a_wildcard_bind_too(caplog):
    """Bound to 0.0.0.0 (ui_host), a request naming evil.example in Host and Origin is
    refused: it read the API and deactivated a topology (the Host check was on for
    loopback binds only). The machine's own address still works."""
    caplog.set_level(logging.WARNING, logger="tupletree.ui")
    with LocalCluster(simulate_time=True, ui_port=0, ui_host="0.0.0.0") as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=10))
        port = cluster.ui_url.rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{port}"
        evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        status, body = call("GET", f"{url}{API}/summary", evil)
        assert status == 403 and "evil.example" in body["errorMessage"]
        status, _ = call("POST", f"{url}{API}/wc/deactivate", evil)
        assert status == 403
        assert cluster.topology_info("wc")["active"]
        assert call("GET", f"{url}{API}/summary")[0] == 200
    assert "without a token" in caplog.text and "docs/security.md" in caplog.text


def test_names_that_merely_start_like_localhost_are_refused(sim):
    """``Host: localhost.attacker.example`` is not localhost (the audit's surviving
    mutant accepted it)."""
    port = sim.ui_url.rsplit(":", 1)[1]
    for host in (f"localhost.attacker.example:{port}", "localhost.attacker.example"):
        status, body = call("GET", f"{sim.ui_url}{API}/summary", {"Host": host})
        assert status == 403 and "localhost.attacker.example" in body["errorMessage"]
    assert call("GET", f"{sim.ui_url}{API}/summary", {"Host": f"localhost:{port}"})[0] == 200


def test_a_page_on_another_local_port_may_neither_steer_nor_read(sim):
    """A page served by another program on this host (another port) is another origin:
    its POST is refused (the audit's surviving mutant let it deactivate the topology),
    and so is its read."""
    sim.submit_topology("wc", CONF, word_count(limit=10))
    port = int(sim.ui_url.rsplit(":", 1)[1])
    other = {"Origin": f"http://127.0.0.1:{port + 1}"}
    status, body = call("POST", f"{sim.ui_url}{API}/wc/deactivate", other)
    assert status == 403 and f"127.0.0.1:{port + 1}" in body["errorMessage"]
    assert call("GET", f"{sim.ui_url}{API}/wc", other)[0] == 403
    assert call("GET", f"{sim.ui_url}{API}/wc", {"Sec-Fetch-Site": "same-site"})[0] == 403
    assert sim.topology_info("wc")["active"]
    assert call("POST", f"{sim.ui_url}{API}/wc/deactivate", {"Origin": sim.ui_url})[0] == 200


def test_with_a_token_every_call_but_the_page_files_needs_it(monkeypatch, capsys):
    """401 (with WWW-Authenticate) without the token or with another; the page's own
    files load without it (they hold no data); the client and the CLI send it from
    TUPLETREE_UI_TOKEN."""
    from tupletree import cli

    with LocalCluster(simulate_time=True, ui_port=0, ui_options={"token": TOKEN}) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=10))
        url = cluster.ui_url
        for path in (f"{API}/summary", f"{API}/wc", "/metrics", "/api/v1/openapi.json"):
            for headers in ({}, {"Authorization": "Bearer " + "w" * 40}, {"Authorization": TOKEN}):
                status, body = call("GET", url + path, headers)
                assert status == 401, (path, headers)
                assert "TUPLETREE_UI_TOKEN" in body["errorMessage"]
        status, _ = call("POST", f"{url}{API}/wc/deactivate")
        assert status == 401 and cluster.topology_info("wc")["active"]
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert call("GET", f"{url}{API}/summary", auth)[0] == 200
        assert _status(url + "/metrics", auth) == 200
        for path in ("/", "/static/app.js", "/static/style.css"):
            assert _status(url + path, {}) == 200
        request = urllib.request.Request(url + f"{API}/summary")
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            assert exc.headers["WWW-Authenticate"].startswith("Bearer")
        address = url.removeprefix("http://")
        monkeypatch.delenv("TUPLETREE_UI_TOKEN", raising=False)
        assert cli.main(["list", "--ui", address]) == 1
        assert "set TUPLETREE_UI_TOKEN" in capsys.readouterr().err
        monkeypatch.setenv("TUPLETREE_UI_TOKEN", TOKEN)
        assert cli.main(["list", "--ui", address]) == 0
        assert "wc" in capsys.readouterr().out
        assert ui_client.UIClient(address, TOKEN).topologies()[0]["name"] == "wc"


def _status(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_secrets_in_the_configuration_are_shown_masked():
    """Config values under a secret's name (the DRPC token a cluster gives its
    topologies, a password) are shown as *** in the topology's configuration."""
    with LocalCluster(simulate_time=True, ui_port=0, drpc_port=0) as cluster:
        conf = {**CONF, "my.redis.password": "hunter2-hunter2"}
        cluster.submit_topology("wc", conf, word_count(limit=10))
        token = cluster.topology_info("wc")["conf"]["drpc.invocations.token"]
        with urllib.request.urlopen(f"{cluster.ui_url}{API}/wc", timeout=30) as r:
            text = r.read().decode()
        assert token not in text and "hunter2" not in text
        _, page = call("GET", f"{cluster.ui_url}{API}/wc")
        assert page["configuration"]["drpc.invocations.token"] == "***"
        assert page["configuration"]["my.redis.password"] == "***"
        assert page["configuration"]["topology.max.spout.pending"] == 200


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"token": "short"}, "token must have 16 to 512 characters, got one of 5"),
        ({"allowed_hosts": "dashboard.example"}, "must be a list of host names"),
        ({"max_connections": math.nan}, "max_connections must be an integer"),
        ({"max_connections": 0}, "max_connections must be from 1"),
        ({"header_timeout": math.nan}, "header_timeout must be a number of seconds > 0"),
        ({"idle_timeout": math.inf}, "idle_timeout"),
        ({"sample_secs": math.nan}, "sample_secs must be a number of seconds > 0"),
        ({"max_points": 1}, "max_points must be from 2"),
        ({"tokken": TOKEN}, "unknown option(s) 'tokken'"),
    ],
)
def test_bad_options_are_refused_naming_them(options, message):
    """Every option is checked, NaN included (a NaN sample period made the sampler spin
    without pause)."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LocalCluster(ui_port=0, ui_options=options)


def test_a_scrape_storm_reads_the_cluster_at_most_once_a_second():
    """/metrics answers from a scrape at most a second old: a client scraping in a tight
    loop (which cut the topology's throughput to 0.32x) makes the cluster's metrics be
    read once a second, not once per scrape (besides the sampler's read each second)."""
    with LocalCluster(ui_port=0) as cluster:
        cluster.submit_topology("wc", CONF, word_count())
        reads = 0
        real = cluster.metrics

        def counted(name):
            nonlocal reads
            reads += 1
            return real(name)

        cluster.metrics = counted  # what the collector calls at each scrape
        started = time.monotonic()
        for _ in range(40):
            assert _status(cluster.ui_url + "/metrics", {}) == 200
        elapsed = time.monotonic() - started
        assert 1 <= reads <= 2 * (int(elapsed) + 1), (reads, elapsed)


def test_the_scrape_cache_reuses_its_body_for_a_second_and_makes_one_at_a_time():
    """ScrapeCache with a hand-driven clock: the same body within ttl, a new one after;
    scrapes arriving while one is being made wait for it instead of making their own."""
    now = [0.0]
    made = []

    def make() -> bytes:
        made.append(now[0])
        time.sleep(0.05)  # rendering takes a while: the others arrive meanwhile
        return f"body {len(made)}".encode()

    cache = ScrapeCache(make, ttl=1.0, clock=lambda: now[0])

    async def scrapes() -> list[bytes]:
        first = await asyncio.gather(*(cache.get() for _ in range(20)))
        now[0] = 0.99
        again = await cache.get()
        now[0] = 1.0
        later = await cache.get()
        return [*first, again, later]

    bodies = asyncio.run(scrapes())
    assert bodies[:21] == [b"body 1"] * 21 and bodies[21] == b"body 2"
    assert made == [0.0, 1.0] and cache.made == 2
    with pytest.raises(ValueError, match="ttl must be a number of seconds > 0"):
        ScrapeCache(make, ttl=math.nan)
