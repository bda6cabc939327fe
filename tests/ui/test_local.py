"""The web service on LocalCluster: REST answers, steering, /metrics, the CLI."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tupletree import Config, LocalCluster
from tupletree.ui import client as ui_client

from .support import CONF, call, eventually, get, never_acked, text, word_count

API = "/api/v1/topology"


@pytest.fixture
def sim():
    with LocalCluster(simulate_time=True, ui_port=0) as cluster:
        yield cluster


@pytest.fixture
def live():
    with LocalCluster(ui_port=0) as cluster:
        yield cluster


def test_no_service_without_ui_port():
    """ui_port=None (the default) serves nothing: ui_url is None."""
    with LocalCluster() as cluster:
        assert cluster.ui_url is None


def test_serves_on_loopback(sim):
    """The service binds 127.0.0.1 unless told otherwise, on the free port it picked."""
    assert sim.ui_url.startswith("http://127.0.0.1:")
    assert not sim.ui_url.endswith(":0")


def test_rest_answers_agree_with_cluster_metrics(sim):
    """Summary, topology and component answers carry the figures of cluster.metrics, under
    Storm UI's names; a bolt's exception shows as an error with its traceback."""
    sim.submit_topology("wc", CONF, word_count(limit=300, fail_every=7))
    sim.wait_idle()
    m = sim.metrics("wc")
    url = sim.ui_url
    (entry,) = get(f"{url}{API}/summary")["topologies"]
    assert entry["id"] == entry["name"] == "wc" and entry["status"] == "ACTIVE"
    assert entry["acked"] == m["sentences"]["acked"] and entry["failed"] == m["sentences"]["failed"]
    assert entry["failed"] > 0  # the unlucky moons failed their trees
    assert entry["tasksTotal"] == sum(len(c["tasks"]) for c in m.values())

    topo = get(f"{url}{API}/wc")
    (spout,) = topo["spouts"]
    assert spout["spoutId"] == "sentences"
    for key, name in (("emitted", "emitted"), ("acked", "acked"), ("failed", "failed")):
        assert spout[key] == m["sentences"][name]
    assert spout["completeLatency"] == pytest.approx(
        m["sentences"]["complete_latency_ms"], abs=1e-3
    )
    assert spout["pending"] == m["sentences"]["pending"] == 0
    bolts = {b["boltId"]: b for b in topo["bolts"]}
    assert set(bolts) == {"split", "count"}
    for cid, bolt in bolts.items():
        for key in ("emitted", "transferred", "executed", "acked", "failed"):
            assert bolt[key] == m[cid][key], (cid, key)
        assert bolt["executeLatency"] == pytest.approx(m[cid]["execute_latency_ms"], abs=1e-4)
        assert bolt["processLatency"] == bolt["executeLatency"]  # BasicBolts ack at once
        assert 0.0 <= bolt["capacity"] <= 1.0
    assert bolts["count"]["failed"] > 0 and "unlucky" in bolts["count"]["lastError"]
    assert topo["ackers"]["executed"] == m["__acker"]["executed"]
    assert topo["msgTimeout"] == 30
    edges = {(e["source"], e["target"]): e for e in topo["graph"]["edges"]}
    assert edges[("split", "count")]["grouping"] == "fields(word)"
    assert edges[("sentences", "split")]["grouping"] == "shuffle"

    comp = get(f"{url}{API}/wc/component/count")
    assert comp["componentType"] == "bolt" and comp["topologyId"] == "wc"
    per_task = {s["taskId"]: s for s in comp["executorStats"]}
    assert set(per_task) == set(m["count"]["tasks"])
    for task, stats in per_task.items():
        assert stats["executed"] == m["count"]["tasks"][task]["executed"]
        assert stats["failed"] == m["count"]["tasks"][task]["failed"]
        # Storm's executorStats name where the task runs: LocalCluster's one worker,
        # this process (no port of its own).
        assert (stats["worker"], stats["host"], stats["port"]) == (0, socket.gethostname(), None)
    (err, *_) = comp["componentErrors"]
    assert "unlucky" in err["error"] and err["where"] == "execute"
    assert "ValueError" in err["traceback"] and "Traceback" in err["traceback"]
    spout_comp = get(f"{url}{API}/wc/component/sentences")
    assert spout_comp["componentType"] == "spout"
    assert spout_comp["executorStats"][0]["acked"] == m["sentences"]["acked"]


def test_an_error_in_rest_is_its_record_with_its_time_and_a_log_link(sim):
    """A task's error reaches REST field by field from cluster.error_records, with Storm
    UI's errorTime (epoch s) and errorLapsedSecs; its log link serves cluster.logs; the
    one worker of a LocalCluster is this process."""
    before = time.time()
    sim.submit_topology("wc", CONF, word_count(limit=30, fail_every=3))
    sim.wait_idle()
    after = time.time()
    records = sim.error_records("wc")
    assert records, "the unlucky moons raised"
    topo = get(f"{sim.ui_url}{API}/wc")
    newest, record = topo["errors"][-1], records[-1]
    assert (newest["component"], newest["task"], newest["where"]) == (
        record.component,
        record.task,
        record.where,
    )
    assert newest["error"] == f"ValueError: {record.message}" and "unlucky" in newest["error"]
    assert newest["traceback"] == record.traceback and newest["worker"] is None
    assert int(before) <= newest["errorTime"] <= after
    assert 0 <= newest["errorLapsedSecs"] <= time.time() - before + 1
    assert topo["workerEvents"] == []
    logs = get(sim.ui_url + newest["errorWorkerLogLink"])
    assert logs == {"topologyId": "wc", "total": len(sim.logs("wc")), "logs": sim.logs("wc")}
    (worker,) = topo["workers"]
    assert (worker["index"], worker["pid"], worker["restarts"]) == (0, os.getpid(), 0)
    comp = get(f"{sim.ui_url}{API}/wc/component/count")
    assert comp["componentErrors"][-1]["errorTime"] == newest["errorTime"]
    status, body = call("GET", f"{sim.ui_url}{API}/nope/logs")
    assert status == 404 and "nope" in body["errorMessage"]


def test_errors_are_json_with_a_status(sim):
    """Unknown topology or component: 404; bad wait: 400; unknown path: 404; wrong
    method: 405; all as JSON naming what is wrong."""
    sim.submit_topology("wc", CONF, word_count(limit=10))
    url = sim.ui_url
    for method, path in (
        ("GET", f"{API}/nope"),
        ("GET", f"{API}/nope/component/split"),
        ("GET", f"{API}/nope/history"),
        ("POST", f"{API}/nope/activate"),
        ("POST", f"{API}/nope/deactivate"),
        ("POST", f"{API}/nope/kill/0"),
    ):
        status, body = call(method, url + path)
        assert status == 404, path
        assert "nope" in body["errorMessage"] and body["error"] == "Not Found"
    status, body = call("GET", f"{url}{API}/wc/component/nope")
    assert status == 404 and "nope" in body["errorMessage"]
    for wait in ("-1", "abc", "nan", "1e9"):
        status, body = call("POST", f"{url}{API}/wc/kill/{wait}")
        assert status == 400 and "wait_secs" in body["errorMessage"], wait
    assert sim.topologies() == ["wc"]  # none of those killed it
    assert call("GET", f"{url}/api/v1/nothing")[0] == 404
    assert call("POST", f"{url}{API}/summary")[0] == 405


def test_other_sites_cannot_steer_or_read(sim):
    """A POST from a page of another origin is refused (403), and so is a request naming a
    non-loopback Host (DNS rebinding); the topology stays active."""
    sim.submit_topology("wc", CONF, word_count(limit=10))
    url = sim.ui_url
    status, body = call("POST", f"{url}{API}/wc/deactivate", {"Origin": "http://evil.example"})
    assert status == 403 and "evil.example" in body["errorMessage"]
    status, _ = call("GET", f"{url}{API}/summary", {"Host": "evil.example"})
    assert status == 403
    assert sim.topology_info("wc")["active"]
    same_origin = {"Origin": url}
    assert call("POST", f"{url}{API}/wc/deactivate", same_origin)[0] == 200


def _emitted(cluster: LocalCluster) -> int:
    return cluster.metrics("wc")["sentences"]["emitted"]


def test_deactivate_stops_the_spouts_and_activate_resumes_them(live):
    """POST deactivate: the status turns INACTIVE and the spout emits nothing more;
    POST activate: ACTIVE again and it emits again."""
    live.submit_topology("wc", CONF, word_count())
    url = live.ui_url
    eventually(lambda: _emitted(live) > 100, what="the spout to emit")
    status, body = call("POST", f"{url}{API}/wc/deactivate")
    assert status == 200
    assert body == {"topologyOperation": "deactivate", "topologyId": "wc", "status": "success"}
    eventually(lambda: get(f"{url}{API}/wc")["status"] == "INACTIVE", what="INACTIVE")
    assert live.wait_idle(60)
    stopped = _emitted(live)
    # Idle again: rounds in which the (endless) spout emitted nothing, so it is not
    # polled; a spout still polled would keep wait_idle from returning True.
    assert live.wait_idle(60)
    assert _emitted(live) == stopped
    assert get(f"{url}{API}/wc")["spouts"][0]["emitted"] == stopped

    status, body = call("POST", f"{url}{API}/wc/activate")
    assert status == 200 and body["topologyOperation"] == "activate"
    eventually(lambda: _emitted(live) > stopped + 100, what="the spout to emit again")
    eventually(lambda: get(f"{url}{API}/wc")["status"] == "ACTIVE", what="ACTIVE")


def test_kill_removes_the_topology(live):
    """kill/0 removes it before answering; kill/<secs> deactivates at once and removes it
    after the wait."""
    live.submit_topology("wc", CONF, word_count())
    live.submit_topology("other", CONF, word_count())
    url = live.ui_url
    status, body = call("POST", f"{url}{API}/wc/kill/0")
    assert status == 200
    assert body == {"topologyOperation": "kill", "topologyId": "wc", "status": "success"}
    assert live.topologies() == ["other"]
    assert [t["name"] for t in get(f"{url}{API}/summary")["topologies"]] == ["other"]
    assert call("GET", f"{url}{API}/wc")[0] == 404

    assert call("POST", f"{url}{API}/other/kill/0.5")[0] == 200
    eventually(lambda: not live.topology_info("other")["active"] or not live.topologies())
    eventually(lambda: get(f"{url}{API}/summary")["topologies"] == [], what="the delayed kill")
    assert live.topologies() == []


def _families(url: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text(url + "/metrics"))}


def _value(family: Any, suffix: str = "", **labels: str) -> float:
    (sample,) = [
        s
        for s in family.samples
        if s.name == family.name + suffix and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return sample.value


def test_metrics_parse_with_prometheus_own_parser_and_match(sim):
    """/metrics parses with prometheus_client's text parser; counters end _total, every
    name starts tupletree_, labels are topology/component/task (no message ids), and the
    values are cluster.metrics' per task, failed trees split by reason."""
    sim.submit_topology("wc", CONF, word_count(limit=300, fail_every=7))
    sim.submit_topology("stuck", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5}, never_acked(20))
    sim.wait_idle()
    sim.advance_time(12)
    fams = _families(sim.ui_url)
    assert all(name.startswith("tupletree_") for name in fams)
    allowed = {"topology", "component", "task", "reason", "le", "worker", "host"}
    for fam in fams.values():
        for s in fam.samples:
            assert set(s.labels) <= allowed, (s.name, s.labels)
            if fam.type == "counter":
                assert s.name.endswith(("_total", "_created")), s.name

    m = sim.metrics("wc")
    for cid, entry in m.items():
        for task, t in entry["tasks"].items():
            lab = {"topology": "wc", "component": cid, "task": str(task)}
            for fam, key in (
                ("tupletree_tuples_emitted", "emitted"),
                ("tupletree_tuples_transferred", "transferred"),
                ("tupletree_tuples_executed", "executed"),
                ("tupletree_tuples_acked", "acked"),
                ("tupletree_task_errors", "errors"),
            ):
                assert _value(fams[fam], "_total", **lab) == t[key], (fam, cid, task)
            failed = fams["tupletree_tuples_failed"]
            explicit = _value(failed, "_total", reason="explicit", **lab)
            timeout = _value(failed, "_total", reason="timeout", **lab)
            assert explicit + timeout == t["failed"]
            assert _value(fams["tupletree_queue_depth"], **lab) == t["queued"]
    spout = {"topology": "wc", "component": "sentences", "task": str(*m["sentences"]["tasks"])}
    hist = fams["tupletree_complete_latency_seconds"]
    assert _value(hist, "_count", **spout) == m["sentences"]["acked"]
    assert _value(hist, "_bucket", le="+Inf", **spout) == m["sentences"]["acked"]
    assert _value(fams["tupletree_spout_pending"], **spout) == 0
    bolt = {"topology": "wc", "component": "count"}
    counts = [
        s
        for s in fams["tupletree_execute_latency_seconds"].samples
        if s.name.endswith("_count") and all(s.labels.get(k) == v for k, v in bolt.items())
    ]
    assert sum(s.value for s in counts) == m["count"]["executed"]
    explicit = _value(fams["tupletree_tuples_failed"], "_total", reason="explicit", **spout)
    assert explicit == m["sentences"]["failed"] > 0  # the unlucky moons: no timeouts here

    stuck = sim.metrics("stuck")
    src = {"topology": "stuck", "component": "src", "task": str(*stuck["src"]["tasks"])}
    assert stuck["src"]["timed_out"] == 20
    assert _value(fams["tupletree_tuples_failed"], "_total", reason="timeout", **src) == 20
    assert _value(fams["tupletree_tuples_failed"], "_total", reason="explicit", **src) == 0
    acker = {"topology": "stuck", "component": "__acker"}
    pending = [
        s for s in fams["tupletree_acker_pending_trees"].samples if s.labels["topology"] == "stuck"
    ]
    assert pending and all(s.labels["component"] == acker["component"] for s in pending)
    assert _value(fams["tupletree_topology_active"], topology="stuck") == 1.0


