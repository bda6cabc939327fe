"""The machinery every broker connector shares, against an in-memory broker with
RabbitMQ's delivery semantics (tests/connectors/fake_broker.py)."""

from __future__ import annotations

import collections
import random
import threading
import time
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.connectors.fake_broker import BROKERS, FakeBroker, FakeSink, FakeSpout
from tests.connectors.support import ResetThenAck, until
from tupletree import BasicBolt, FailedException, LocalCluster, TopologyBuilder
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals
from tupletree.errors import InvalidConfigError
from tupletree.topology.groupings import CustomStreamGrouping

CONF = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 50}


def fake(bodies: list[bytes]) -> tuple[str, FakeBroker]:
    name = uuid.uuid4().hex
    BROKERS[name] = FakeBroker(bodies)
    return name, BROKERS[name]


class FailAFifth(BasicBolt):
    outputs = ["message"]

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self.rng = random.Random(7)

    def execute(self, tup: Any, collector: Any) -> None:
        if tup[0] == "poison" or self.rng.random() < 0.2:
            raise FailedException("unlucky")
        collector.emit([tup[0]])


def topology(spout: Any, sink: Any = None) -> Any:
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", FailAFifth()).shuffle_grouping("src")
    if sink is not None:
        b.set_bolt("sink", sink).shuffle_grouping("work")
    return b.create_topology()


def test_every_message_is_acked_at_the_source_and_written_once_confirmed() -> None:
    """Failed trees are replayed by the spout; the sink acks only confirmed writes; at the
    end the broker holds nothing unacknowledged and every body was written."""
    bodies = [f"m{i}".encode() for i in range(300)]
    name, broker = fake(bodies)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(FakeSpout(name), FakeSink(name)))
        assert until(lambda: not broker.ready and not broker.unacked)
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["acked"] == 300)
        counts = connector_totals(cluster.metrics("t")["src"])
        assert cluster.errors("t") == []
    assert set(broker.written) == set(bodies)
    assert counts["retried"] == counts["failed"] > 0
    assert counts["received"] == 300 and counts["dead_lettered"] == 0


def test_a_message_that_always_fails_is_dead_lettered_after_max_retries() -> None:
    name, broker = fake([b"a", b"poison", b"b"])
    spout = FakeSpout(name, retry=RetryPolicy(max_retries=2, initial_delay_secs=0.01))
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(spout))
        assert until(lambda: not broker.ready and not broker.unacked)
        counts = connector_totals(cluster.metrics("t")["src"])
    assert broker.dead == [b"poison"]
    assert counts["dead_lettered"] == 1
    # Each of its 3 deliveries failed: the first and max_retries (2) replays.
    assert counts["acked"] == 2


def test_settles_for_a_dropped_connection_are_not_sent_and_nothing_is_lost() -> None:
    """The broker takes back what a dropped connection held; the spout must not ack or
    replay those deliveries (the fake broker asserts no settle crosses channels)."""
    bodies = [f"m{i}".encode() for i in range(400)]
    name, broker = fake(bodies)
    broker.sink_gate.clear()  # trees stay pending: their messages unacked at the broker
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(FakeSpout(name), FakeSink(name)))
        # Max spout pending (50) reached and the buffer full (50): the I/O thread fetches
        # nothing more.
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["buffered"] >= 50)
        # Trees that time out (a loaded machine, 5 s) are replayed, as at-least-once
        # promises, and each may write its message once more: those of the new session,
        # and those of the old one that time out before the spout learns of the drop.
        # (The buffer is full, so only its keepalive can tell it; once it knows, the old
        # session's trees are not replayed: the broker redelivers their messages.)
        timed_out_at_drop = cluster.metrics("t")["src"]["timed_out"]
        broker.drop_connections()
        # The trees complete once the spout has a new session: their acks are stale. The
        # spout learns of the drop through its keepalive (its buffer is full), well
        # within a message timeout.
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["reconnects"] >= 1, 4.0)
        broker.sink_gate.set()
        assert until(lambda: not broker.ready and not broker.unacked)
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["held"] == 0)
        counts = connector_totals(cluster.metrics("t")["src"])
        errors = cluster.errors("t")
        written = collections.Counter(broker.written)
        # Writes past a message's second, each paid for by a late timeout (the metrics
        # may report one a moment after its replay's write, hence the wait).
        beyond_two = sum(max(0, n - 2) for n in written.values())

        def late() -> int:
            return cluster.metrics("t")["src"]["timed_out"] - timed_out_at_drop

        assert until(lambda: beyond_two <= late(), secs=10), (written.most_common(3), late())
        late_timeouts = late()
    assert set(broker.written) == set(bodies)
    # Duplicates are bounded by what was in flight at the drop (max spout pending plus
    # the spout's buffer of as many), not a second pass over everything.
    in_flight = 2 * CONF["topology.max.spout.pending"]
    assert sum(written.values()) - len(bodies) <= in_flight + late_timeouts, written.most_common(3)
    assert counts["reconnects"] >= 1 and counts["redelivered"] >= 20
    assert counts["stale"] + counts["stale_settles"] >= 20
    assert any("fake://" in e and "connection closed by the broker" in e for e in errors)
    assert not any("another channel" in e for e in errors)


