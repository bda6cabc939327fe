"""The web service on SparkCluster (kept small: one topology on two workers): REST
answers agree with cluster.metrics, deactivate/activate steer the workers' spouts, kill
ends the topology, /metrics parses and names the workers."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.spark.cluster import SparkCluster

pytestmark = pytest.mark.spark

API = "/api/v1/topology"


class Endless(Spout):
    outputs = ["sentence"]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.n = collector, 0

    def next_tuple(self) -> None:
        self.n += 1
        self.collector.emit(["a b c"], msg_id=self.n)


class Words(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class Sink(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        pass


def _topology() -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", Endless(), parallelism=2)
    b.set_bolt("split", Words(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("sink", Sink(), parallelism=2).fields_grouping("split", ["word"])
    return b.create_topology()


def _call(method: str, url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else b"" if method == "POST" else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        body = response.read()
    return json.loads(body) if method != "METRICS" else body


def _families(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/metrics", timeout=60) as response:
        text = response.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _wait(check: Any, what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
    return result


def test_rest_metrics_and_steering_on_spark(spark: Any) -> None:
    conf = {
        Config.TOPOLOGY_WORKERS: 2,
        Config.TOPOLOGY_ACKER_EXECUTORS: 2,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 100,
    }
    with SparkCluster(spark, ui_port=0) as cluster:
        cluster.submit_topology("sparkwc", conf, _topology())
        url = cluster.ui_url
        assert url.startswith("http://127.0.0.1:")
        _wait(lambda: _call("GET", f"{url}{API}/sparkwc")["spouts"][0]["acked"] > 0, "acks")

        topo = _call("GET", f"{url}{API}/sparkwc")
        assert topo["workersTotal"] == 2
        workers = {w["index"]: w for w in topo["workers"]}
        assert {i: w["pid"] for i, w in workers.items()} == {
            i: w.pid for i, w in cluster.workers("sparkwc").items()
        }
        assert all(w["restarts"] == 0 for w in workers.values())
        # Storm's executorStats name the worker each task runs on, with its host and port
        # (the worker's data socket): split's two executors, one on each worker.
        addresses = {i: w.address for i, w in cluster.workers("sparkwc").items()}
        comp = _call("GET", f"{url}{API}/sparkwc/component/split")
        assert sorted(s["worker"] for s in comp["executorStats"]) == [0, 1]
        for stats in comp["executorStats"]:
            worker = stats["worker"]
            assert stats["host"] == workers[worker]["host"]
            assert addresses[worker].endswith(f":{stats['port']}")

        restarts = _families(url)["tupletree_worker_restarts"].samples
        assert sorted(s.labels["worker"] for s in restarts) == ["0", "1"]
        assert all(s.value == 0 for s in restarts)
        memory = _wait(
            lambda: _families(url)["tupletree_worker_memory_bytes"].samples, "worker memory"
        )
        assert len(memory) == 2 and all(s.value > 1e6 for s in memory)
        refused = _families(url)["tupletree_worker_frames_refused"].samples
        assert {(s.labels["worker"], s.labels["kind"]) for s in refused} == {
            (w, k) for w in "01" for k in ("control", "data", "unreadable")
        }
        assert all(s.value == 0 for s in refused)

        ans = _call("POST", f"{url}{API}/sparkwc/deactivate")
        assert ans == {
            "topologyOperation": "deactivate",
            "topologyId": "sparkwc",
            "status": "success",
        }
        assert cluster.wait_idle(120)
        settled = cluster.metrics("sparkwc")
        topo = _call("GET", f"{url}{API}/sparkwc")
        assert topo["status"] == "INACTIVE"
        (spout,) = topo["spouts"]
        for key in ("emitted", "acked", "failed"):
            assert spout[key] == settled["sentences"][key], key
        for bolt in topo["bolts"]:
            for key in ("executed", "emitted", "acked", "failed"):
                assert bolt[key] == settled[bolt["boltId"]][key], (bolt["boltId"], key)
        comp = _call("GET", f"{url}{API}/sparkwc/component/split")
        assert {s["taskId"]: s["executed"] for s in comp["executorStats"]} == {
            t: v["executed"] for t, v in settled["split"]["tasks"].items()
        }
        assert cluster.wait_idle(60)  # later worker reports, of idle rounds: nothing emitted
        assert cluster.metrics("sparkwc")["sentences"]["emitted"] == settled["sentences"]["emitted"]

        assert _call("POST", f"{url}{API}/sparkwc/activate")["status"] == "success"
        _wait(
            lambda: (
                cluster.metrics("sparkwc")["sentences"]["emitted"] > settled["sentences"]["emitted"]
            ),
            "emits after activate",
        )

        # Storm UI's rebalance: the answer at once, then the new layout in the view.
        ans = _call(
            "POST",
            f"{url}{API}/sparkwc/rebalance/0",
            {"rebalanceOptions": {"numWorkers": 1, "executors": {"split": 1}}},
        )
        assert ans["topologyOperation"] == "rebalance" and ans["status"] == "success"
        _wait(lambda: _call("GET", f"{url}{API}/sparkwc")["status"] == "ACTIVE", "rebalanced")
        topo = _call("GET", f"{url}{API}/sparkwc")
        assert topo["workersTotal"] == 1 and [w["index"] for w in topo["workers"]] == [0]
        assert {b["boltId"]: b["executors"] for b in topo["bolts"]}["split"] == 1
        comp = _call("GET", f"{url}{API}/sparkwc/component/split")
        (port,) = {s["port"] for s in comp["executorStats"]}
        assert {s["worker"] for s in comp["executorStats"]} == {0}
        assert cluster.workers("sparkwc")[0].address.endswith(f":{port}")

        assert _call("POST", f"{url}{API}/sparkwc/kill/0")["topologyOperation"] == "kill"
        assert cluster.topologies() == []
        assert _call("GET", f"{url}{API}/summary") == {"topologies": []}
