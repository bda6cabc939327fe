"""Stateful topologies on LocalCluster (simulated time): the builder's wiring, the checks
at submit, acks held until COMMIT, and a stateful word count killed between PREPARE and
COMMIT and after COMMIT, then submitted again over the same store, on every provider and
in both checkpoint modes."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from tupletree import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from tupletree.errors import InvalidConfigError, InvalidTopologyError
from tupletree.state import (
    CHECKPOINT_COMPONENT,
    CHECKPOINT_STREAM,
    BasicCheckpointForwarder,
    CheckpointedSpout,
    CheckpointForwarder,
    CheckpointSpout,
    StatefulBolt,
    StatefulBoltExecutor,
)
from tupletree.state.protocol import COMMITTING, PREPARING
from tupletree.store.codec import loads_json
from tupletree.store.memory import forget
from tupletree.testing import AckFailTracker, FeederSpout
from tupletree.testing.shared import SharedList
from tupletree.topology.builder import validate_structure

from . import crash
from .components import (
    SplitWords,
    StatefulWordCount,
    StoreQueue,
    acked,
    committed,
    expected_counts,
    run_until,
    sentence,
    word_count,
)
from .conftest import Provider

# -- building ---------------------------------------------------------------------------


class Counting(StatefulBolt):
    outputs = ["word", "count"]


class Pass(Bolt):
    outputs = ["sentence", "msg"]


def test_builder_adds_the_checkpoint_spout_and_wraps_every_component():
    """Storm's TopologyBuilder for a topology with a stateful bolt: the checkpoint spout,
    every bolt forwarding $checkpoint (all-grouped from each component it reads), the
    stateful bolt wrapped; a BasicBolt with one upstream task stays a BasicBolt."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("pass", Pass(), 2).shuffle_grouping("source")
    b.set_bolt("split", SplitWords()).shuffle_grouping("source")
    b.set_bolt("split2", SplitWords()).shuffle_grouping("pass")
    b.set_bolt("count", Counting(), 2).fields_grouping("split", ["word"])
    topo = b.create_topology()
    kinds = {cid: type(spec.obj) for cid, spec in topo.components.items()}
    assert kinds == {
        "source": CheckpointedSpout,
        "pass": CheckpointForwarder,
        "split": BasicCheckpointForwarder,
        "split2": CheckpointForwarder,  # two upstream tasks: it may have to align
        "count": StatefulBoltExecutor,
        CHECKPOINT_COMPONENT: CheckpointSpout,
    }
    checkpoint_inputs = {
        cid: sorted(s.source for s in spec.inputs if s.stream == CHECKPOINT_STREAM)
        for cid, spec in topo.components.items()
        if not spec.is_spout
    }
    assert checkpoint_inputs == {
        "pass": [CHECKPOINT_COMPONENT, "source"],
        "split": [CHECKPOINT_COMPONENT, "source"],
        "split2": ["pass"],
        "count": ["split"],
    }
    assert all(
        s.grouping.kind == "all"
        for spec in topo.components.values()
        for s in spec.inputs
        if s.stream == CHECKPOINT_STREAM
    )
    assert topo.components[CHECKPOINT_COMPONENT].obj.spouts == ("source",)
    # Planning again (complete_topology validates a topology's specs again) changes nothing.
    again = validate_structure(list(topo.components.values()))
    assert {cid: type(spec.obj) for cid, spec in again.components.items()} == kinds
    assert len(again.components["count"].inputs) == 2


def test_a_topology_without_stateful_bolts_is_left_alone():
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("split", SplitWords()).shuffle_grouping("source")
    topo = b.create_topology()
    assert set(topo.components) == {"source", "split"}
    assert type(topo.components["split"].obj) is SplitWords