def test_rates_capacity_and_timeline_while_tuples_flow(live):
    """While tuples flow the sampler's history gives rates, capacity and a timeline of
    acked trees per second; the edges carry rates."""
    live.submit_topology("wc", CONF, word_count())
    url = live.ui_url

    def flowing() -> Any:
        topo = get(f"{url}{API}/wc")
        bolts = {b["boltId"]: b for b in topo["bolts"]}
        return (
            bolts["split"]["rates"].get("executed", 0) > 0
            and bolts["split"]["capacity"] > 0
            and all(e["rate"] for e in topo["graph"]["edges"])
            and topo
        )

    topo = eventually(flowing, what="rates")
    assert all(e["exact"] for e in topo["graph"]["edges"])
    history = eventually(
        lambda: (
            (h := get(f"{url}{API}/wc/history"))["timeline"]
            and any(p["acked"] > 0 for p in h["timeline"])
            and h
        ),
        what="a timeline",
    )
    point = history["timeline"][-1]
    assert set(point) == {"t", "acked", "failed", "completeLatencyMs"}


# -- the CLI -----------------------------------------------------------------------------


def test_cli_list_stats_deactivate_activate_kill(live, capsys):
    """The storm-like commands, against the running cluster's service (--ui)."""
    from tupletree import cli

    live.submit_topology("wc", CONF, word_count())
    address = live.ui_url.removeprefix("http://")
    eventually(lambda: _emitted(live) > 0)
    assert cli.main(["list", "--ui", address]) == 0
    out = capsys.readouterr().out
    assert "Topology_name" in out and "wc" in out and "ACTIVE" in out
    assert cli.main(["stats", "wc", "--ui", address]) == 0
    out = capsys.readouterr().out
    assert "sentences" in out and "split" in out and "count" in out
    assert cli.main(["deactivate", "wc", "--ui", address]) == 0
    eventually(lambda: not live.topology_info("wc")["active"])
    assert cli.main(["activate", "wc", "--ui", address]) == 0
    eventually(lambda: live.topology_info("wc")["active"])
    assert cli.main(["stats", "nope", "--ui", address]) == 1
    assert "nope" in capsys.readouterr().err
    assert cli.main(["kill", "wc", "-w", "0", "--ui", address]) == 0
    assert live.topologies() == []
    assert cli.main(["list", "--ui", address]) == 0
    assert "No topologies running" in capsys.readouterr().out