class SlowAck(BasicBolt):
    """Acks each input after 10 ms: the I/O thread is back in its fetch by then."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        time.sleep(0.01)


def test_settles_still_queued_when_the_topology_is_killed_are_sent() -> None:
    """The I/O thread waits in a fetch while the acks queue up; the topology is killed
    then (the fetch returns half a second into the kill): the acks must still be sent,
    not left with the broker."""
    name, broker = fake([f"m{i}".encode() for i in range(50)])
    broker.fetch_gate.clear()
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name))
    b.set_bolt("work", SlowAck()).shuffle_grouping("src")
    release = threading.Timer(0.5, broker.fetch_gate.set)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: connector_totals(cluster.metrics("t")["src"]).get("acked") == 50)
        assert len(broker.unacked) >= 40  # acks still queued in the spout
        release.start()
    release.join()
    assert not broker.ready and not broker.unacked


def test_a_bolts_reset_timeout_renews_the_lease_at_the_broker() -> None:
    name, broker = fake([b"a", b"b"])
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name))
    b.set_bolt("work", ResetThenAck()).shuffle_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: not broker.ready and not broker.unacked)
    assert broker.touched == 2


def test_a_message_timeout_the_lease_would_not_outlive_is_refused_at_submit() -> None:
    name, _ = fake([])
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("t", CONF, topology(FakeSpout(name, lease_secs=10)))
    assert err.value.key == "topology.message.timeout.secs"
    assert "'src'" in str(err.value) and "lease_secs" in str(err.value)


def test_an_unreachable_broker_is_refused_at_submit_naming_it() -> None:
    name, broker = fake([])
    broker.down = True
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology("t", CONF, topology(FakeSpout(name)))
    assert err.value.address == f"fake://{name}"
    assert "FakeSpout 'src'" in str(err.value) and "connection refused" in str(err.value)


def test_a_broker_down_while_running_is_reported_and_reconnected() -> None:
    name, broker = fake([b"a"])
    broker.down = True
    spout = FakeSpout(name, check_at_submit=False)
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, topology(spout))
        assert until(lambda: any("connection refused" in e for e in cluster.errors("t")))
        broker.down = False
        assert until(lambda: not broker.ready and not broker.unacked)


def test_a_refused_write_fails_its_input_which_is_replayed() -> None:
    """The sink fails an input whose write the broker refused: the spout replays it."""
    name, broker = fake([b"a", b"b"])
    broker.refuse = {b"b"}
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name, retry=RetryPolicy(max_retries=1)))
    b.set_bolt("sink", FakeSink(name)).shuffle_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: not broker.ready and not broker.unacked)
        sink = connector_totals(cluster.metrics("t")["sink"])
        errors = cluster.errors("t")
    assert broker.written == [b"a"]
    assert broker.dead == [b"b"]
    assert sink["refused"] == 2 and sink["written"] == 1
    assert any("refused by the fake broker" in e for e in errors)


def test_an_undecodable_body_is_dead_lettered_at_once() -> None:
    name, broker = fake([b"\xff\xfe", b"ok"])
    with LocalCluster() as cluster:
        b = TopologyBuilder()
        b.set_spout("src", FakeSpout(name))
        b.set_bolt("work", ResetThenAck()).shuffle_grouping("src")
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: not broker.ready and not broker.unacked)
        errors = cluster.errors("t")
    assert broker.dead == [b"\xff\xfe"]
    assert any("cannot be decoded" in e for e in errors)


@given(
    st.integers(0, 10) | st.none(),
    st.floats(0, 5),
    st.floats(0, 100),
    st.lists(st.integers(1, 200), min_size=2, max_size=10),
)
def test_retry_delays_grow_and_stay_capped(
    max_retries: int | None, initial: float, extra: float, failures: list[int]
) -> None:
    policy = RetryPolicy(max_retries, initial, initial + extra)
    delays = [policy.delay(n) for n in sorted(failures)]
    assert delays == sorted(delays)
    assert all(0 <= d <= policy.max_delay_secs for d in delays)
    assert policy.delay(1) == initial
    for n in failures:
        assert policy.exhausted(n) == (max_retries is not None and n > max_retries)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"initial_delay_secs": float("nan")},
        {"max_delay_secs": -1},
        {"initial_delay_secs": 5, "max_delay_secs": 1},
        {"max_retries": True},
    ],
)
def test_a_bad_retry_policy_is_refused_naming_the_keyword(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfigError) as err:
        RetryPolicy(**kwargs)
    assert err.value.key in kwargs


def test_a_broker_that_hangs_never_blocks_the_worker() -> None:
    """The fake broker's fetches and writes hang (as a broker that stopped answering
    would): the worker goes on running the topology's other spout and bolts, and the
    connectors' messages flow once the broker answers again."""
    from tupletree.testing import FeederSpout

    name, broker = fake([f"m{i}".encode() for i in range(20)])
    broker.sink_gate.clear()  # writes wait
    feeder = FeederSpout(["word"])
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name))
    b.set_bolt("sink", FakeSink(name)).shuffle_grouping("src")
    b.set_spout("other", feeder)
    b.set_bolt("echo", Echo()).shuffle_grouping("other")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: broker.unacked)  # the spout took deliveries: writes hang
        broker.fetch_gate.clear()  # and from now on so do fetches with nothing to give
        for i in range(50):
            feeder.feed([f"w{i}"], msg_id=i)
        assert until(lambda: cluster.metrics("t")["other"]["acked"] == 50, 20)
        assert broker.written == []
        broker.sink_gate.set()
        broker.fetch_gate.set()
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["acked"] == 20)