@pytest.mark.parametrize(
    "add",
    [
        lambda b, bolt: b.set_bolt("count", bolt),
        lambda b, bolt: b.set_bolt("count", bolt, 3),
        lambda b, bolt: b.set_bolt("count", bolt, parallelism=2, tasks=4),
        lambda b, bolt: b.set_bolt("count", bolt).set_num_tasks(3),
    ],
    ids=["no-parallelism", "parallelism", "tasks", "set_num_tasks"],
)
def test_a_stateful_bolt_never_becomes_a_normal_bolt(add):
    """STORM-1714: in Storm, setBolt without a parallelism hint took the IRichBolt
    overload and the stateful bolt ran as a normal one (no state, no checkpoints). Here
    every way of setting it wraps it, and one that reached validation unwrapped would be
    refused, not run: a StatefulBolt is not a Bolt."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    add(b, Counting()).shuffle_grouping("source")
    spec = b.create_topology().components["count"]
    assert isinstance(spec.obj, StatefulBoltExecutor)
    assert isinstance(spec.obj.delegate, Counting)
    assert not isinstance(Counting(), Bolt | BasicBolt)
    unplanned = TopologyBuilder()
    unplanned.set_bolt("count", Counting())
    spec = unplanned._specs[0]
    with pytest.raises(
        InvalidTopologyError, match="is a Counting, not a Bolt, BasicBolt or BatchBolt"
    ):
        _validate_unplanned([spec])


def _validate_unplanned(specs: list[Any]) -> None:
    """validate_structure with the plans taken away: what would run unwrapped."""
    import tupletree.topology.builder as builder

    original = builder.planned
    builder.planned = lambda specs: specs
    try:
        builder.validate_structure(specs)
    finally:
        builder.planned = original


def test_a_stateful_bolt_without_inputs_and_reserved_names_are_refused():
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("count", Counting())
    with pytest.raises(InvalidTopologyError, match="'count' has no inputs"):
        b.create_topology()

    class Reserved(Bolt):
        def declare_output_fields(self, declarer):
            declarer.declare_stream(CHECKPOINT_STREAM, ["x"])

    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("r", Reserved()).shuffle_grouping("source")
    b.set_bolt("count", Counting()).shuffle_grouping("source")
    with pytest.raises(InvalidTopologyError, match="'r' declares stream '\\$checkpoint'"):
        b.create_topology()

    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_spout(CHECKPOINT_COMPONENT, StoreQueue(1))
    b.set_bolt("count", Counting()).shuffle_grouping("source")
    with pytest.raises(InvalidTopologyError, match="reserved for the checkpoint spout"):
        b.create_topology()


# -- at submit ----------------------------------------------------------------------------


def simple() -> Any:
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("count", Counting()).shuffle_grouping("source")
    return b.create_topology()


@pytest.mark.parametrize(
    ("conf", "key", "words"),
    [
        (
            {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 30_000},
            Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL,
            "30000 ms, not below topology.message.timeout.secs (30 s)",
        ),
        (
            {Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50},
            Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL,
            "from 100",
        ),
        ({Config.TOPOLOGY_ACKER_EXECUTORS: 0}, Config.TOPOLOGY_ACKER_EXECUTORS, "is 0"),
        (
            {Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": "x.db"}},
            Config.TOPOLOGY_STATE_PROVIDER,
            "the memory store takes no ['path']",
        ),
        (
            {Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned"},
            Config.TOPOLOGY_STATE_CHECKPOINT_MODE,
            None,
        ),
    ],
    ids=["interval-vs-timeout", "interval-floor", "no-ackers", "provider-config", "aligned-ok"],
)
def test_config_is_checked_at_submit(sim_cluster, conf, key, words):
    """The interval must be below the message timeout; acking on; the provider's config
    known to it. (StoreQueue can rewind, so the aligned mode is accepted.)"""
    if words is None:
        sim_cluster.submit_topology("ok", conf, simple())
        return
    with pytest.raises(InvalidConfigError) as err:
        sim_cluster.submit_topology("bad", conf, simple())
    assert err.value.key == key and words in str(err.value)


ALIGNED = {Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned"}


def test_aligned_mode_without_max_spout_pending_warns_at_submit(sim_cluster):
    """Unset, the spouts fill every queue and each checkpoint step waits behind them:
    under load any data timeout refuses the checkpoint and the topology may commit
    nothing again (docs/state.md, Costs). Submit says so, naming the topology, its
    spout and the setting; the topology still runs."""
    with pytest.warns(UserWarning) as caught:
        sim_cluster.submit_topology("unbounded", dict(ALIGNED), simple())
    texts = [str(w.message) for w in caught if "max.spout.pending" in str(w.message)]
    assert len(texts) == 1, [str(w.message) for w in caught]
    text = texts[0]
    assert "'unbounded'" in text and "'source'" in text
    assert Config.TOPOLOGY_MAX_SPOUT_PENDING in text
    assert Config.TOPOLOGY_STATE_CHECKPOINT_MODE in text and "aligned" in text
    assert caught[0].filename == __file__  # points at the submit_topology call
    assert "unbounded" in sim_cluster.topologies()


def _no_pending_warning(cluster: Any, name: str, conf: dict[str, Any], topology: Any) -> None:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cluster.submit_topology(name, conf, topology)
    assert [str(w.message) for w in caught if "max.spout.pending" in str(w.message)] == []


@pytest.mark.parametrize(
    "conf",
    [
        {**ALIGNED, Config.TOPOLOGY_MAX_SPOUT_PENDING: 1000},
        {},
        {Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "storm"},
    ],
    ids=["aligned-with-pending", "default-mode", "storm-mode"],
)
def test_no_max_spout_pending_warning_when_set_or_not_aligned(sim_cluster, conf):
    _no_pending_warning(sim_cluster, "quiet", conf, simple())


def test_no_max_spout_pending_warning_when_every_spout_sets_its_own(sim_cluster):
    """Max spout pending is read per spout: a spout's own setting counts."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1)).set_max_spout_pending(100)
    b.set_bolt("count", Counting()).shuffle_grouping("source")
    _no_pending_warning(sim_cluster, "own", dict(ALIGNED), b.create_topology())


