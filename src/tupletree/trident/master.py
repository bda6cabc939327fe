"""MasterBatchCoordinator: the spout (one task) that drives a batch group.

Thin around BatchTable (coordinator.py), which decides; this spout persists and emits:

- ``$batch`` ``[attempt, {tx id: metadata}]``, message id = the attempt, to every task
  of the group's spouts' bolts. Before it, the new attempt ids are persisted (a
  restarted coordinator never reuses one), and each spout coordinator's metadata for
  the txid (Storm's TridentSpoutCoordinator, folded in here: one component fewer) is
  computed by ``initialize_transaction(txid, previous, stored)`` and stored under the
  txid, so a replay gets the same (a transactional spout's partition list stays);
- ``$commit`` ``[attempt]``, message id = the attempt, to every committing bolt task;
- ``$success`` ``[attempt]`` (untracked) once the commit tree completed and the commit
  is recorded: ``currtx`` moves to txid + 1 with a compare-and-set on txid
  (progress.py), so a txid is committed once even with a second coordinator (a zombie)
  about; if the compare-and-set finds another value, this coordinator reloads.

The trees of those tuples are tracked by the ordinary acker, so the batch timeout is
``topology.message.timeout.secs``: a timed-out tree is a failed one. Active batches:
``topology.max.spout.pending`` (1 when unset); at most one new batch per
``topology.trident.batch.emit.interval.millis`` (500). Time is ``context.now()``.

After the coordinator's worker dies, the new one loads ``currtx`` and the attempts and
resumes at the first uncommitted txid: the batches that were active start again with
higher attempt ids. A write to the progress store that fails (the commit record, the
attempts) leaves the table ahead of the store: it is reported, and nothing moves until
the table is reloaded from the store (tried once a second), as after a restart.
"""

from __future__ import annotations

from typing import Any

from tupletree.config import Config
from tupletree.topology.components import Spout
from tupletree.trident.bolt import (
    BATCH_STREAM,
    COMMIT_STREAM,
    METRIC,
    SUCCESS_STREAM,
    first_unpicklable,
)
from tupletree.trident.coordinator import BatchTable, Committed, EmitBatch, EmitCommit
from tupletree.trident.progress import (
    Progress,
    check_progress_store,
    memory_store_name,
    open_progress,
)