def test_cli_names_an_unreachable_service(capsys):
    """A --ui where nothing listens: exit 1 and a message naming the address."""
    from tupletree import cli

    with LocalCluster(ui_port=0) as cluster:
        address = cluster.ui_url.removeprefix("http://")
    assert cli.main(["list", "--ui", address]) == 1
    assert address in capsys.readouterr().err
    with pytest.raises(ui_client.UIClientError, match="HOST:PORT"):
        ui_client.UIClient("no-port")


def test_cli_says_when_another_service_answers(capsys):
    """--ui at a service that is not tupletree's (a Spark master's web UI takes 8080,
    the default): HTML to a GET, 405 to a POST. Each command exits 1 with one line
    saying so, not a JSONDecodeError's traceback."""
    import http.server
    import threading

    from tupletree import cli

    class SparkLike(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><title>Spark Master</title></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.send_error(405)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SparkLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        for command in (["list"], ["stats", "wc"], ["kill", "wc", "-w", "0"], ["deactivate", "wc"]):
            assert cli.main([*command, "--ui", address]) == 1, command
            err = capsys.readouterr().err
            assert "not an answer of tupletree's web service" in err, (command, err)
            assert address in err and "Traceback" not in err
    finally:
        server.shutdown()
        server.server_close()


class _WithStalls(LocalCluster):
    """A cluster that reports 60 timed-out trees."""

    def timed_out(self, name: str) -> list[dict[str, Any]]:
        self.topology_info(name)  # unknown name: KeyError, as the real one raises
        return [{"msg_id": i, "stalled_at": [{"component": "count", "task": 3}]} for i in range(60)]


def test_the_newest_50_timed_out_trees_are_listed():
    """The topology answer has the cluster's newest 50 timed-out trees, as plain JSON."""
    with _WithStalls(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=5))
        trees = get(f"{cluster.ui_url}{API}/wc")["timedOutTrees"]
        assert len(trees) == 50 and trees[-1]["msg_id"] == 59
        assert trees[0]["stalled_at"] == [{"component": "count", "task": 3}]