def test_no_max_spout_pending_warning_without_a_stateful_bolt(sim_cluster):
    """The mode means nothing to a topology with no stateful bolt: nothing checkpoints."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("split", SplitWords()).shuffle_grouping("source")
    _no_pending_warning(sim_cluster, "plain", dict(ALIGNED), b.create_topology())


def test_aligned_mode_refuses_a_spout_that_cannot_rewind(sim_cluster):
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["sentence", "msg"]))
    b.set_bolt("count", Counting()).shuffle_grouping("feed")
    with pytest.raises(InvalidConfigError, match="'feed' \\(FeederSpout\\) cannot rewind"):
        sim_cluster.submit_topology(
            "x", {Config.TOPOLOGY_STATE_CHECKPOINT_MODE: "aligned"}, b.create_topology()
        )


# -- running ------------------------------------------------------------------------------


def test_acks_are_held_until_the_checkpoint_commits(sim_cluster):
    """Inputs are processed at once but acked only when the checkpoint that includes
    them commits (the next one, a second later)."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["sentence", "msg"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("split", SplitWords()).shuffle_grouping("feed")
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("split", ["word"])
    sim_cluster.submit_topology("wc", {}, b.create_topology())
    assert sim_cluster.wait_idle()  # INITSTATE, then checkpoint 0
    for i in range(5):
        feeder.feed([" ".join(sentence(i)), i], msg_id=i)
    assert sim_cluster.wait_idle()
    assert sim_cluster.metrics("wc")["count"]["executed"] > 5
    assert tracker.acked == set()
    sim_cluster.advance_time(1)
    assert tracker.acked == set(range(5)) and tracker.failed == set()


class Unanchored(Bolt):
    outputs = ["sentence", "msg"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit(tup.values)


def test_unanchored_emit_in_a_forwarding_bolt_is_reported_naming_it(sim_cluster):
    tracker = AckFailTracker()
    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["sentence", "msg"], tracker=tracker))
    b.set_bolt("loose", Unanchored()).shuffle_grouping("feed")
    b.set_bolt("count", Counting()).shuffle_grouping("loose")
    topo = b.create_topology()
    feeder = topo.components["feed"].obj.delegate
    sim_cluster.submit_topology("loose", {}, topo)
    feeder.feed(["a", 1], msg_id=1)
    sim_cluster.advance_time(1)
    errors = sim_cluster.errors("loose")
    assert any("'loose' emitted an unanchored tuple on stream 'default'" in e for e in errors)
    assert tracker.failed == {1}


def all_acked(provider: Provider, n: int, sources: int = 1) -> Any:
    store = provider.open()
    return lambda: acked(store, sources) == n


