"""Topology structure: what create_topology / submit_topology reject (naming the
offender), and what every grouping, stream and emit variant delivers where."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from typing import Any

import pytest

from tupletree import (
    BasicBolt,
    Bolt,
    Config,
    InvalidTopologyError,
    LocalCluster,
    Spout,
    TopologyBuilder,
)
from tupletree.testing import (
    AckFailTracker,
    FeederSpout,
    MockedSources,
    complete_topology,
    read_tuples,
)
from tupletree.topology.groupings import CustomStreamGrouping

from .registry import entries, new_journal, record

CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}

WORDS = [
    [w]
    for w in [
        "nathan",
        "bob",
        "joey",
        "nathan",
        "apple",
        "pear",
        "plum",
        "nathan",
        "kiwi",
        "fig",
        "lime",
        "bob",
        "date",
        "lemon",
        "grape",
        "melon",
        "peach",
        "cherry",
        "apple",
        "nathan",
        "mango",
        "papaya",
        "guava",
        "bob",
        "quince",
    ]
]


def multiset(rows: list[list[Any]]) -> Counter:
    return Counter(tuple(r) for r in rows)


def run_complete(builder: TopologyBuilder, sources: dict[str, list[list[Any]]]) -> Any:
    with LocalCluster(simulate_time=True) as cluster:
        return complete_topology(
            cluster,
            builder.create_topology(),
            mocked_sources=MockedSources(sources),
            conf=CONF,
        )


# -- components -----------------------------------------------------------------------


class WordSpout(Spout):
    """Declares ["word"] (replaced by mocked sources when run)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class PairSpout(Spout):
    outputs = ["a", "b"]


class DirectWordSpout(Spout):
    """Declares a direct stream "to_task"."""

    def declare_output_fields(self, declarer):
        declarer.declare_stream("to_task", ["word"], direct=True)


class PassBolt(BasicBolt):
    outputs = ["word"]

    def execute(self, tup, collector):
        collector.emit([tup[0]])


class TaskTagBolt(BasicBolt):
    """Emits [first value, its task id, its component's sorted task ids]."""

    outputs = ["key", "task", "tasks"]

    def prepare(self, conf, context):
        self.task = context.task_id
        self.tasks = context.this_component_tasks()

    def execute(self, tup, collector):
        key = tup[0] if len(tup) == 1 else tuple(tup.values)
        collector.emit([key, self.task, list(self.tasks)])


class LockHolderBolt(Bolt):
    def __init__(self) -> None:
        self.lock = threading.Lock()


class LambdaHolderBolt(Bolt):
    def __init__(self) -> None:
        self.fn = lambda x: x + 1


class FirstAndLastGrouping(CustomStreamGrouping):
    """Sends every tuple to the first and the last target task."""

    def prepare(self, context, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, task_id, values):
        return [self.targets[0], self.targets[-1]]


class ListSpout(Spout):
    """Emits each of ``words`` once with msg id = index, recording what emit returned."""

    def __init__(self, words: list[str], journal: str) -> None:
        self.words = words
        self.journal = journal

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.i = 0

    def next_tuple(self):
        if self.i < len(self.words):
            word = self.words[self.i]
            returned = self.collector.emit([word], msg_id=self.i)
            record(self.journal, (word, sorted(returned)))
            self.i += 1

    def ack(self, msg_id):
        record(self.journal, ("ack", msg_id))


class RelayBolt(Bolt):
    """Re-emits its input anchored, recording the task ids emit returned."""

    outputs = ["word"]

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        returned = self.collector.emit([tup[0]], anchors=tup)
        record(self.journal, (tup[0], sorted(returned)))
        self.collector.ack(tup)


class WhereBolt(Bolt):
    """Records (first value, own task id) and acks."""

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.task = context.task_id

    def execute(self, tup):
        record(self.journal, (tup[0], self.task))
        self.collector.ack(tup)


