"""A replayed batch of an ITridentSpout is built from the metadata its first attempt
stored, as in Storm: the coordinator's ``initialize_transaction(txid, prev, curr)`` gets
that metadata as ``curr`` on every later attempt of the txid. A transactional spout's
coordinator returns ``curr`` then, so the replay is the same batch; handed None instead,
it computes the batch afresh (here from more data than the first attempt saw), and the
replay is another batch: records counted twice, where a later batch had read them too."""

from __future__ import annotations

from typing import Any

from tupletree import Config, Fields
from tupletree.trident import TridentTopology
from tupletree.trident.builtin import Count
from tupletree.trident.spout.interfaces import (
    BatchCoordinator,
    Emitter,
    ITridentSpout,
    SpoutType,
)
from tupletree.trident.state import MemoryMapState

from ..registry import Box, entries, new_journal, record
from .support import RecordingFactory, memory_counts, sim_conf

FAIL_AT = 3  # the txid whose first commit phase fails
MAX_TXID = 8


class _RangeCoordinator(BatchCoordinator):
    """Batch t is the ``box["size"]`` records after batch t - 1's; the size grows when
    the failure happens (more data arrived by then)."""

    def __init__(self, box: Box) -> None:
        self.box = box

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        if curr_metadata is not None:
            return curr_metadata  # a replay: the same batch
        start = prev_metadata["end"] if prev_metadata else 0
        return {"start": start, "end": start + self.box.get()["size"]}

    def is_ready(self, txid: int) -> bool:
        return txid <= MAX_TXID


class _RangeEmitter(Emitter):
    def __init__(self, journal: Any) -> None:
        self.journal = journal

    def emit_batch(self, tx: Any, coordinator_meta: Any, collector: Any) -> None:
        start, end = coordinator_meta["start"], coordinator_meta["end"]
        record(self.journal, (tx.transaction_id, tx.attempt_id, start, end))
        for i in range(start, end):
            collector.emit([f"r{i}"])


class RangeSpout(ITridentSpout):
    spout_type = SpoutType.TRANSACTIONAL

    def __init__(self, box: Box, journal: Any) -> None:
        self.box = box
        self.journal = journal

    def get_coordinator(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _RangeCoordinator(self.box)

    def get_emitter(self, tx_id: str, conf: dict[str, Any], context: Any) -> Any:
        return _RangeEmitter(self.journal)

    def get_output_fields(self) -> Any:
        return Fields("word")


def test_a_replayed_batch_gets_its_first_attempts_metadata_and_counts_once(sim_cluster):
    """Txid FAIL_AT fails its first commit phase, while the batches after it are in
    flight, and the coordinator would compute a bigger batch by then: every attempt of
    every txid emits the same records, and each record is counted exactly once."""
    box = Box()
    box.get()["size"] = 2
    journal = new_journal()
    memory = MemoryMapState.Factory()
    factory = RecordingFactory(memory, fail_begin={FAIL_AT}, on_fail=(box, {"size": 5}))
    topology = TridentTopology()
    (
        topology.new_stream("ranges", RangeSpout(box, journal))
        .group_by(Fields("word"))
        .persistent_aggregate(factory, Count(), Fields("count"))
    )
    conf = sim_conf(
        **{
            Config.TOPOLOGY_MAX_SPOUT_PENDING: 3,
            Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 0,
        }
    )
    sim_cluster.submit_topology("ranges", conf, topology.build())
    sim_cluster.advance_time(30)

    emitted = entries(journal)
    assert any(attempt > 0 for _, attempt, _, _ in emitted)  # the failure made a replay
    ranges: dict[int, set[tuple[int, int]]] = {}
    for txid, _, start, end in emitted:
        ranges.setdefault(txid, set()).add((start, end))
    assert {t: len(r) for t, r in ranges.items()} == {t: 1 for t in ranges}, ranges
    assert sorted(ranges) == list(range(1, MAX_TXID + 1))
    last_end = max(end for r in ranges.values() for _, end in r)
    assert memory_counts(memory) == {f"r{i}": 1 for i in range(last_end)}
