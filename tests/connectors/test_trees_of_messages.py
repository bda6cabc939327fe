"""A broker spout's ``messages_per_tree``: several messages emitted as one tuple tree
(``emit_batch``), each still settled at the broker on its own, against the in-memory
broker (tests/connectors/fake_broker.py). The same against Redis: test_redis.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.connectors.fake_broker import BROKERS, FakeBroker, FakeSink, FakeSpout
from tests.connectors.support import POISON, FailPoison, ResetThenAck, until
from tupletree import LocalCluster, TopologyBuilder
from tupletree.connectors import RetryPolicy, connector_totals

CONF = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 4}


def fake(bodies: list[bytes]) -> tuple[str, FakeBroker]:
    name = uuid.uuid4().hex
    BROKERS[name] = FakeBroker(bodies)
    return name, BROKERS[name]


def run(
    spout: FakeSpout, broker: FakeBroker, bolt: Any = None, sink: bool = True
) -> tuple[dict, dict, list[str]]:
    """spout -> ``bolt`` (FailPoison by default) -> the fake broker's sink (none with
    ``sink=False``), until the broker holds nothing; the spout's connector counts, the
    spout component's metrics and the errors."""
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", bolt if bolt is not None else FailPoison()).shuffle_grouping("src")
    if sink:
        b.set_bolt("sink", FakeSink(spout.broker_name)).shuffle_grouping("work")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", CONF, b.create_topology())
        assert until(lambda: not broker.ready and not broker.unacked)
        assert until(lambda: connector_totals(cluster.metrics("t")["src"])["held"] == 0)
        metrics = cluster.metrics("t")["src"]
        return connector_totals(metrics), metrics, cluster.errors("t")


def test_messages_go_as_trees_and_each_is_acknowledged_at_the_broker() -> None:
    bodies = [f"m{i}".encode() for i in range(300)]
    name, broker = fake(bodies)
    counts, metrics, errors = run(FakeSpout(name, messages_per_tree=25), broker)
    assert errors == []
    assert sorted(broker.written) == sorted(bodies)
    assert counts["received"] == counts["acked"] == 300 and counts["failed"] == 0
    # The spout's executor saw trees, not messages: at most 25 messages each.
    assert 12 <= metrics["acked"] < 300
    assert counts["trees"] == 0


def test_a_bad_message_fails_its_tree_once_then_goes_alone_to_the_dead_letter() -> None:
    """A tree fails whole. Its messages are replayed each in a tree of its own, so the
    good ones are written after one failure and only the bad one is dead-lettered."""
    good = [f"m{i}".encode() for i in range(40)]
    name, broker = fake([*good[:20], POISON.encode(), *good[20:]])
    spout = FakeSpout(
        name, messages_per_tree=50, retry=RetryPolicy(max_retries=2, initial_delay_secs=0.01)
    )
    counts, _, _ = run(spout, broker)
    assert broker.dead == [POISON.encode()]
    assert sorted(set(broker.written)) == sorted(good)
    assert counts["acked"] == 40 and counts["dead_lettered"] == 1
    # The poison failed 3 times (its tree, then 2 replays alone); each message that
    # shared its first tree failed once with it, and no message more than that.
    shared = counts["failed"] - 3
    assert 0 < shared <= 40
    assert counts["retried"] == counts["failed"] - 1


def words(body: bytes) -> list[bytes]:
    return body.split()


@pytest.mark.parametrize("per_tree", [1, 10])
def test_a_decode_that_gives_the_wrong_number_of_values_dead_letters_that_message(
    per_tree: int,
) -> None:
    """Not the tree it was in: its neighbours are acknowledged on their first try."""
    bodies = [b"a", b"b c", b"d", b"e"]
    name, broker = fake(bodies)
    spout = FakeSpout(name, messages_per_tree=per_tree, decode=words)
    counts, _, errors = run(spout, broker, sink=False)
    assert broker.dead == [b"b c"]
    assert counts["acked"] == 3 and counts["failed"] == 0
    assert any("[b'b', b'c']" in e for e in errors), errors
    assert any("not a list of 1 value(s) for the fields ['message']" in e for e in errors)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"messages_per_tree": 0}, "messages_per_tree must be an integer from 1 to 10,000"),
        ({"messages_per_tree": 10_001}, "got 10001"),
        ({"messages_per_tree": 2.0}, "got 2.0"),
        ({"messages_per_tree": True}, "got True"),
        (
            {"messages_per_tree": 5, "retry": RetryPolicy(max_retries=0)},
            "needs retry.max_retries of at least 1",
        ),
    ],
)
def test_a_bad_messages_per_tree_is_refused_naming_it(kwargs: dict, says: str) -> None:
    with pytest.raises(ValueError, match="messages_per_tree") as info:
        FakeSpout("nowhere", **kwargs)
    assert says in str(info.value)


def pair(body: bytes) -> tuple[bytes, int]:
    return (body, len(body))


def text(body: bytes) -> str:
    return body.decode()


@pytest.mark.parametrize(("decode", "fields"), [(pair, ["body", "size"]), (text, None)])
def test_decode_may_give_any_sequence_of_the_right_length_but_not_a_bare_string(
    decode: Any, fields: list[str] | None
) -> None:
    """A tuple of two values for two fields is emitted as a list would be; a bare str
    for one field (a sequence of characters, not of values) is refused, naming it."""
    name, broker = fake([b"ab", b"x", b"cde"])
    spout = FakeSpout(name, messages_per_tree=10, decode=decode, fields=fields)
    counts, _, errors = run(spout, broker, sink=False)
    if decode is pair:
        assert counts["acked"] == 3 and broker.dead == [] and errors == []
    else:  # "x" is one character long: only its being a str refuses it
        assert counts["acked"] == 0 and sorted(broker.dead) == [b"ab", b"cde", b"x"]
        assert any("decode gave 'x'" in e for e in errors), errors


def test_a_reset_timeout_in_a_tree_renews_the_lease_of_each_of_its_messages() -> None:
    """One row's reset_timeout resets its tree's timeout, so every message of the tree
    has its lease renewed (a touch each, per reset: each of the 6 rows resets)."""
    name, broker = fake([f"m{i}".encode() for i in range(6)])
    run(FakeSpout(name, messages_per_tree=6), broker, ResetThenAck(), sink=False)
    assert broker.touched == 6 * 6


def test_pending_trees_are_full_and_the_buffer_holds_the_next_ones() -> None:
    """Max spout pending counts trees (2 here), so the spout's buffer is sized by the
    messages they hold: with the sink holding every tree open, the spout has two full
    trees of 100 out and 200 messages fetched for the next two."""
    name, broker = fake([f"m{i}".encode() for i in range(1000)])
    broker.sink_gate.clear()  # no tree completes
    b = TopologyBuilder()
    b.set_spout("src", FakeSpout(name, messages_per_tree=100))
    b.set_bolt("sink", FakeSink(name)).shuffle_grouping("src")
    conf = {**CONF, "topology.max.spout.pending": 2}
    try:
        with LocalCluster() as cluster:
            cluster.submit_topology("t", conf, b.create_topology())

            def counts() -> dict:
                return connector_totals(cluster.metrics("t")["src"])

            assert until(lambda: counts()["held"] == 200 and counts()["buffered"] == 200)
            assert counts()["trees"] == 2
    finally:
        broker.sink_gate.set()