class DirectSpout(Spout):
    """Emits each word with emit_direct to sink task #(index % n) on stream "to_task"."""

    def __init__(self, words: list[str], journal: str) -> None:
        self.words = words
        self.journal = journal

    def declare_output_fields(self, declarer):
        declarer.declare_stream("to_task", ["word", "target"], direct=True)

    def open(self, conf, context, collector):
        self.collector = collector
        self.targets = context.component_tasks("sink")
        self.i = 0

    def next_tuple(self):
        if self.i < len(self.words):
            target = self.targets[self.i % len(self.targets)]
            returned = self.collector.emit_direct(
                target, [self.words[self.i], target], msg_id=self.i, stream="to_task"
            )
            record(self.journal, ("spout", self.words[self.i], target, list(returned)))
            self.i += 1

    def ack(self, msg_id):
        record(self.journal, ("ack", msg_id))


class DirectSinkBolt(Bolt):
    """Records where a direct tuple landed, then forwards it with emit_direct to task
    #(len(word) % n) of "sink2"."""

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def declare_output_fields(self, declarer):
        declarer.declare_stream("onward", ["word", "target"], direct=True)

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.task = context.task_id
        self.targets = context.component_tasks("sink2")

    def execute(self, tup):
        word, target = tup[0], tup[1]
        record(self.journal, ("sink", word, target, self.task))
        onward = self.targets[len(word) % len(self.targets)]
        returned = self.collector.emit_direct(onward, [word, onward], anchors=tup, stream="onward")
        record(self.journal, ("bolt", word, onward, list(returned)))
        self.collector.ack(tup)


class DirectSink2Bolt(Bolt):
    def __init__(self, journal: str) -> None:
        self.journal = journal

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.task = context.task_id

    def execute(self, tup):
        record(self.journal, ("sink2", tup[0], tup[1], self.task))
        self.collector.ack(tup)


class StreamSplitBolt(BasicBolt):
    """Words starting with "bad" go to stream "errs", the rest to "default"."""

    def declare_output_fields(self, declarer):
        declarer.declare(["w"])
        declarer.declare_stream("errs", ["e"])

    def execute(self, tup, collector):
        word = tup[0]
        if word.startswith("bad"):
            collector.emit([word], stream="errs")
        else:
            collector.emit([word])


class StreamTagBolt(BasicBolt):
    outputs = ["stream", "value"]

    def execute(self, tup, collector):
        collector.emit([tup.source_stream, tup[0]])


class InspectBolt(BasicBolt):
    """Emits what the Tuple accessors say about its input."""

    outputs = ["component", "stream", "task", "get", "item", "len", "fields", "values"]

    def prepare(self, conf, context):
        self.spout_tasks = context.component_tasks("words")

    def execute(self, tup, collector):
        collector.emit(
            [
                tup.source_component,
                tup.source_stream,
                [tup.source_task, sorted(self.spout_tasks)],
                tup.get("word"),
                tup[0],
                len(tup),
                list(tup.fields),
                list(tup.values),
            ]
        )


class ContextRecorderBolt(BasicBolt):
    """Records what its TopologyContext says in prepare."""

    outputs = ["word"]

    def __init__(self, journal: str) -> None:
        self.journal = journal

    def prepare(self, conf, context):
        record(
            self.journal,
            {
                "task": context.task_id,
                "component": context.component_id,
                "mine": context.this_component_tasks(),
                "spout": context.component_tasks("words"),
                "targets": sorted(context.targets()),
            },
        )

    def execute(self, tup, collector):
        collector.emit([tup[0]])


class ConfRecorderBolt(Bolt):
    """Records selected conf values seen in prepare."""

    def __init__(self, journal: str, keys: list[str]) -> None:
        self.journal = journal
        self.keys = keys

    def prepare(self, conf, context, collector):
        record(self.journal, {k: conf.get(k) for k in self.keys})


class OutputsAttrSpout(Spout):
    outputs = ["word"]


class OutputsAttrBolt(BasicBolt):
    outputs = ["word", "n"]

    def execute(self, tup, collector):
        collector.emit([tup.get("word"), 1])