class Echo(BasicBolt):
    outputs = ["word"]

    def execute(self, tup: Any, collector: Any) -> None:
        collector.emit([tup[0]])


@pytest.mark.parametrize(
    ("lease", "fixes"),
    [
        (
            40.0,
            ["lower 'topology.message.timeout.secs' below 20 s", "raise lease by more than 20 s"],
        ),
        (-4.0, ["raise lease by more than 64 s"]),
        (0.0, ["raise lease by more than 60 s"]),
    ],
)
def test_the_lease_check_advises_only_fixes_that_can_be_made(lease, fixes) -> None:
    """A lease already used up by its deductions (claim idle time less the retry's
    max delay) gets no advice to lower the timeout below zero, only a longer lease,
    by how much."""
    from tupletree.config import validate
    from tupletree.connectors.spout import check_lease
    from tupletree.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError) as info:
        check_lease("spout 'q'", validate({}), "lease", lease, "the lease")
    message = str(info.value)
    assert message.endswith(" or ".join(fixes))
    assert "below -" not in message and "below 0" not in message


EXECUTIONS: dict[str, int] = {}


class FailFirstTime(BasicBolt):
    """Counts executions per message; fails each message's first one."""

    outputs: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        EXECUTIONS[tup[0]] = EXECUTIONS.get(tup[0], 0) + 1
        if EXECUTIONS[tup[0]] == 1:
            raise FailedException("the first time")


