"""Components of the stateful test topologies: a durable numbered source whose progress
lives in the state store (so a topology submitted again over the same store goes on where
the last one stopped, in both checkpoint modes), a split that says where each word came
from, and a stateful word count that also records how often each input word was applied.

Kept apart from the tests so SparkCluster ships them by value to its workers."""

from __future__ import annotations

from collections import deque
from typing import Any

from tupletree import BasicBolt, TopologyBuilder
from tupletree.state import StatefulBolt
from tupletree.state.provider import open_state_store
from tupletree.store import Put
from tupletree.testing.shared import SharedList
from tupletree.topology.components import Spout
from tupletree.windowing import StatefulWindowedBolt

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]


def sentence(i: int) -> list[str]:
    """Message ``i``'s words: 1 to 4 of them, deterministic."""
    return [WORDS[(i * 5 + j * 2) % len(WORDS)] for j in range(1 + i % 4)]


def expected_counts(n: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(n):
        for w in sentence(i):
            counts[w] = counts.get(w, 0) + 1
    return counts


class StoreQueue(Spout):
    """Messages ``0 .. n-1`` (task k of p takes those with ``i % p == k``), emitted as
    (sentence, i) with message id i. Acked ids are kept in the state store (namespace
    ``source-<task index>``): a new instance emits only the unacked ones, and a failed
    one again (Storm's mode). It can rewind (the aligned mode): ``position()`` is how
    many of its messages it emitted, ``rewind(p)`` goes back there. ``deliveries``
    records every emit's id (a SharedList the test reads)."""

    outputs = ["sentence", "msg"]

    def __init__(self, n: int, deliveries: SharedList | None = None) -> None:
        self.n = n
        self.deliveries = deliveries

    def open(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.store = open_state_store(conf)
        index = context.this_task_index
        tasks = len(context.this_component_tasks())
        self.ns = f"source-{index}"
        acked = {int(k) for k, _ in self.store.items(self.ns)}
        self.mine = [i for i in range(self.n) if i % tasks == index]
        self.todo = deque(i for i in self.mine if i not in acked)
        self.cursor: int | None = None  # set by rewind: the aligned mode's order

    def next_tuple(self) -> None:
        if self.cursor is not None:
            if self.cursor >= len(self.mine):
                return
            i = self.mine[self.cursor]
            self.cursor += 1
        elif self.todo:
            i = self.todo.popleft()
        else:
            return
        if self.deliveries is not None:
            self.deliveries.append(i)
        self.collector.emit([" ".join(sentence(i)), i], msg_id=i)

    def ack(self, msg_id: int) -> None:
        self.store.apply([Put(self.ns, str(msg_id), b"1")])

    def fail(self, msg_id: int) -> None:
        self.todo.appendleft(msg_id)

    def position(self) -> int:
        return self.cursor or 0

    def committed(self, position: int) -> None:
        """The aligned mode: everything before ``position`` is in committed state."""
        done = [Put(self.ns, str(i), b"1") for i in self.mine[:position]]
        if done:
            self.store.apply(done)

    def rewind(self, position: int | None) -> None:
        self.cursor = position or 0

    def close(self) -> None:
        self.store.close()


class SplitWords(BasicBolt):
    """(sentence, msg) -> (word, msg, position) for each word."""

    outputs = ["word", "msg", "pos"]

    def execute(self, tup: Any, collector: Any) -> None:
        for pos, word in enumerate(tup[0].split()):
            collector.emit([word, tup[1], pos])


class StatefulWordCount(StatefulBolt):
    """counts[word] += 1, and applied[(msg, pos)] += 1: how many times each input word's
    effect is in the state (1 when exactly once)."""

    outputs = ["word", "count"]

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, tup: Any) -> None:
        word, msg, pos = tup.values
        n = self.state.get(word, 0) + 1
        self.state.put(word, n)
        key = ("applied", msg, pos)
        self.state.put(key, self.state.get(key, 0) + 1)
        self.collector.emit([word, n], anchors=tup)
        self.collector.ack(tup)


def run_until(cluster: Any, done: Any, what: str, limit: int = 120) -> None:
    """Advance a simulated-time cluster a second at a time until ``done()``; raise,
    naming ``what``, after ``limit`` seconds."""
    for _ in range(limit):
        if done():
            return
        cluster.advance_time(1)
    raise AssertionError(f"not {what} after {limit} simulated seconds")


def word_count(
    n: int, deliveries: SharedList | None = None, counters: int = 2, sources: int = 1
) -> Any:
    """source (``sources`` tasks) -> split (as many) -> count (``counters`` tasks)."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(n, deliveries), sources)
    b.set_bolt("split", SplitWords(), sources).shuffle_grouping("source")
    b.set_bolt("count", StatefulWordCount(), counters).fields_grouping("split", ["word"])
    return b.create_topology()


def acked(store: Any, sources: int = 1) -> int:
    """How many messages the sources have acked (all their tasks)."""
    return sum(len(list(store.items(f"source-{i}"))) for i in range(sources))


def committed(provider_store: Any, component: str = "count", tasks: int = 2) -> dict[Any, Any]:
    """The committed state of every task of ``component``, merged."""
    from tupletree.state.kv import KeyValueState

    merged: dict[Any, Any] = {}
    for index in range(tasks):
        state = KeyValueState(provider_store, f"{component}-{index}")
        state._prepared = {}  # only what is committed
        merged.update(dict(state))
    return merged


class SelfKillingWordCount(StatefulWordCount):
    """StatefulWordCount whose worker process SIGKILLs itself at chosen checkpoint
    hooks: ``kills`` lists (hook name, txid); each happens once in the whole topology
    (the first task to reach it creates a flag file in ``flags``, exclusively)."""

    def __init__(self, flags: str, kills: list[tuple[str, int]]) -> None:
        self.flags = flags
        self.kills = kills

    def _maybe_die(self, hook: str, txid: int) -> None:
        import os
        import signal

        if (hook, txid) not in self.kills:
            return
        try:
            fd = os.open(os.path.join(self.flags, f"{hook}-{txid}"), os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    def pre_prepare(self, txid: int) -> None:
        self._maybe_die("pre_prepare", txid)

    def pre_commit(self, txid: int) -> None:
        self._maybe_die("pre_commit", txid)


def self_killing_word_count(
    n: int, deliveries: SharedList, flags: str, kills: list[tuple[str, int]], sources: int = 2
) -> Any:
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(n, deliveries), sources)
    b.set_bolt("split", SplitWords(), sources).shuffle_grouping("source")
    b.set_bolt("count", SelfKillingWordCount(flags, kills), 2).fields_grouping("split", ["word"])
    return b.create_topology()


def check_counts(store: Any, n: int, delivered: dict[int, int], exact: bool) -> set[Any]:
    """Assert what a word count's committed state says after kills: every input word
    applied once (``exact``), or at least once and at most as often as its input was
    delivered, the counts exceeding the true ones by exactly the extra applications.
    Returns the (input, position) pairs applied more than once."""
    from collections import Counter

    state = committed(store)
    applied = {k[1:]: v for k, v in state.items() if isinstance(k, tuple)}
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    assert set(applied) == {(i, p) for i in range(n) for p in range(len(sentence(i)))}
    over = {(i, p): v for (i, p), v in applied.items() if not 1 <= v <= delivered.get(i, 1)}
    assert not over, f"applied more often than delivered: {sorted(over.items())[:10]}"
    again = {(i, p): v - 1 for (i, p), v in applied.items() if v > 1}
    excess: Counter[str] = Counter()
    for (i, p), extra in again.items():
        excess[sentence(i)[p]] += extra
    assert Counter(counts) == Counter(expected_counts(n)) + excess
    if exact:
        assert not again, f"applied more than once: {sorted(again)[:10]}"
    return set(again)


class RaisesOnceCount(StatefulWordCount):
    """StatefulWordCount that fails the first word of each message in ``bad`` once (a
    transient error), after or before it changed the state (``when``: "before-put",
    "after-put"), or by calling ``fail`` on it ("fail-call")."""

    def __init__(self, bad: Any, raised: SharedList, when: str) -> None:
        self.bad, self.raised, self.when = set(bad), raised, when

    def execute(self, tup: Any) -> None:
        word, msg, pos = tup.values
        if msg in self.bad and pos == 0 and msg not in self.raised.items():
            self.raised.append(msg)
            if self.when == "fail-call":
                self.collector.fail(tup)
                return
            if self.when == "after-put":
                self.state.put(word, self.state.get(word, 0) + 1)
            raise RuntimeError(f"transient failure on message {msg}")
        super().execute(tup)


class BufferedWordCount(StatefulWordCount):
    """A word count that also keeps a buffer of its own, made in init_state and dropped
    in pre_prepare and pre_rollback, as docs/state.md suggests for what a bolt keeps
    outside its KeyValueState."""

    def init_state(self, state: Any) -> None:
        super().init_state(state)
        self.buffer: list[Any] = []

    def execute(self, tup: Any) -> None:
        self.buffer.append(tup.values[0])
        super().execute(tup)

    def pre_prepare(self, txid: int) -> None:
        self.buffer.clear()

    def pre_rollback(self) -> None:
        self.buffer.clear()


class ApplyWindow(StatefulWindowedBolt):
    """A window over (sentence, msg) tuples: applied[msg] += 1 in the state for each
    tuple of each window (1 for every msg when exactly once). ``poison``: execute raises
    the first time a window holds that msg (``raised`` records it)."""

    outputs = ["n"]

    def __init__(self, poison: int | None = None, raised: SharedList | None = None) -> None:
        self.poison = poison
        self.raised = raised

    def init_state(self, state: Any) -> None:
        self.state = state

    def execute(self, window: Any) -> None:
        msgs = [t[1] for t in window.iter()]
        if self.poison in msgs and self.raised is not None and not self.raised.items():
            self.raised.append(self.poison)
            raise RuntimeError(f"transient failure in the window of {self.poison}")
        for msg in msgs:
            key = ("applied", msg)
            self.state.put(key, self.state.get(key, 0) + 1)


class RaisesOnceSplit(SplitWords):
    """SplitWords that raises once for each message in ``bad``, before emitting."""

    def __init__(self, bad: Any, raised: SharedList) -> None:
        self.bad, self.raised = set(bad), raised

    def execute(self, tup: Any, collector: Any) -> None:
        msg = tup[1]
        if msg in self.bad and msg not in self.raised.items():
            self.raised.append(msg)
            raise RuntimeError(f"transient failure splitting message {msg}")
        super().execute(tup, collector)