class NoOutputsBolt(BasicBolt):
    outputs: list[str] = []

    def execute(self, tup, collector):
        pass


# -- rejected structures --------------------------------------------------------------


def test_unknown_component_is_rejected():
    """Subscribing to a component that does not exist raises, naming it."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("counter", PassBolt()).shuffle_grouping("wrods")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert "wrods" in str(info.value)
    assert "counter" in str(info.value)
    assert info.value.component in ("counter", "wrods")
    assert info.value.field is None


def test_unknown_stream_is_rejected():
    """Subscribing to a stream the source does not declare raises, naming the stream."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("counter", PassBolt()).shuffle_grouping("words", stream="nostream")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert "nostream" in str(info.value)
    assert info.value.stream == "nostream"
    assert info.value.field is None


@pytest.mark.parametrize("grouping", ["fields_grouping", "partial_key_grouping"])
def test_unknown_grouping_field_is_rejected(grouping):
    """Fields / partial-key grouping on a field the stream lacks raises, naming it."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    getattr(b.set_bolt("counter", PassBolt()), grouping)("words", ["wrod"])
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert "wrod" in str(info.value)
    assert info.value.field == "wrod"
    assert info.value.stream == "default"


def test_direct_grouping_on_non_direct_stream_is_rejected():
    """direct_grouping on a stream not declared direct raises, naming the stream."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("counter", PassBolt()).direct_grouping("words")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    msg = str(info.value)
    assert "default" in msg
    assert "direct" in msg
    assert "counter" in msg or "words" in msg
    assert info.value.stream == "default"


def test_direct_grouping_on_direct_stream_is_accepted():
    """direct_grouping on a stream declared direct validates."""
    b = TopologyBuilder()
    b.set_spout("words", DirectWordSpout())
    b.set_bolt("counter", PassBolt()).direct_grouping("words", stream="to_task")
    b.create_topology()


@pytest.mark.parametrize("second", ["spout", "bolt"])
def test_duplicate_component_id_is_rejected(second):
    """Using one id for two components raises, naming the id."""
    b = TopologyBuilder()
    b.set_spout("twice", WordSpout())
    if second == "spout":
        b.set_spout("twice", WordSpout())
    else:
        b.set_bolt("twice", PassBolt()).shuffle_grouping("twice")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert "twice" in str(info.value)
    assert info.value.component == "twice"


@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_reserved_id_prefix_is_rejected(kind):
    """Component ids starting with "__" are reserved for the system and rejected."""
    b = TopologyBuilder()
    if kind == "spout":
        b.set_spout("__mine", WordSpout())
    else:
        b.set_spout("words", WordSpout())
        b.set_bolt("__mine", PassBolt()).shuffle_grouping("words")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert "__mine" in str(info.value)
    assert info.value.component == "__mine"


@pytest.mark.parametrize(
    ("component_id", "bolt_class"),
    [("lock_holder", LockHolderBolt), ("lambda_holder", LambdaHolderBolt)],
)
def test_unpicklable_component_is_rejected_at_submit(component_id, bolt_class):
    """An unpicklable component is rejected by submit, naming it; the name stays free."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt(component_id, bolt_class()).shuffle_grouping("words")
    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises(InvalidTopologyError) as info:
            cluster.submit_topology("bad", CONF, b.create_topology())
        assert component_id in str(info.value) and info.value.component == component_id
        ok = TopologyBuilder()
        ok.set_spout("words", WordSpout())
        ok.set_bolt("fine", PassBolt()).shuffle_grouping("words")
        cluster.submit_topology("bad", CONF, ok.create_topology())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, "ten"),
        (Config.TOPOLOGY_WORKERS, 0),
        (Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, "yes"),
        (Config.TOPOLOGY_ACKER_EXECUTORS, -1),
        (Config.TOPOLOGY_MAX_SPOUT_PENDING, "2"),
    ],
)
def test_bad_config_value_is_rejected_at_submit(key, value):
    """A known config key of the wrong type or range is rejected at submit, naming it."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("pass", PassBolt()).shuffle_grouping("words")
    topology = b.create_topology()
    with LocalCluster(simulate_time=True) as cluster:
        with pytest.raises((ValueError, TypeError)) as info:
            cluster.submit_topology("conf", {**CONF, key: value}, topology)
        assert key in str(info.value)
        cluster.submit_topology("conf", CONF, topology)