def test_a_replay_made_stale_by_a_dropped_connection_is_not_emitted() -> None:
    """Two messages fail and wait 4 s for their replay; the connection drops meanwhile,
    so the broker delivers them again itself. The spout's own replays, due later, are
    for deliveries of the dead channel: dropped (counted stale), not emitted: each
    message is executed twice (the failure, the redelivery), not three times."""
    EXECUTIONS.clear()
    name, broker = fake([b"a", b"b"])
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name, retry=RetryPolicy(initial_delay_secs=4, max_delay_secs=4)))
    b.set_bolt("work", FailFirstTime()).shuffle_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["failed"] == 2)
        broker.drop_connections()
        assert until(lambda: not broker.ready and not broker.unacked)  # redelivered, acked
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["stale"] >= 2)
        counts = connector_totals(cluster.metrics("t")["src"])
    assert EXECUTIONS == {"a": 2, "b": 2}
    assert counts["reconnects"] >= 1 and counts["held"] == 0


def test_a_leased_spout_with_message_timeouts_off_is_refused_at_submit() -> None:
    """With message timeouts off a stalled tree lives forever, past any lease: a spout
    with a lease is refused at submit, naming the key to turn on and the lease."""
    name, _ = fake([])
    conf = {**CONF, "topology.enable.message.timeouts": False}
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("t", conf, topology(FakeSpout(name, lease_secs=3600)))
    assert err.value.key == "topology.enable.message.timeouts"
    assert "'src'" in str(err.value) and "lease_secs" in str(err.value)
    assert cluster.topologies() == []


class _RaisesOnceFor(CustomStreamGrouping):
    """A user's grouping that raises the first time it sees ``bad`` (a transient bug)."""

    raised = threading.Event()

    def __init__(self, bad: str) -> None:
        self.bad = bad

    def choose_tasks(self, task_id: int, values: list[Any]) -> list[int]:
        if values[0] == self.bad and not _RaisesOnceFor.raised.is_set():
            _RaisesOnceFor.raised.set()
            raise RuntimeError("grouping bug")
        return [self.target_tasks[0]]


class _Seen(BasicBolt):
    outputs: list[str] = []
    seen: list[str] = []

    def execute(self, tup: Any, collector: Any) -> None:
        _Seen.seen.append(tup[0])


@pytest.mark.parametrize("per_tree", [1, 3])
def test_a_message_whose_emit_raises_is_failed_and_replayed(per_tree: int) -> None:
    """The spout's emit raises (a custom grouping's bug, once) for message m2. With a
    message a tree, it stayed held for good: never emitted, never acked, never
    replayed, and a redelivery of it was skipped as held already. Now it fails, as a
    tree of several already did: replayed, processed, acknowledged at the broker."""
    _RaisesOnceFor.raised.clear()
    _Seen.seen = []
    name = uuid.uuid4().hex
    BROKERS[name] = broker = FakeBroker([f"m{i}".encode() for i in range(6)])
    spout = FakeSpout(
        name, messages_per_tree=per_tree, retry=RetryPolicy(max_retries=3, initial_delay_secs=0.01)
    )
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", _Seen()).custom_grouping("src", _RaisesOnceFor("m2"))
    conf = {**CONF, "topology.max.spout.pending": 4}
    with LocalCluster() as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        assert until(_RaisesOnceFor.raised.is_set)
        done = until(lambda: not broker.ready and not broker.unacked, secs=10)
        counts = connector_totals(cluster.metrics("t")["src"])
        assert done, f"unacked at the broker: {sorted(broker.unacked.values())}; {counts}"
        assert "m2" in _Seen.seen
        assert counts["held"] == 0
