"""Hypothesis over the protocol's moving parts, without a cluster: the real checkpoint
spout and StatefulBoltExecutor over one memory store, driven through random
interleavings of data tuples, checkpoint steps, failed steps and crashes of the bolt;
and the aligned mode's cut over random interleavings of two input channels."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.config import validate
from tupletree.state.alignment import AlignedInputs
from tupletree.state.bolts import StatefulBoltExecutor
from tupletree.state.kv import KeyValueState
from tupletree.state.protocol import CHECKPOINT_STREAM, COMMIT, INITSTATE, PREPARE
from tupletree.state.spout import CheckpointSpout
from tupletree.state.stateful_bolt import StatefulBolt
from tupletree.store import MemoryStore
from tupletree.store.memory import forget

from .fakes import FakeCollector, FakeContext, FakeTuple, checkpoint


class Counter1(StatefulBolt):
    """counts[key] += 1 per input, acked at once (held back by the executor)."""

    outputs = ["key"]

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        self.collector.emit([tup[0]], anchors=tup)
        self.collector.ack(tup)


def committed_counts(store: MemoryStore) -> Counter[str]:
    state = KeyValueState(store, "count-0")
    state._prepared = {}
    return Counter(dict(state))


EVENT = st.one_of(
    st.tuples(st.just("data"), st.sampled_from("abc")),
    st.tuples(st.just("deliver"), st.integers(1, 3)),
    st.just(("step", None)),
    st.tuples(st.just("verdict"), st.booleans()),
    st.just(("crash", None)),
)


@given(events=st.lists(EVENT, max_size=80), aligned=st.booleans())
@settings(max_examples=150, deadline=None)
def test_committed_state_is_the_effect_of_the_committed_inputs(events, aligned):
    """Whatever the interleaving of inputs, checkpoint steps, steps failing (anywhere in
    the topology) and the bolt's task dying and starting again over its store:

    - the committed state is exactly the effect of the inputs that were executed before
      a PREPARE whose COMMIT went through (each as often as that happened);
    - an input is acked only while a COMMIT is carried out, and only if it is one of
      those committed inputs;
    - at the end, once steps succeed again, every input was committed at least once."""
    name = f"prop-{uuid.uuid4().hex}"
    conf = validate(
        {
            "topology.state.provider.config": {"name": name},
            "topology.state.checkpoint.mode": "aligned" if aligned else "storm",
        }
    )
    store = MemoryStore(name)
    tasks = {"count": [2], "$checkpointspout": [1]}
    spout_ctx = FakeContext("$checkpointspout", 1, tasks)
    spout, spout_out = CheckpointSpout(), FakeCollector()
    # The steps reach the bolt straight from the spout here (the aligned mode's in-band
    # transport is the data spouts' business): the bolt runs in the mode drawn.
    spout.open({**conf, "topology.state.checkpoint.mode": "storm"}, spout_ctx, spout_out)

    def start() -> tuple[StatefulBoltExecutor, FakeCollector]:
        ex = StatefulBoltExecutor(Counter1(), ["$checkpointspout"], ["$checkpointspout"])
        out = FakeCollector()
        ex.prepare(conf, FakeContext("count", 2, tasks), out)
        return ex, out

    bolt, out = start()
    inputs: dict[int, str] = {}  # input id -> key
    undelivered: list[int] = []
    in_bolt: set[int] = set()  # delivered to the live instance, not yet acked or failed
    prepared_by_txid: dict[int, list[int]] = {}
    committed: Counter[int] = Counter()
    released: Counter[int] = Counter()
    step_out: list[Any] = []  # the step in flight: (txid, action, failed at the bolt)

    def settle_bolt_output() -> None:
        for tup in out.failed:
            if tup.source_stream != CHECKPOINT_STREAM:
                in_bolt.discard(tup.values[1])
                undelivered.append(tup.values[1])
        out.failed.clear()

    def run_step() -> None:
        emitted_before = len(spout_out.emitted)
        spout_ctx.clock += 10.0
        spout.step()
        if len(spout_out.emitted) == emitted_before:
            return
        _, (txid, action), _ = spout_out.emitted[-1]
        cp = checkpoint(txid, action, 1)
        acks_before = len(out.acked)
        bolt.execute(cp)
        data_acked = [t for t in out.acked[acks_before:] if t.source_stream != CHECKPOINT_STREAM]
        refused = cp in out.failed
        out.failed[:] = [t for t in out.failed if t is not cp]
        if action == COMMIT and not refused:
            committed.update(prepared_by_txid.pop(txid, []))
        for tup in data_acked:
            assert action == COMMIT, f"an input acked during {action}"
            released[tup.values[1]] += 1
            in_bolt.discard(tup.values[1])
        if action == PREPARE and not refused:
            prepared_by_txid[txid] = [t.values[1] for b in bolt.held.prepared for t in b]
        settle_bolt_output()
        step_out[:] = [(txid, action, refused)]

    def verdict(ok: bool) -> None:
        if not step_out:
            return
        txid, _, refused = step_out.pop()
        if ok and not refused:
            spout.ack(txid)
        else:
            spout.fail(txid)

    for kind, arg in events:
        if kind == "data":
            i = len(inputs)
            inputs[i] = arg
            undelivered.append(i)
        elif kind == "deliver":
            for _ in range(arg):
                if undelivered:
                    i = undelivered.pop(0)
                    in_bolt.add(i)
                    bolt.execute(FakeTuple([inputs[i], i]))
                    settle_bolt_output()
        elif kind == "step":
            if not step_out:
                run_step()
        elif kind == "verdict":
            verdict(arg)
        else:  # the bolt's worker dies: what it held is failed by timeouts, replayed
            undelivered.extend(sorted(in_bolt))
            in_bolt.clear()
            if step_out:
                step_out[0] = (*step_out[0][:2], True)
            bolt, out = start()
        assert committed_counts(store) == Counter(inputs[i] for i in committed.elements())
        assert released <= committed

    # The failures stop: run steps (every one succeeding) until all inputs committed.
    verdict(False)
    for _ in range(40):
        while undelivered:
            i = undelivered.pop(0)
            in_bolt.add(i)
            bolt.execute(FakeTuple([inputs[i], i]))
            settle_bolt_output()
        run_step()
        verdict(True)
    assert committed_counts(store) == Counter(inputs[i] for i in committed.elements())
    assert set(committed) == set(inputs), "an input was never committed"
    assert released <= committed
    forget(name)


# -- the aligned mode's cut ----------------------------------------------------------------


@st.composite
def two_channels(draw: Any) -> tuple[list[tuple[int, str]], int, int]:
    """Channel 1's and 2's inputs (lists of keys), each with the PREPARE barrier at a
    random place, interleaved at random keeping each channel's order."""
    firsts = []
    for _ in range(2):
        items = draw(st.lists(st.sampled_from("xyz"), max_size=8))
        cut = draw(st.integers(0, len(items)))
        firsts.append((items, cut))
    streams = [
        [("data", key) for key in items[:cut]]
        + [("barrier", None)]
        + [("data", key) for key in items[cut:]]
        for items, cut in firsts
    ]
    order = draw(st.permutations([0] * len(streams[0]) + [1] * len(streams[1])))
    merged, pos = [], [0, 0]
    for ch in order:
        merged.append((ch + 1, *streams[ch][pos[ch]]))
        pos[ch] += 1
    before = Counter(k for items, cut in firsts for k in items[:cut])
    return merged, before, Counter(k for items, _ in firsts for k in items)