def test_bad_component_config_value_is_rejected():
    """A wrong-typed known key given with add_configuration is rejected, naming it."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("pass", PassBolt()).shuffle_grouping("words").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, "often"
    )
    with (
        LocalCluster(simulate_time=True) as cluster,
        pytest.raises((ValueError, TypeError)) as info,
    ):
        cluster.submit_topology("conf", CONF, b.create_topology())
    assert Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS in str(info.value)


def test_unknown_config_keys_and_component_config_reach_components():
    """Unknown conf keys reach components; add_configuration overrides per component."""
    j_plain, j_override = new_journal(), new_journal()
    keys = ["my.custom.key", "my.other.key"]
    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(["word"]))
    b.set_bolt("plain", ConfRecorderBolt(j_plain, keys)).shuffle_grouping("words")
    b.set_bolt("override", ConfRecorderBolt(j_override, keys)).shuffle_grouping(
        "words"
    ).add_configuration("my.other.key", "component")
    conf = {**CONF, "my.custom.key": "x", "my.other.key": "topology"}
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("conf", conf, b.create_topology())
        assert cluster.wait_idle()
    assert entries(j_plain) == [{"my.custom.key": "x", "my.other.key": "topology"}]
    assert entries(j_override) == [{"my.custom.key": "x", "my.other.key": "component"}]


# -- groupings deliver where they should ----------------------------------------------


def _tagged(results: Any, component: str) -> list[tuple[Any, int, list[int]]]:
    return [tuple(r) for r in read_tuples(results, component)]  # type: ignore[misc]


def test_shuffle_grouping_delivers_each_tuple_once_over_all_tasks():
    """Shuffle grouping delivers every tuple exactly once and spreads them over tasks."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("sink", TaskTagBolt(), parallelism=4).shuffle_grouping("words")
    rows = _tagged(run_complete(b, {"words": WORDS}), "sink")
    assert Counter(r[0] for r in rows) == Counter(w[0] for w in WORDS)
    tasks = rows[0][2]
    assert len(tasks) == 4
    assert {r[1] for r in rows} == set(tasks)


def test_fields_grouping_sends_equal_values_to_one_task():
    """Fields grouping sends equal values to the same task, from every spout task."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), parallelism=3)
    b.set_bolt("sink", TaskTagBolt(), parallelism=4).fields_grouping("words", ["word"])
    rows = _tagged(run_complete(b, {"words": WORDS * 3}), "sink")
    assert Counter(r[0] for r in rows) == Counter(w[0] for w in WORDS * 3)
    where: dict[str, set[int]] = defaultdict(set)
    for word, task, _ in rows:
        where[word].add(task)
    assert all(len(t) == 1 for t in where.values()), where
    assert len(set().union(*where.values())) > 1, "every word went to one task"


def test_fields_grouping_on_two_fields():
    """Fields grouping on two fields sends equal (a, b) pairs to the same task."""
    pairs = [[a, b] for a in ("x", "y", "z") for b in range(6)] * 3
    b = TopologyBuilder()
    b.set_spout("pairs", PairSpout(), parallelism=2)
    b.set_bolt("sink", TaskTagBolt(), parallelism=4).fields_grouping("pairs", ["a", "b"])
    rows = _tagged(run_complete(b, {"pairs": pairs}), "sink")
    assert len(rows) == len(pairs)
    where: dict[tuple, set[int]] = defaultdict(set)
    for key, task, _ in rows:
        where[tuple(key)].add(task)
    assert len(where) == 18
    assert all(len(t) == 1 for t in where.values()), where


def test_all_grouping_replicates_to_every_task():
    """All grouping delivers every tuple to every task of the bolt."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("sink", TaskTagBolt(), parallelism=3).all_grouping("words")
    rows = _tagged(run_complete(b, {"words": WORDS}), "sink")
    tasks = rows[0][2]
    assert len(rows) == 3 * len(WORDS)
    for task in tasks:
        got = Counter(r[0] for r in rows if r[1] == task)
        assert got == Counter(w[0] for w in WORDS), task


