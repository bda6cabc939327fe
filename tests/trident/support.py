"""Components and helpers shared by the Trident tests (module level, so every task's
pickled copy finds its class), and journals those copies write to."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from tupletree import Bolt, Config, FailedException
from tupletree.trident.operation import BaseFunction
from tupletree.trident.state import (
    BaseStateUpdater,
    MapState,
    MemoryMapState,
    Snapshottable,
    State,
    StateFactory,
)

from ..registry import entries, new_journal, record

SENTENCES = [
    "the cow jumped over the moon",
    "the man went to the store and bought some candy",
    "four score and seven years ago",
    "how many apples can you eat",
    "to be or not to be the person",
]


def many_sentences(n: int) -> list[str]:
    words = [
        "the",
        "cow",
        "moon",
        "man",
        "store",
        "candy",
        "four",
        "score",
        "seven",
        "apples",
        "eat",
        "be",
        "not",
        "person",
    ]
    return [
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(1 + i % 5)) for i in range(n)
    ]


def word_counts(sentences: list[str]) -> dict[str, int]:
    return dict(Counter(w for s in sentences for w in s.split()))


class Split(BaseFunction):
    """The tutorial's Split (reads field 0: it serves the spout's "sentence" and the
    DRPC stream's "args" alike, as Storm's does with getString(0))."""

    def execute(self, tup: Any, collector: Any) -> None:
        for word in tup[0].split():
            collector.emit([word])


def sim_conf(**extra: Any) -> dict[str, Any]:
    """Simulated time moves in 1 s steps: a 100 ms emit interval starts a batch a step."""
    return {Config.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 100, **extra}


def memory_counts(factory: MemoryMapState.Factory, partitions: int = 1) -> dict[Any, Any]:
    """What a memory map state holds (its partitions share one map): key -> current
    value."""
    out = {}
    for *key, value in MemoryMapState(factory.id).get_tuples():
        out[key[0] if len(key) == 1 else tuple(key)] = value
    return out


def drpc_execute(cluster: Any, drpc: Any, function: str, args: str, steps: int = 20) -> str:
    """A DRPC call on a simulated-time cluster: the call blocks, so it runs on a thread
    while this one advances time."""
    out: dict[str, Any] = {}

    def call() -> None:
        try:
            out["result"] = drpc.execute(function, args)
        except Exception as exc:  # handed to the test's thread
            out["error"] = exc

    before = drpc.pending_requests()
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while drpc.pending_requests() <= before and thread.is_alive():
        if time.monotonic() > deadline:
            raise AssertionError("the DRPC request never reached the book")
        time.sleep(0.005)
    for _ in range(steps):
        if not thread.is_alive():
            break
        cluster.advance_time(1)
        thread.join(0.05)
    thread.join(10)
    if "error" in out:
        raise out["error"]
    if "result" not in out:
        raise AssertionError(f"no DRPC answer for {function}({args!r}) after {steps} steps")
    return str(out["result"])


# -- states that record what they commit, and fail when told -----------------------


class RecordingState(MapState, Snapshottable):
    """Wraps a state: journals ("begin"/"commit", partition, txid), and fails the first
    commit phase of txids in ``fail_begin`` (before any update) or ``fail_commit``
    (after the updates were written: the replay must not count them twice)."""

    def __init__(
        self,
        inner: State,
        partition: int,
        journal: Any,
        fail_begin: set[int],
        fail_commit: set[int],
        failed: Any,
        on_fail: Any = None,
    ) -> None:
        self.on_fail = on_fail
        self.inner = inner
        self.partition = partition
        self.journal = journal
        self.fail_begin = fail_begin
        self.fail_commit = fail_commit
        self.failed = failed
        self.state_type = inner.state_type
        self.commit_empty_batches = getattr(inner, "commit_empty_batches", False)

    def _fail_once(self, txid: Any, where: str) -> None:
        key = (self.partition, txid, where)
        if key not in entries(self.failed):
            record(self.failed, key)
            if self.on_fail is not None:
                box, changes = self.on_fail
                box.get().update(changes)
            raise FailedException(f"test: failing the {where} of txid {txid} once")

    def begin_commit(self, txid: Any) -> None:
        if txid in self.fail_begin:
            self._fail_once(txid, "begin")
        self.inner.begin_commit(txid)

    def commit(self, txid: Any) -> None:
        self.inner.commit(txid)  # the updates are written ...
        if txid in self.fail_commit:
            self._fail_once(txid, "commit")  # ... and then the batch fails
        record(self.journal, ("commit", self.partition, txid))

    def multi_get(self, keys: Any) -> list[Any]:
        return self.inner.multi_get(keys)

    def multi_update(self, keys: Any, updaters: Any) -> list[Any]:
        return self.inner.multi_update(keys, updaters)

    def multi_put(self, keys: Any, vals: Any) -> None:
        self.inner.multi_put(keys, vals)

    def get(self) -> Any:
        return self.inner.get()

    def update(self, updater: Any) -> Any:
        return self.inner.update(updater)

    def set(self, value: Any) -> None:
        self.inner.set(value)


class RecordingFactory(StateFactory):
    def __init__(
        self,
        inner: StateFactory,
        fail_begin: set[int] = frozenset(),
        fail_commit: set[int] = frozenset(),
        on_fail: Any = None,
    ) -> None:
        self.on_fail = on_fail  # (Box, {...}): what the box gets when a failure is made
        self.inner = inner
        self.state_type = inner.state_type
        self.requires_deterministic_batches = inner.requires_deterministic_batches
        self.journal = new_journal()
        self.failed = new_journal()
        self.fail_begin = set(fail_begin)
        self.fail_commit = set(fail_commit)

    def make_state(
        self, conf: Any, metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        inner = self.inner.make_state(conf, metrics, partition_index, num_partitions)
        return RecordingState(
            inner,
            partition_index,
            self.journal,
            self.fail_begin,
            self.fail_commit,
            self.failed,
            self.on_fail,
        )

    def commits(self) -> list[tuple[int, Any]]:
        """(partition, txid) of every commit that went through, in order."""
        return [(p, t) for kind, p, t in entries(self.journal) if kind == "commit"]


class Collect(BaseStateUpdater):
    """An updater that journals (txid, tuples) of every batch it is handed."""

    def __init__(self) -> None:
        self.journal = new_journal()

    def update_state(self, state: Any, tuples: list[Any], collector: Any) -> None:
        record(self.journal, (state.txid, sorted((list(t) for t in tuples), key=repr)))

    def rows(self) -> list[list[Any]]:
        return sorted((r for _, rows in entries(self.journal) for r in rows), key=repr)


class TxidState(State):
    """Remembers the txid of the batch being committed (for Collect)."""

    from tupletree.trident.state import StateType as _ST

    state_type = _ST.TRANSACTIONAL

    def __init__(self) -> None:
        self.txid = None

    def begin_commit(self, txid: Any) -> None:
        self.txid = txid

    def commit(self, txid: Any) -> None:
        pass


class TxidStateFactory(StateFactory):
    from tupletree.trident.state import StateType as _ST

    state_type = _ST.TRANSACTIONAL

    def make_state(
        self, conf: Any, metrics: Any, partition_index: int, num_partitions: int
    ) -> State:
        return TxidState()


class FailAttemptZero(Bolt):
    """Wraps a compiled bolt and fails, at its boundary, attempt 0 of some batches: the
    first coordination tuple of attempt 0 of a txid in ``processing`` (the batch tree
    fails in the processing phase), and the ``$commit`` of attempt 0 of a txid in
    ``committing``. Everything else goes to the wrapped bolt. Journals what it failed."""

    def __init__(self, inner: Any, processing: set[int], committing: set[int]) -> None:
        self.inner = inner
        self.processing = set(processing)
        self.committing = set(committing)
        self.journal = new_journal()

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.inner.prepare(conf, context, collector)

    def execute(self, tup: Any) -> None:
        stream = tup.source_stream
        if stream.startswith("$coord-") or stream == "$commit":
            attempt = tup[0]
            phase = self.committing if stream == "$commit" else self.processing
            if attempt[1] == 0 and attempt[0] in phase:
                record(self.journal, (stream, attempt[0]))
                self.collector.fail(tup)
                return
        self.inner.execute(tup)

    def cleanup(self) -> None:
        self.inner.cleanup()


class HoldAndFail(Bolt):
    """Wraps a compiled bolt: holds back every tuple of attempt 0 of ``hold`` (data and
    coordination) until ``box.get()["release"]`` is set (checked on every tuple, ticks
    included), fails the ``$commit`` of attempt 0 of the txids in ``fail_commit``, and
    journals (stream kind, txid, attempt) of every coordination tuple it sees."""

    def __init__(self, inner: Any, box: Any, hold: int, fail_commit: set[int]) -> None:
        self.inner = inner
        self.box = box
        self.hold = hold
        self.fail_commit = set(fail_commit)
        self.journal = new_journal()

    def declare_output_fields(self, declarer: Any) -> None:
        self.inner.declare_output_fields(declarer)

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []
        self.inner.prepare(conf, context, collector)

    def execute(self, tup: Any) -> None:
        if self.held and self.box.get().get("release"):
            held, self.held = self.held, []
            for t in held:
                self.inner.execute(t)
        stream = tup.source_stream
        if stream.startswith("__"):
            self.inner.execute(tup)
            return
        bid = tup[0]
        if stream.startswith("$coord-") or stream == "$commit":
            record(self.journal, ("commit" if stream == "$commit" else "coord", bid[0], bid[1]))
        if bid[0] == self.hold and bid[1] == 0 and not self.box.get().get("release"):
            self.held.append(tup)
            return
        if stream == "$commit" and bid[1] == 0 and bid[0] in self.fail_commit:
            self.collector.fail(tup)
            return
        self.inner.execute(tup)

    def cleanup(self) -> None:
        self.inner.cleanup()


def coordinator_view(cluster: Any, name: str) -> dict[str, Any]:
    """The master coordinator's metric (its one task's)."""
    from tupletree.trident.planner import master_id

    (snap,) = cluster.metrics(name)[master_id("bg0")]["custom"]["trident"].values()
    return snap


# -- a partitioned source whose partitions can become unreadable --------------------


class _SeqCoordinator:
    """Ready for txids up to box["max_txid"] (so a zero emit interval stays finite)."""

    def __init__(self, box: Any, partitions: list[str]) -> None:
        self.box = box
        self.partitions = partitions

    def get_partitions_for_batch(self) -> list[str]:
        return list(self.partitions)

    def is_ready(self, txid: int) -> bool:
        return self.box is None or txid <= self.box.get().get("max_txid", 10**9)

    def close(self) -> None:
        pass


class _SeqEmitter:
    """Partition p holds records "p-0", "p-1", ... up to ``records``; a batch takes up
    to ``per_batch`` of each. A partition in box["unreadable"] cannot be read: a new
    batch takes nothing from it (the metadata stays), a re-emit of it raises."""

    def __init__(self, box: Any, records: int, per_batch: int, words: int = 0) -> None:
        self.box, self.records, self.per_batch, self.words = box, records, per_batch, words

    def get_ordered_partitions(self, info: Any) -> list[str]:
        return list(info)

    def get_partitions_for_task(self, index: int, tasks: int, ordered: list[str]) -> list[str]:
        return ordered[index::tasks]

    def refresh_partitions(self, mine: list[str]) -> None:
        pass

    def _unreadable(self, p: str) -> bool:
        return self.box is not None and p in self.box.get().get("unreadable", ())

    def emit_batch_new(self, tx: Any, collector: Any, partitions: Any, last: Any) -> dict:
        metas = {}
        for p in sorted(partitions):
            start = last[p]["next"] if last.get(p) else 0
            end = start if self._unreadable(p) else min(start + self.per_batch, self.records)
            for i in range(start, end):
                collector.emit([self.word(p, i)])
            metas[p] = {"first": start, "next": end}
        return metas

    def re_emit_partition_batch(self, tx: Any, collector: Any, p: str, meta: Any) -> None:
        if meta is None or meta["first"] == meta["next"]:
            return
        if self._unreadable(p):
            raise OSError(f"partition {p} is unavailable")
        for i in range(meta["first"], meta["next"]):
            collector.emit([self.word(p, i)])

    def word(self, p: str, i: int) -> str:
        """Record i of partition p: "p-i", or with ``words`` one of that many words."""
        if self.words:
            return f"w{(int(p[1:]) * 7 + i) % self.words}"
        return f"{p}-{i}"

    def close(self) -> None:
        pass


class _SeqBase:
    """``box`` None: always readable and ready (a spout that works in any process)."""

    def __init__(
        self, box: Any, partitions: int = 3, records: int = 10, per_batch: int = 2, words: int = 0
    ):
        self.box = box
        self.words = words
        self.partitions = [f"p{i}" for i in range(partitions)]
        self.records, self.per_batch = records, per_batch

    def get_coordinator(self, conf: Any, context: Any) -> Any:
        return _SeqCoordinator(self.box, self.partitions)

    def get_emitter(self, conf: Any, context: Any) -> Any:
        return _SeqEmitter(self.box, self.records, self.per_batch, self.words)

    def get_output_fields(self) -> Any:
        from tupletree import Fields

        return Fields("word")


from tupletree.trident.spout import (  # noqa: E402
    IOpaquePartitionedTridentSpout,
    IPartitionedTridentSpout,
)


class SeqTransactional(_SeqBase, IPartitionedTridentSpout):
    pass


class SeqOpaque(_SeqBase, IOpaquePartitionedTridentSpout):
    pass


def die_after_commit(state: Any, txid: int) -> Any:
    """``state`` whose commit of ``txid`` commits, then fails the batch: a worker dying
    between a state's commit and the coordinator's record of it."""
    inner = state.commit

    def commit(committed: Any) -> None:
        inner(committed)
        if committed == txid:
            raise FailedException(f"test: dying after the state committed txid {committed}")

    state.commit = commit
    return state