def run_channels(merged: list[Any], aligned: bool) -> tuple[Counter[str], Counter[str]]:
    """Feed the interleaving to a stateful bolt with two upstream tasks (1 and 2); return
    what its PREPARE saved and its state at the end."""
    name = f"cut-{uuid.uuid4().hex}"
    conf = validate(
        {
            "topology.state.provider.config": {"name": name},
            "topology.state.checkpoint.mode": "aligned" if aligned else "storm",
        }
    )
    ex = StatefulBoltExecutor(Counter1(), ["up"], ["up"])
    out = FakeCollector()
    ex.prepare(conf, FakeContext("count", 9, {"count": [9], "up": [1, 2]}), out)
    for ch in (1, 2):
        ex.execute(checkpoint(-1, INITSTATE, ch))
    for ch, kind, key in merged:
        if kind == "data":
            ex.execute(FakeTuple([key, 0], source_task=ch))
        else:
            ex.execute(checkpoint(0, PREPARE, ch))
    store = MemoryStore(name)
    saved = KeyValueState(store, "count-0")
    prepared = Counter({k: v for k, v in dict(saved).items()})
    live = Counter(dict(ex.state))
    forget(name)
    return prepared, live


@given(two_channels())
@settings(max_examples=300, deadline=None)
def test_aligned_prepare_saves_exactly_what_came_before_the_barrier_on_every_channel(case):
    """Aligned mode: whatever the interleaving, the state PREPARE saves is the effect of
    exactly the inputs before the barrier on each channel; what came after on the
    channel that delivered first was held, and runs after (nothing is lost)."""
    merged, before, everything = case
    prepared, live = run_channels(merged, aligned=True)
    assert prepared == before
    assert live == everything


def test_storm_mode_saves_what_arrived_first_not_a_cut():
    """Storm's mode (the gap the aligned mode closes): after channel 1's barrier the
    bolt goes on with channel 1's inputs, so PREPARE saves one that came after it."""
    merged = [(1, "barrier", None), (1, "data", "late"), (2, "data", "x"), (2, "barrier", None)]
    prepared, _ = run_channels(merged, aligned=False)
    assert prepared == Counter({"late": 1, "x": 1})
    prepared, _ = run_channels(merged, aligned=True)
    assert prepared == Counter({"x": 1})


def test_alignment_holds_a_bounded_number_of_tuples():
    """Over ``max_held`` the step is abandoned: the held tuples run, later copies of the
    step are refused (so the checkpoint spout learns it failed)."""
    inputs = AlignedInputs([1, 2], max_held=2)
    assert inputs.arrive_on(1, PREPARE, 0) == ("wait", [])
    assert inputs.blocks(1) and inputs.hold("a") and inputs.hold("b")
    assert not inputs.hold("c")
    assert inputs.release() == ["a", "b"] and not inputs.blocks(1)
    assert inputs.arrive_on(2, PREPARE, 0) == ("refuse", [])
    assert inputs.arrive_on(1, COMMIT, 0)[0] == "wait"  # the next step counts afresh