def test_global_grouping_goes_to_lowest_task():
    """Global grouping sends every tuple to the bolt's lowest task id."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), parallelism=2)
    b.set_bolt("sink", TaskTagBolt(), parallelism=4).global_grouping("words")
    rows = _tagged(run_complete(b, {"words": WORDS}), "sink")
    assert len(rows) == len(WORDS)
    lowest = min(rows[0][2])
    assert {r[1] for r in rows} == {lowest}


@pytest.mark.parametrize("grouping", ["none_grouping", "local_or_shuffle_grouping"])
def test_none_and_local_or_shuffle_deliver_each_tuple_once(grouping):
    """None and local-or-shuffle groupings deliver every tuple exactly once."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    getattr(b.set_bolt("sink", TaskTagBolt(), parallelism=3), grouping)("words")
    rows = _tagged(run_complete(b, {"words": WORDS}), "sink")
    assert Counter(r[0] for r in rows) == Counter(w[0] for w in WORDS)
    assert {r[1] for r in rows} <= set(rows[0][2])


def test_partial_key_grouping_uses_at_most_two_tasks_per_key():
    """Partial-key grouping delivers each tuple once, each key to at most two tasks."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("sink", TaskTagBolt(), parallelism=4).partial_key_grouping("words", ["word"])
    rows = _tagged(run_complete(b, {"words": WORDS * 4}), "sink")
    assert Counter(r[0] for r in rows) == Counter(w[0] for w in WORDS * 4)
    where: dict[str, set[int]] = defaultdict(set)
    for word, task, _ in rows:
        where[word].add(task)
    assert all(len(t) <= 2 for t in where.values()), where


def test_custom_grouping_chooses_tasks():
    """A CustomStreamGrouping is prepared with the targets and choose_tasks routes."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("sink", TaskTagBolt(), parallelism=3).custom_grouping(
        "words", FirstAndLastGrouping()
    )
    rows = _tagged(run_complete(b, {"words": WORDS}), "sink")
    tasks = rows[0][2]
    assert len(rows) == 2 * len(WORDS)
    for task in (min(tasks), max(tasks)):
        assert Counter(r[0] for r in rows if r[1] == task) == Counter(w[0] for w in WORDS)
    assert {r[1] for r in rows} == {min(tasks), max(tasks)}


def test_emit_returns_target_task_ids():
    """Spout and bolt emit return the ids of the tasks the tuple was sent to."""
    spout_j, relay_j, byword_j, everyone_j = (new_journal() for _ in range(4))
    words = ["apple", "pear", "plum", "kiwi", "fig", "apple"]
    b = TopologyBuilder()
    b.set_spout("words", ListSpout(words, spout_j))
    b.set_bolt("relay", RelayBolt(relay_j), parallelism=2).global_grouping("words")
    b.set_bolt("byword", WhereBolt(byword_j), parallelism=3).fields_grouping("relay", ["word"])
    b.set_bolt("everyone", WhereBolt(everyone_j), parallelism=2).all_grouping("relay")
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("returns", CONF, b.create_topology())
        assert cluster.wait_idle()
    spout_emits = [e for e in entries(spout_j) if e[0] != "ack"]
    assert [w for w, _ in spout_emits] == words
    returned_by_spout = {tuple(r) for _, r in spout_emits}
    assert len(returned_by_spout) == 1, "global grouping must pick one task every time"
    (only,) = returned_by_spout
    assert len(only) == 1
    assert sorted(e[1] for e in entries(spout_j) if e[0] == "ack") == list(range(len(words)))

    everyone_tasks = sorted({t for _, t in entries(everyone_j)})
    assert len(everyone_tasks) == 2
    byword = dict(entries(byword_j))
    relay = entries(relay_j)
    assert len(relay) == len(words)
    for word, returned in relay:
        assert returned == sorted([byword[word], *everyone_tasks]), word