def test_a_bolt_that_never_acks_is_named_where_its_trees_stalled(sim):
    """cluster.timed_out's trees reach the REST answer: each names its spout message and
    the bolt task that held its tuple unacked; the 64-bit root is a hex string."""
    sim.submit_topology("stuck", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 5}, never_acked(3))
    sim.wait_idle()
    assert get(f"{sim.ui_url}{API}/stuck")["timedOutTrees"] == []
    sim.advance_time(12)
    trees = get(f"{sim.ui_url}{API}/stuck")["timedOutTrees"]
    assert sorted(t["msg_id"] for t in trees) == [0, 1, 2]
    for tree in trees:
        assert (tree["spout_component"], tree["holders"][0]["component"]) == ("src", "hold")
        assert tree["holders"][0]["state"] == "executing"
        assert len(tree["root"]) == 16 and int(tree["root"], 16) > 0


def test_run_prints_the_web_view_address_unless_told_not_to(tmp_path, capsys):
    """`tupletree run` serves the web view and prints its address; --no-ui does not."""
    from tupletree import cli

    file = tmp_path / "tiny.py"
    file.write_text(
        "from tupletree import Spout, TopologyBuilder\n"
        "class S(Spout):\n"
        "    outputs = ['x']\n"
        "    def open(self, conf, context, collector):\n"
        "        self.c, self.n = collector, 0\n"
        "    def next_tuple(self):\n"
        "        if self.n < 10:\n"
        "            self.n += 1\n"
        "            self.c.emit([self.n], msg_id=self.n)\n"
        "def topology():\n"
        "    b = TopologyBuilder()\n"
        "    b.set_spout('s', S())\n"
        "    return b.create_topology()\n"
    )
    assert cli.main(["run", "--local", "--ui-port", "0", str(file)]) == 0
    out = capsys.readouterr().out
    assert "web view at http://127.0.0.1:" in out and "done: 10 trees acked" in out
    assert cli.main(["run", "--local", "--no-ui", str(file)]) == 0
    assert "web view" not in capsys.readouterr().out


