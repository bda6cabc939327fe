"""Storm's Trident tutorial: a word count kept exactly once, and a DRPC query over it.

    python examples/trident_word_count.py          # LocalCluster, prints the query's answer
    tupletree run --local examples/trident_word_count.py

The stream: sentences in batches of 3 (FixedBatchSpout), split into words, grouped by
word, counted into an opaque memory map state (``persistent_aggregate``): each batch is
counted once however often it is replayed. The query ``words``: split its argument,
look each word's count up in that state (``state_query`` with ``MapGet``), drop the
words never seen (``FilterNull``), sum the counts (``aggregate`` with ``Sum``). Asked
"cat the dog jumped" it answers Storm's tutorial's ``[[5]]``.
"""

from __future__ import annotations

import time
from typing import Any

from tupletree import Config, Fields, LocalCluster
from tupletree.drpc import DRPCClient
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count, FilterNull, MapGet, Sum
from tupletree.trident.operation import BaseFunction
from tupletree.trident.state import MemoryMapState
from tupletree.trident.testing import FixedBatchSpout

SENTENCES = [
    ["the cow jumped over the moon"],
    ["the man went to the store and bought some candy"],
    ["four score and seven years ago"],
    ["how many apples can you eat"],
]


class Split(BaseFunction):
    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():  # field 0: "sentence" here, "args" for the query
            collector.emit([word])


def topology(drpc: Any = None) -> Any:
    """The tutorial's topology. ``drpc``: a LocalDRPC, or None for the cluster's DRPC
    server (``LocalCluster(drpc_port=0)``, ``tupletree run``)."""
    spout = FixedBatchSpout(Fields("sentence"), 3, *SENTENCES)
    spout.set_cycle(False)
    t = TridentTopology()
    counts = (
        t.new_stream("spout1", spout)
        .each(Fields("sentence"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count"))
        .parallelism_hint(2)
    )
    (
        t.new_drpc_stream("words", drpc)
        .each(Fields("args"), Split(), Fields("word"))
        .group_by(Fields("word"))
        .state_query(counts, Fields("word"), MapGet(), Fields("count"))
        .each(Fields("count"), FilterNull())
        .aggregate(Fields("count"), Sum(), Fields("sum"))
    )
    return t.build()


CONF = {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100}


def committed_txids(metrics: dict[str, Any]) -> int:
    views = list(metrics["__mastercoord-bg0"].get("custom", {}).get("trident", {}).values())
    return (views[0].get("lastCommittedTxid") or 0) if views else 0


def report(metrics: dict[str, Any]) -> str:
    return f"batches committed: {committed_txids(metrics)}"


def main() -> str:
    with LocalCluster(drpc_port=0) as cluster:
        cluster.submit_topology("trident-wc", CONF, topology())
        deadline = time.monotonic() + 60
        while committed_txids(cluster.metrics("trident-wc")) < 3:  # the 4 sentences' batches
            if time.monotonic() > deadline:
                raise SystemExit("the sentences were not counted within 60 s")
            time.sleep(0.1)
        server = cluster.drpc_server
        answer = DRPCClient(server.host, server.port).execute("words", "cat the dog jumped")
        print(f'words("cat the dog jumped") = {answer}')
        return answer


if __name__ == "__main__":
    main()
