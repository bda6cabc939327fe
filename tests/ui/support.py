"""A word count for the web view's tests (unbounded or finite), and small HTTP helpers."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from tupletree import BasicBolt, Bolt, Config, Spout, TopologyBuilder

SENTENCES = ["the cow jumped over the moon", "an apple a day", "four score and seven"]


class Sentences(Spout):
    """``limit`` sentences with message ids (None: forever)."""

    outputs = ["sentence"]

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.n = collector, 0

    def next_tuple(self) -> None:
        if self.limit is not None and self.n >= self.limit:
            return
        self.collector.emit([SENTENCES[self.n % len(SENTENCES)]], msg_id=self.n)
        self.n += 1


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


class Count(BasicBolt):
    """Counts words; raises on "moon" every ``fail_every``-th time when set (an error
    with a traceback for the page, a failed tree for the counts)."""

    outputs = ["word", "count"]

    def __init__(self, fail_every: int | None = None) -> None:
        self.fail_every = fail_every

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        if self.fail_every and word == "moon" and self.counts[word] % self.fail_every == 0:
            raise ValueError(f"moon number {self.counts[word]} is unlucky")
        collector.emit([word, self.counts[word]])


class NeverAcks(Bolt):
    """Holds every tuple: its trees time out."""

    def execute(self, tup: Any) -> None:
        pass


def never_acked(sentences: int) -> Any:
    """``sentences`` spout tuples ("src") held by a bolt that never acks them ("hold"):
    every tree times out."""
    builder = TopologyBuilder()
    builder.set_spout("src", Sentences(sentences))
    builder.set_bolt("hold", NeverAcks()).shuffle_grouping("src")
    return builder.create_topology()


def word_count(limit: int | None = None, fail_every: int | None = None) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(limit))
    builder.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(fail_every), parallelism=2).fields_grouping("split", ["word"])
    return builder.create_topology()


CONF = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 200, Config.TOPOLOGY_ACKER_EXECUTORS: 1}


def call(
    method: str, url: str, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, Any]:
    """(status, JSON body) of a request (``body``: sent as JSON); HTTP errors are answers
    here, not exceptions."""
    data = b"" if method == "POST" else None
    headers = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str) -> Any:
    status, body = call("GET", url)
    assert status == 200, body
    return body


def text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def eventually(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """Poll ``check`` until it returns something true; fail after ``timeout`` (generous:
    this is a shared machine)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.1)