def test_word_count_commits_exact_counts(provider: Provider, sim_cluster):
    """No failure: every word counted once, on every provider."""
    n = 40
    conf = {**provider.conf, Config.TOPOLOGY_MAX_SPOUT_PENDING: 10}
    sim_cluster.submit_topology("wc", conf, word_count(n))
    run_until(sim_cluster, all_acked(provider, n), "all acked")
    state = committed(provider.open())
    applied = {k: v for k, v in state.items() if isinstance(k, tuple)}
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    assert counts == expected_counts(n)
    assert set(applied.values()) == {1}


POINTS = {
    # Every count task prepared txid 2; the checkpoint spout still says PREPARING(2).
    "after-prepare": (lambda: crash.txid_written("count", "prepare", 2, tasks=2), PREPARING),
    # The checkpoint spout saved COMMITTING(2); no bolt committed yet.
    "committing": (lambda: crash.checkpoint_saved(COMMITTING, 2), COMMITTING),
    # Every count task committed txid 2; their inputs' acks have not reached the source.
    "after-commit": (lambda: crash.txid_written("count", "commit", 2, tasks=2), COMMITTING),
}


@pytest.mark.parametrize("mode", ["storm", "aligned"])
@pytest.mark.parametrize("point", sorted(POINTS))
def test_word_count_killed_and_submitted_again(
    provider: Provider, monkeypatch: pytest.MonkeyPatch, point: str, mode: str
) -> None:
    """Kill the word count at ``point`` (its stores keep exactly what was written until
    then) and submit it again over the same store. The state rolls back to the last
    commit (or commits what the checkpoint spout had decided to commit), the inputs whose
    acks were held come again, and:

    - aligned mode: every input's effect is in the state exactly once;
    - Storm's mode: the counts exceed the true ones by exactly the inputs applied twice,
      and those are inputs that were delivered again; killed once the commit was decided
      or done, some are (their effect was committed, their acks never reached the
      source: Storm's documented at-least-once gap); killed before, none."""
    crash.install(monkeypatch)
    n = 100
    crashed = crash.Crash(POINTS[point][0]())
    deliveries = SharedList("deliveries")
    base = {
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 10,
        Config.TOPOLOGY_STATE_CHECKPOINT_MODE: mode,
    }
    with LocalCluster(simulate_time=True) as cluster:
        conf = {**base, **provider.conf}
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = crashed.config(provider.config)
        cluster.submit_topology("wc", conf, word_count(n, deliveries, sources=2))
        run_until(cluster, lambda: crashed.crashed, f"crashed at {point}", limit=30)
        cluster.kill_topology("wc")
    store = provider.open()
    (left,) = store.get("$checkpointspout-0", ["__state"])
    assert POINTS[point][1] in left.decode()
    first_life = Counter(deliveries.items())
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology(
            "wc", {**base, **provider.conf}, word_count(n, deliveries, sources=2)
        )
        run_until(cluster, all_acked(provider, n, 2), "all acked after the restart")
        cluster.advance_time(3)  # checkpoints go on, with nothing new to commit
        assert cluster.errors("wc") == []
    (final,) = store.get("$checkpointspout-0", ["__state"])
    assert loads_json(final)["txid"] > 3
    delivered = Counter(deliveries.items())
    replayed = {i for i in range(n) if delivered[i] > 1}
    if mode == "storm" or point == "after-prepare":
        # Storm's mode: what the stateful bolts held was acked nowhere. Aligned, rolled
        # back: the spout rewinds to checkpoint 1, before what checkpoint 2 had.
        assert replayed, "nothing held was delivered again: the kill missed"
    assert replayed <= set(first_life)
    state = committed(store)
    applied = {k[1:]: v for k, v in state.items() if isinstance(k, tuple)}
    counts = {k: v for k, v in state.items() if not isinstance(k, tuple)}
    assert set(applied) == {(i, p) for i in range(n) for p in range(len(sentence(i)))}
    twice = {(i, p) for (i, p), v in applied.items() if v == 2}
    assert set(applied.values()) <= {1, 2}
    excess = Counter(sentence(i)[p] for i, p in twice)
    expected = Counter(expected_counts(n))
    assert Counter(counts) == expected + excess
    assert {i for i, _ in twice} <= replayed
    if mode == "aligned" or point == "after-prepare":
        assert twice == set(), f"applied twice in {mode} mode: {sorted(twice)}"
    else:
        # Storm's mode, killed once checkpoint 2 was decided (COMMITTING saved, so the
        # recovery commits it) or committed: the inputs it held were acked nowhere, so
        # the source sends them again and they are applied a second time.
        assert twice, "Storm's mode killed after the commit decision: its held acks were lost"