class MasterBatchCoordinator(Spout):
    def __init__(self, group: str, spouts: list[tuple[str, Any]], progress: tuple[str, int]):
        if not spouts:
            raise ValueError("a master batch coordinator must manage at least one spout")
        self.group = group
        self.spouts = spouts  # (tx id, adapter)
        self.progress_name = progress

    def unpicklable_part(self, dumps: Any) -> str | None:
        """The spout that ``dumps`` cannot pickle, named for the submit error."""
        return first_unpicklable([(f"spout {t!r}", a) for t, a in self.spouts], dumps)

    def check_config(self, conf: dict[str, Any], component_id: str) -> None:
        check_progress_store(conf, component_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(BATCH_STREAM, ["tx", "metadata"])
        declarer.declare_stream(COMMIT_STREAM, ["tx"])
        declarer.declare_stream(SUCCESS_STREAM, ["tx"])

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.context = context
        self.running = True
        max_active = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING) or 1
        interval = conf.get(Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS)
        interval_secs = (500 if interval is None else interval) / 1000.0
        name, pid = self.progress_name
        store = open_progress(conf, memory_store_name(name, context.topology_name), pid)
        self.progress = Progress(store, [t for t, _ in self.spouts])
        current, attempts = self.progress.load_coordinator()
        self.table = BatchTable(max_active, interval_secs, current, attempts)
        self.resumed_at = current
        self.coordinators = [
            (tx_id, adapter.get_coordinator(tx_id, conf, context)) for tx_id, adapter in self.spouts
        ]
        self.reloads = 0
        # The table got ahead of the store (a write to it failed): nothing moves until
        # the table is reloaded from the store, tried at most once a second.
        self.stale = False
        self._retry_at = 0.0
        context.register_metric(METRIC, self.metric)

    # -- the spout's calls --------------------------------------------------------------

    def next_tuple(self) -> None:
        if self.stale and not self._reload():
            return
        self._do(self.table.sync(self.context.now(), self._ready, self.running))

    def ack(self, msg_id: Any) -> None:
        if not self.stale:  # else the reload forgets every active batch anyway
            self._do(self.table.ack(msg_id, self.context.now(), self._ready, self.running))

    def fail(self, msg_id: Any) -> None:
        if not self.stale:
            self._do(self.table.fail(msg_id, self.context.now(), self._ready, self.running))

    def activate(self) -> None:
        self.running = True

    def deactivate(self) -> None:
        self.running = False

    def close(self) -> None:
        for _, coordinator in getattr(self, "coordinators", []):
            try:
                coordinator.close()
            except Exception as exc:
                self.collector.report_error(exc)
        progress = getattr(self, "progress", None)
        if progress is not None:
            progress.store.close()

    # -- doing what the table decided ------------------------------------------------

    def _ready(self, txid: int) -> bool:
        ready = False
        for _, coordinator in self.coordinators:
            try:
                ready = bool(coordinator.is_ready(txid)) or ready
            except Exception as exc:
                self.collector.report_error(exc)
        return ready

    def _do(self, outcomes: list[Any]) -> None:
        if not outcomes:
            return
        if any(type(o) is EmitBatch for o in outcomes):
            try:
                self.progress.save_attempts(self.table.attempts)
            except Exception as exc:
                # Emitted unrecorded, an attempt id could be used again after a restart;
                # not emitted, the table would wait for it forever.
                self._lost(exc, "record the attempts of the batches it starts")
                return
        active = self.table.active
        for o in outcomes:
            if type(o) is EmitBatch:
                entry = active.get(o.attempt.transaction_id)
                if entry is not None and entry[0] == o.attempt.attempt_id:  # still wanted
                    self._start(o.attempt)
            elif type(o) is EmitCommit:
                self.collector.emit([o.attempt], o.attempt, COMMIT_STREAM)
            elif type(o) is Committed and not self._committed(o.attempt):
                return  # reloaded: the table's later decisions (a next $commit) are void

    def _stream_names(self) -> str:
        """This coordinator's streams (new_stream's names), for its errors."""
        return ", ".join(repr(t) for t, _ in self.spouts)

    def _lost(self, exc: BaseException, what: str) -> None:
        names = self._stream_names()
        self.collector.report_error(
            RuntimeError(
                f"trident coordinator {self.group} (streams {names}) could not {what} in "
                f"{Config.TOPOLOGY_TRIDENT_PROGRESS_STORE} ({type(exc).__name__}: {exc}); "
                "it starts again from what the store holds once it answers (a batch whose "
                "states committed is replayed: they skip or recompute it)"
            )
        )
        self.stale = True
        self._reload(force=True)

    def _reload(self, force: bool = False) -> bool:
        """The table from the store; False (reported) while the store cannot be read."""
        now = self.context.now()
        if not force and now < self._retry_at:
            return False
        try:
            current, attempts = self.progress.load_coordinator()
        except Exception as exc:
            self._retry_at = now + 1.0
            self.collector.report_error(exc)
            return False
        self.table.reload(current, attempts)
        self.stale = False
        self.reloads += 1
        return True

    def _start(self, attempt: Any) -> None:
        txid = attempt.transaction_id
        metas = {}
        try:
            for tx_id, coordinator in self.coordinators:
                found, current, previous = self.progress.coordinator_meta(tx_id, txid)
                meta = coordinator.initialize_transaction(
                    txid, previous, current if found else None
                )
                if not found or meta != current:
                    self.progress.put_coordinator_meta(tx_id, txid, meta)
                metas[tx_id] = meta
        except Exception as exc:
            # Not started: the table forgets it (and those after it), and the next
            # next_tuple tries again; nothing new starts in this call.
            self.collector.report_error(exc)
            self._do(self.table.fail(attempt, self.context.now(), self._ready, False))
            return
        self.collector.emit([attempt, metas], attempt, BATCH_STREAM)

    def _committed(self, attempt: Any) -> bool:
        """Record the commit; False if the table was reloaded instead."""
        txid = attempt.transaction_id
        try:
            recorded = self.progress.commit(txid, attempt.attempt_id, self.table.attempts)
        except Exception as exc:
            # The table moved past txid, the store did not: going on, the next txid's
            # states would commit ahead of the store, and the replay of this one, after
            # any reload, would be refused by them as behind (stuck for good).
            self._lost(exc, f"record that txid {txid} committed")
            return False
        if not recorded:
            # Another coordinator moved the txid: never commit twice; start over from
            # what is stored.
            names = self._stream_names()
            self.collector.report_error(
                RuntimeError(
                    f"trident coordinator {self.group} (streams {names}): txid {txid} was "
                    "already committed by another coordinator: a stale copy of this one, "
                    f"or another topology with a stream named {names} in the same "
                    f"{Config.TOPOLOGY_TRIDENT_PROGRESS_STORE} (progress is kept by stream "
                    "name); reloading the stored progress"
                )
            )
            self.stale = True
            self._reload(force=True)
            return False
        self.collector.emit([attempt], None, SUCCESS_STREAM)
        for tx_id, coordinator in self.coordinators:
            try:
                coordinator.success(txid)
                self.progress.cleanup_coordinator_meta(tx_id, txid)
            except Exception as exc:
                self.collector.report_error(exc)
        return True

    def metric(self) -> dict[str, Any]:
        snap = self.table.snapshot()
        snap.update(
            kind="coordinator",
            group=self.group,
            spouts=[t for t, _ in self.spouts],
            resumedAt=self.resumed_at,
            maxActive=self.table.max_active,
            reloads=self.reloads,
        )
        return snap