def test_visualize_prints_mermaid_and_dot_and_renders_with_graphviz(tmp_path, capsys):
    """Mermaid by default, DOT on request, an image through dot when it is installed."""
    import shutil
    from pathlib import Path

    from tupletree import cli

    example = Path(__file__).resolve().parents[2] / "examples" / "word_count.py"
    assert cli.main(["visualize", str(example)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart LR") and '-->|"fields(word)"| c_count' in out
    assert cli.main(["visualize", str(example), "--format", "dot"]) == 0
    assert '"split" -> "count" [label="fields(word)"];' in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"\.png, \.svg or \.pdf"):
        cli.main(["visualize", str(example), "-o", str(tmp_path / "x.txt")])
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed: the image form is not tested")
    image = tmp_path / "wc.svg"
    assert cli.main(["visualize", str(example), "-o", str(image)]) == 0
    assert "<svg" in image.read_text()


class _Broken(LocalCluster):
    """A cluster whose metrics fail as a SparkCluster's do once its Spark job ended."""

    def metrics(self, name: str) -> dict[str, Any]:
        from tupletree.spark.errors import SparkJobFailed

        raise SparkJobFailed(f"topology {name!r}: the Spark job running its workers ended")


def test_a_failing_cluster_call_is_a_json_500_naming_it():
    """A cluster call that raises (not an unknown name) is a 500 with the exception's
    message as JSON; the summary lists the topology as FAILED instead of failing."""
    with _Broken(simulate_time=True, ui_port=0) as cluster:
        cluster.submit_topology("wc", CONF, word_count(limit=5))
        status, body = call("GET", f"{cluster.ui_url}{API}/wc")
        assert status == 500
        assert (
            body["errorMessage"].startswith("SparkJobFailed: ") and "ended" in body["errorMessage"]
        )
        (entry,) = get(f"{cluster.ui_url}{API}/summary")["topologies"]
        assert entry["status"] == "FAILED" and "ended" in entry["error"]


def test_deactivate_answered_is_deactivate_seen(live):
    """Issue 23: after POST deactivate answered success, the summary said ACTIVE for a
    while. A call that returned is visible at once."""
    live.submit_topology("wc", CONF, word_count())
    url = live.ui_url
    for op, status in (("deactivate", "INACTIVE"), ("activate", "ACTIVE")) * 2:
        assert call("POST", f"{url}{API}/wc/{op}")[0] == 200
        assert get(f"{url}{API}/summary")["topologies"][0]["status"] == status
        assert get(f"{url}{API}/wc")["status"] == status


def test_a_kill_with_a_wait_during_a_rebalance_is_taken(live):
    """POST kill/<wait> of a topology that rebalances: docs/rebalance.md says a kill
    waits for the rebalance, but the service began with a deactivate, which a
    rebalance refuses: 409. Now it is taken (200), and the topology is gone once the
    rebalance and the wait are over. A rebalance to more workers than submit takes is
    refused there too (400)."""
    live.submit_topology("held", CONF, never_acked(5))  # its trees stay pending
    url = live.ui_url
    status, body = call(
        "POST", f"{url}{API}/held/rebalance/0", body={"rebalanceOptions": {"numWorkers": 10**7}}
    )
    assert status == 400 and "'topology.workers' must be from 1 to 4096" in body["errorMessage"]
    status, _ = call("POST", f"{url}{API}/held/rebalance/3", body={"rebalanceOptions": {}})
    assert status == 200 and live.rebalancing("held")
    status, body = call("POST", f"{url}{API}/held/kill/1")
    assert status == 200, body
    eventually(lambda: "held" not in live.topologies(), what="the kill")


def test_rebalance_through_rest_and_the_cli_shows_the_new_layout(live, capsys):
    """Storm UI's POST rebalance/<wait_secs> with rebalanceOptions: checked at once (400
    naming the problem), REBALANCING while the trees in flight get their wait (409 for
    another rebalance meanwhile), then the new layout in the answers; the CLI's
    ``rebalance NAME -w -n -e`` does the same."""
    from tupletree import cli

    live.submit_topology("held", CONF, never_acked(5))  # its trees stay pending
    url = live.ui_url
    rebalance = f"{url}{API}/held/rebalance"
    status, body = call(
        "POST", f"{rebalance}/0", body={"rebalanceOptions": {"executors": {"hold": 3}}}
    )
    assert status == 400 and "'hold' has 1 task(s)" in body["errorMessage"]
    assert "not 3" in body["errorMessage"]
    status, body = call("POST", f"{rebalance}/0", body={"rebalanceOptions": {"numWorkers": 0}})
    assert status == 400 and "workers must be an integer >= 1" in body["errorMessage"]
    assert call("POST", f"{rebalance}/-1")[0] == 400
    assert call("POST", f"{url}{API}/nope/rebalance/0")[0] == 404

    status, body = call("POST", f"{rebalance}/2", body={"rebalanceOptions": {"numWorkers": 2}})
    assert status == 200
    assert body == {"topologyOperation": "rebalance", "topologyId": "held", "status": "success"}
    assert get(f"{url}{API}/summary")["topologies"][0]["status"] == "REBALANCING"
    status, body = call("POST", f"{rebalance}/0", body={})
    assert status == 409 and "rebalancing already" in body["errorMessage"]
    assert call("POST", f"{url}{API}/held/deactivate")[0] == 409
    eventually(lambda: get(f"{url}{API}/held")["status"] == "ACTIVE", what="the rebalance")
    assert live.topology_info("held")["conf"][Config.TOPOLOGY_WORKERS] == 2

    live.submit_topology("wc", CONF, word_count())
    address = url.removeprefix("http://")
    assert (
        cli.main(["rebalance", "wc", "-w", "0", "-n", "3", "-e", "count=2", "--ui", address]) == 0
    )
    assert "rebalancing wc" in capsys.readouterr().out
    eventually(lambda: get(f"{url}{API}/wc")["status"] == "ACTIVE", what="the rebalance")
    page = get(f"{url}{API}/wc")
    assert {b["boltId"]: b["executors"] for b in page["bolts"]} == {"split": 2, "count": 2}
    assert cli.main(["rebalance", "wc", "-w", "0", "-e", "count=5", "--ui", address]) == 1
    assert "'count' has 2 task(s)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["rebalance", "wc", "-e", "count", "--ui", address])