def test_state_is_found_by_task_index_when_other_components_change_their_tasks(
    provider: Provider,
):
    """State is kept per ``<component>-<task index>``: a topology submitted again with
    another component's task count changed (which moves every global task id after it,
    as a rebalance of that component would) finds each count task's committed state."""
    n = 30
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", provider.conf, word_count(n, sources=1))
        run_until(cluster, all_acked(provider, n), "all acked")
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(2 * n))  # n more messages on top of the first n
    # "a-split" sorts before "count": with 3 tasks it moves count's global task ids.
    b.set_bolt("a-split", SplitWords(), 3).shuffle_grouping("source")
    b.set_bolt("count", StatefulWordCount(), 2).fields_grouping("a-split", ["word"])
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("wc", provider.conf, b.create_topology())
        assert cluster._workers["wc"].layout.component_to_tasks["count"] == [6, 7]  # was [3, 4]
        run_until(cluster, all_acked(provider, 2 * n), "all acked")
        assert cluster.errors("wc") == []
    counts = {k: v for k, v in committed(provider.open()).items() if not isinstance(k, tuple)}
    assert counts == expected_counts(2 * n)


class GeneratorCount(StatefulBolt):
    def execute(self, tup):
        yield tup


class AsyncHook(StatefulBolt):
    async def pre_commit(self, txid):
        pass


@pytest.mark.parametrize("bolt", [GeneratorCount(), AsyncHook()], ids=["execute", "hook"])
def test_a_stateful_bolt_whose_methods_would_not_run_is_refused(bolt):
    """A generator execute or an async hook would run none of its body: refused when
    the topology is built, naming the component and the method."""
    b = TopologyBuilder()
    b.set_spout("source", StoreQueue(1))
    b.set_bolt("count", bolt).shuffle_grouping("source")
    with pytest.raises(InvalidTopologyError, match=r"'count'.*(execute|pre_commit)"):
        b.create_topology()


def test_a_rebalance_drains_a_stateful_topology_without_timeouts(tmp_path):
    """A rebalance deactivates the topology and waits for the trees in flight; stateful
    bolts hold theirs until a checkpoint commits, so the checkpoint spout goes on while
    deactivated: the trees complete, none times out (with a rebalance allowed three
    message timeouts), and the count task's state is found on the new layout."""
    provider = Provider("sqlite", {"path": str(tmp_path / "state.db")})
    n = 150
    conf = {
        **provider.conf,
        Config.TOPOLOGY_MAX_SPOUT_PENDING: 20,
        Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3,
        Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 200,
    }
    store = provider.open()
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", conf, word_count(n))
        until = time.monotonic() + 60
        while acked(store) < n // 3:
            assert time.monotonic() < until
            time.sleep(0.05)
        cluster.rebalance("wc", wait_secs=9, parallelism={"count": 1})
        while acked(store) < n:
            assert time.monotonic() < until
            time.sleep(0.05)
        spout = cluster.metrics("wc")["source"]
        assert spout["timed_out"] == 0 and spout["failed"] == 0
        assert cluster.errors("wc") == []
    counts = {k: v for k, v in committed(store).items() if not isinstance(k, tuple)}
    assert counts == expected_counts(n)


def test_complete_topology_runs_a_stateful_topology_with_mocked_sources(sim_cluster):
    """complete_topology's stand-in for a mocked spout is wrapped as the plan wrapped
    the spout, so the $checkpoint wiring holds and the stateful count runs."""
    from tupletree.testing import MockedSources, complete_topology, read_tuples

    results = complete_topology(
        sim_cluster, word_count(5), MockedSources({"source": [["a b", 0], ["b c", 1]]})
    )
    assert sorted(read_tuples(results, "count")) == [["a", 1], ["b", 1], ["b", 2], ["c", 1]]
    assert results.acked["source"] == {0, 1}