def test_emit_direct_goes_to_the_named_task():
    """emit_direct (spout and bolt) delivers to the named task and returns [task]."""
    journal = new_journal()
    words = ["a", "bb", "ccc", "dddd", "ee", "f", "ggg"]
    b = TopologyBuilder()
    b.set_spout("words", DirectSpout(words, journal))
    b.set_bolt("sink", DirectSinkBolt(journal), parallelism=3).direct_grouping(
        "words", stream="to_task"
    )
    b.set_bolt("sink2", DirectSink2Bolt(journal), parallelism=2).direct_grouping(
        "sink", stream="onward"
    )
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("direct", CONF, b.create_topology())
        assert cluster.wait_idle()
    log = entries(journal)
    spout = [e for e in log if e[0] == "spout"]
    sink = [e for e in log if e[0] == "sink"]
    bolt = [e for e in log if e[0] == "bolt"]
    sink2 = [e for e in log if e[0] == "sink2"]
    assert [e[1] for e in spout] == words
    assert all(returned == [target] for _, _, target, returned in spout)
    assert len({e[2] for e in spout}) == 3
    assert sorted(e[1] for e in sink) == sorted(words)
    assert all(target == own for _, _, target, own in sink)
    assert all(returned == [target] for _, _, target, returned in bolt)
    assert sorted(e[1] for e in sink2) == sorted(words)
    assert all(target == own for _, _, target, own in sink2)
    assert sorted(e[1] for e in log if e[0] == "ack") == list(range(len(words)))


def test_outputs_class_attribute_declares_fields():
    """The `outputs` class attribute declares fields (and `[]` none) for spouts and bolts."""
    b = TopologyBuilder()
    b.set_spout("words", OutputsAttrSpout())
    b.set_bolt("count", OutputsAttrBolt(), parallelism=2).fields_grouping("words", ["word"])
    b.set_bolt("last", NoOutputsBolt()).fields_grouping("count", ["n"])
    results = run_complete(b, {"words": WORDS})
    assert multiset(read_tuples(results, "count")) == multiset([[w[0], 1] for w in WORDS])
    assert read_tuples(results, "last") == []

    bad = TopologyBuilder()
    bad.set_spout("words", OutputsAttrSpout())
    bad.set_bolt("count", OutputsAttrBolt()).shuffle_grouping("words")
    bad.set_bolt("x", PassBolt()).fields_grouping("count", ["missing"])
    with pytest.raises(InvalidTopologyError) as info:
        bad.create_topology()
    assert info.value.field == "missing"


def test_named_streams_reach_only_their_subscribers():
    """A bolt subscribed to a named stream receives that stream only, and vice versa."""
    words = [["good1"], ["bad1"], ["good2"], ["bad2"], ["good3"]]
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("splitter", StreamSplitBolt()).shuffle_grouping("words")
    b.set_bolt("errsink", StreamTagBolt(), parallelism=2).shuffle_grouping(
        "splitter", stream="errs"
    )
    b.set_bolt("defsink", StreamTagBolt()).shuffle_grouping("splitter")
    results = run_complete(b, {"words": words})
    assert multiset(read_tuples(results, "splitter", stream="errs")) == multiset(
        [["bad1"], ["bad2"]]
    )
    assert multiset(read_tuples(results, "splitter")) == multiset([["good1"], ["good2"], ["good3"]])
    assert multiset(read_tuples(results, "errsink")) == multiset(
        [["errs", "bad1"], ["errs", "bad2"]]
    )
    assert multiset(read_tuples(results, "defsink")) == multiset(
        [["default", "good1"], ["default", "good2"], ["default", "good3"]]
    )


