"""What the real-broker tests share: polling with a deadline, the bolt that fails a
fifth of its inputs, and the spout -> bolt -> sink pipeline of the acceptance tests."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from tupletree import BasicBolt, FailedException, TopologyBuilder

CONF = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 200}


def until(cond: Callable[[], Any], secs: float = 60.0) -> bool:
    """Poll ``cond`` until it is true or ``secs`` passed (a generous deadline: brokers
    are real here, and the machine is shared)."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


class FailAFifth(BasicBolt):
    """Passes ``message`` on, failing about a fifth of its inputs at random and every
    input whose message starts with ``poison``."""

    outputs = ["message"]

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(self.seed + context.task_id)

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0].startswith("poison") or self.rng.random() < 0.2:
            raise FailedException("unlucky")
        collector.emit([tup[0]])


class FailPoison(BasicBolt):
    """Fails every input whose message starts with ``poison``, passes the others on."""

    outputs = ["message"]

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0].startswith("poison"):
            raise FailedException("poison")
        collector.emit([tup[0]])


def pipeline(spout: Any, sink: Any = None, bolt: Any = None, spouts: int = 1) -> Any:
    b = TopologyBuilder()
    b.set_spout("src", spout, parallelism=spouts)
    b.set_bolt("work", bolt if bolt is not None else FailAFifth(), parallelism=2).shuffle_grouping(
        "src"
    )
    if sink is not None:
        b.set_bolt("sink", sink).shuffle_grouping("work")
    return b.create_topology()