def test_two_stateful_topologies_on_one_store_are_told_to_use_a_store_each(sim_cluster):
    """Distinct component ids, one store: both checkpoint spouts keep their progress in
    ``$checkpointspout-0`` and refuse each other's writes. The error says why and what to
    do (it blamed a second instance of the spout, which there is not)."""
    name = f"two-topologies-{uuid.uuid4().hex}"
    conf = {
        Config.TOPOLOGY_STATE_PROVIDER: "memory",
        Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"name": name},
    }
    try:
        for topology in ("first", "second"):
            b = TopologyBuilder()
            b.set_spout(f"{topology}-feed", FeederSpout(["word", "msg", "pos"]))
            b.set_bolt(f"{topology}-count", StatefulWordCount()).shuffle_grouping(
                f"{topology}-feed"
            )
            sim_cluster.submit_topology(topology, conf, b.create_topology())
            sim_cluster.advance_time(3)
        errors = sim_cluster.errors("first") + sim_cluster.errors("second")
        assert errors, "two topologies shared one checkpoint progress unnoticed"
        assert all("another stateful topology uses the same store" in e for e in errors)
        assert all("distinct prefix" in e for e in errors)
    finally:
        forget(name)


class CountWords(StatefulBolt):
    """state[word] = ``value(word)`` (a count), each input acked."""

    outputs: list[str] = []

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state

    def value(self, word):
        return self.state.get(word, 0) + 1

    def execute(self, tup):
        self.state.put(tup[0], self.value(tup[0]))
        self.collector.ack(tup)


def test_a_key_too_long_fails_its_own_input_not_the_checkpoint(sim_cluster):
    """A key the store refuses failed the PREPARE, so every input of that checkpoint was
    failed with it; refused at put, only the input that made it fails."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["word"], tracker=tracker)
    b = TopologyBuilder()
    b.set_spout("feed", feeder)
    b.set_bolt("count", CountWords()).shuffle_grouping("feed")
    sim_cluster.submit_topology("wc", {}, b.create_topology())
    feeder.feed(["short"], msg_id="short")
    feeder.feed(["x" * 5000], msg_id="long")
    sim_cluster.advance_time(3)
    assert tracker.acked == {"short"} and tracker.failed == {"long"}
    (error,) = sim_cluster.errors("wc")
    assert "state 'count-0': key 'xxx" in error and "over the store's 4096" in error


class ReplayingWords(Spout):
    """Emits ``words`` once each (msg id: the index), a failed one again a second later on
    the cluster's clock; counts acks in a journal."""

    outputs = ["word"]

    def __init__(self, words: list[str], acked: SharedList) -> None:
        self.words = words
        self.acked = acked

    def open(self, conf, context, collector):
        self.collector, self.now = collector, context.now
        self.todo = list(range(len(self.words)))
        self.later: list[tuple[float, int]] = []

    def next_tuple(self):
        now = self.now()
        self.todo += [i for at, i in self.later if at <= now]
        self.later = [(at, i) for at, i in self.later if at > now]
        if self.todo:
            i = self.todo.pop(0)
            self.collector.emit([self.words[i]], msg_id=i)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.later.append((self.now() + 1, msg_id))


class KeepsWhatItGets(CountWords):
    """state[word] = a lock (which cannot be saved) for "lock", else 1."""

    def value(self, word):
        return threading.Lock() if word == "lock" else 1


def test_one_unsaveable_value_does_not_stop_every_other_input(sim_cluster):
    """A value that cannot be pickled failed every PREPARE it reached, and with it every
    input of the interval, at each replay: nothing was ever acked. Now its key is checked
    at put after the first failure, so only that input keeps failing."""
    acked = SharedList(f"acked-{uuid.uuid4().hex}")
    words = [f"w{i}" for i in range(20)]
    words[5] = "lock"
    b = TopologyBuilder()
    b.set_spout("words", ReplayingWords(words, acked))
    b.set_bolt("keep", KeepsWhatItGets()).shuffle_grouping("words")
    sim_cluster.submit_topology("keep", {}, b.create_topology())
    sim_cluster.advance_time(10)
    assert set(acked.items()) == set(range(20)) - {5}
    assert all("cannot save the value of key 'lock'" in e for e in sim_cluster.errors("keep"))