def test_named_stream_fields_grouping_validates_against_that_stream():
    """Fields grouping on a named stream checks that stream's fields, not default's."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("splitter", StreamSplitBolt()).shuffle_grouping("words")
    b.set_bolt("errsink", StreamTagBolt()).fields_grouping("splitter", ["w"], stream="errs")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    assert info.value.field == "w"
    assert info.value.stream == "errs"


def test_tuple_accessors():
    """A Tuple reports its source and gives values by index, by name, with len and fields.
    Its source task is the spout task that emitted it: the mocked spout's task of index
    ``i % 2`` emits word ``i`` (not merely some task of the spout's)."""
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), parallelism=2)
    b.set_bolt("inspect", InspectBolt()).shuffle_grouping("words")
    rows = read_tuples(run_complete(b, {"words": WORDS}), "inspect")
    assert len(rows) == len(WORDS)
    emitters: dict[str, set[int]] = defaultdict(set)
    for comp, stream, (task, spout_tasks), got, item, length, fields, values in rows:
        assert (comp, stream, length, fields) == ("words", "default", 1, ["word"])
        assert got == item == values[0]
        emitters[got].add(task)
        expected = {spout_tasks[i % 2] for i, w in enumerate(WORDS) if w[0] == got}
        assert task in expected, (got, task, expected)
    assert set().union(*emitters.values()) == set(spout_tasks)
    assert Counter(r[3] for r in rows) == Counter(w[0] for w in WORDS)


def test_context_and_task_counts():
    """`tasks=` sets task counts; the context reports tasks, components and subscribers."""
    journal = new_journal()
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), parallelism=2)
    b.set_bolt("counted", ContextRecorderBolt(journal), parallelism=2, tasks=4).shuffle_grouping(
        "words"
    )
    b.set_bolt("downstream", PassBolt()).shuffle_grouping("counted")
    run_complete(b, {"words": WORDS[:4]})
    seen = entries(journal)
    assert len(seen) == 4
    mine = seen[0]["mine"]
    assert len(mine) == 4
    assert mine == sorted(mine)
    assert sorted(s["task"] for s in seen) == mine
    for s in seen:
        assert s["component"] == "counted"
        assert s["mine"] == mine
        assert len(s["spout"]) == 2
        assert not set(s["spout"]) & set(mine)
        assert s["targets"] == ["downstream"]


def test_tracked_tree_through_every_grouping_is_acked():
    """A tracked tuple fanned out through every grouping kind is acked once all are done."""
    tracker = AckFailTracker()
    feeder = FeederSpout(["word"], tracker=tracker)
    j = new_journal()
    b = TopologyBuilder()
    b.set_spout("words", feeder)
    b.set_bolt("s", WhereBolt(j), parallelism=2).shuffle_grouping("words")
    b.set_bolt("f", WhereBolt(j), parallelism=2).fields_grouping("words", ["word"])
    b.set_bolt("a", WhereBolt(j), parallelism=2).all_grouping("words")
    b.set_bolt("g", WhereBolt(j), parallelism=2).global_grouping("words")
    b.set_bolt("n", WhereBolt(j), parallelism=2).none_grouping("words")
    b.set_bolt("l", WhereBolt(j), parallelism=2).local_or_shuffle_grouping("words")
    b.set_bolt("p", WhereBolt(j), parallelism=2).partial_key_grouping("words", ["word"])
    b.set_bolt("c", WhereBolt(j), parallelism=2).custom_grouping("words", FirstAndLastGrouping())
    with LocalCluster(simulate_time=True) as cluster:
        cluster.submit_topology("every", CONF, b.create_topology())
        feeder.feed(["hello"], msg_id=1)
        assert cluster.wait_idle()
        assert tracker.acked == {1}
        assert tracker.failed == set()
        # shuffle, fields, global, none, local_or_shuffle, partial_key: 1 each;
        # all: 2; custom first-and-last: 2.
        assert len(entries(j)) == 6 + 2 + 2
