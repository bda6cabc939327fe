"""RedisStreamSpout and RedisStreamSink against the Redis server of this machine
(127.0.0.1:6379; skipped, with the reason, where none answers)."""

from __future__ import annotations

import collections
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.connectors.support import POISON, FailPoison, SlowAcker, pipeline, until
from tupletree import Bolt, LocalCluster, TopologyBuilder
from tupletree.connectors import ConnectorError, RetryPolicy, connector_totals
from tupletree.errors import InvalidConfigError
from tupletree.testing import FeederSpout

redis = pytest.importorskip("redis")
from tupletree.connectors.redis import RedisStreamSink, RedisStreamSpout  # noqa: E402

URL = "redis://127.0.0.1:6379/0"
CONF = {"topology.message.timeout.secs": 10, "topology.max.spout.pending": 100}


@pytest.fixture(scope="module")
def r() -> Iterator[Any]:
    client = redis.Redis.from_url(URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"no Redis server at {URL} ({exc}); .ci/run starts one")
    yield client
    client.close()


@pytest.fixture
def streams(r: Any) -> Iterator[tuple[str, str, str]]:
    """A source stream with group "g", an output stream and a dead-letter stream,
    with names of their own, deleted afterwards."""
    tag = uuid.uuid4().hex[:10]
    names = (f"tt-src-{tag}", f"tt-out-{tag}", f"tt-dead-{tag}")
    r.xgroup_create(names[0], "g", id="0", mkstream=True)
    yield names
    r.delete(*names)


def put(r: Any, stream: str, bodies: list[str]) -> None:
    pipe = r.pipeline(transaction=False)
    for body in bodies:
        pipe.xadd(stream, {"message": body})
    pipe.execute()


def read(r: Any, stream: str) -> list[str]:
    for _ in range(100):  # a CLIENT KILL may close the test's own connection too
        try:
            return [fields[b"message"].decode() for _, fields in r.xrange(stream)]
        except redis.ConnectionError:
            continue
    raise AssertionError(f"could not read {stream}: every attempt's connection was killed")


def pending(r: Any, stream: str) -> int:
    for _ in range(100):
        try:
            return r.xpending(stream, "g")["pending"]
        except redis.ConnectionError:
            continue
    raise AssertionError(f"could not read {stream}: every attempt's connection was killed")


def test_every_entry_reaches_the_sink_and_nothing_stays_pending(r: Any, streams: Any) -> None:
    """300 entries through a bolt failing a fifth at random: each is written at least
    once, duplicates are counted, and the group holds nothing pending at the end."""
    src, out, _ = streams
    bodies = [f"m{i}" for i in range(300)]
    put(r, src, bodies)
    topology = pipeline(RedisStreamSpout(src, "g", URL), RedisStreamSink(out, URL))
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-e2e", CONF, topology)
        assert until(lambda: set(read(r, out)) == set(bodies))
        assert until(lambda: pending(r, src) == 0)
        metrics = cluster.metrics("redis-e2e")
        assert cluster.errors("redis-e2e") == []
    written = collections.Counter(read(r, out))
    duplicates = sum(n - 1 for n in written.values())
    spout = connector_totals(metrics["source"])
    sink = connector_totals(metrics["sink"])
    assert spout["received"] == 300 and spout["acked"] == 300
    assert spout["retried"] == spout["failed"] > 0
    assert sink["written"] == len(read(r, out)) == 300 + duplicates


def test_an_entry_that_always_fails_goes_to_the_dead_letter(r: Any, streams: Any) -> None:
    src, out, dead = streams
    bodies = [f"m{i}" for i in range(50)]
    put(r, src, [*bodies[:25], POISON, *bodies[25:]])
    spout = RedisStreamSpout(
        src, "g", URL, retry=RetryPolicy(max_retries=3, initial_delay_secs=0.01), dead_letter=dead
    )
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-dead", CONF, pipeline(spout, RedisStreamSink(out, URL)))
        assert until(lambda: pending(r, src) == 0 and len(r.xrange(dead)) == 1)
        metrics = cluster.metrics("redis-dead")
    [(_, fields)] = r.xrange(dead)
    assert fields[b"message"] == POISON.encode() and fields[b"failures"] == b"4"
    assert fields[b"source_stream"] == src.encode()
    assert set(read(r, out)) == set(bodies)
    assert connector_totals(metrics["source"])["dead_lettered"] == 1


def test_entries_as_trees_of_twenty_are_each_acknowledged_and_a_bad_one_goes_alone(
    r: Any, streams: Any
) -> None:
    """``messages_per_tree``: the spout emits up to 20 entries as one tree. The tree
    holding the poison fails whole; its entries are replayed each alone, so the good
    ones are written and acknowledged (XACK) and only the poison reaches the dead letter,
    after as many failures as without trees."""
    src, out, dead = streams
    bodies = [f"m{i}" for i in range(60)]
    put(r, src, [*bodies[:30], POISON, *bodies[30:]])
    spout = RedisStreamSpout(
        src,
        "g",
        URL,
        retry=RetryPolicy(max_retries=3, initial_delay_secs=0.01),
        dead_letter=dead,
        messages_per_tree=20,
    )
    topology = pipeline(spout, RedisStreamSink(out, URL), bolt=FailPoison())
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-trees", CONF, topology)
        assert until(lambda: pending(r, src) == 0 and len(r.xrange(dead)) == 1)
        assert until(lambda: set(read(r, out)) == set(bodies))
        metrics = cluster.metrics("redis-trees")
    [(_, fields)] = r.xrange(dead)
    assert fields[b"message"] == POISON.encode() and fields[b"failures"] == b"4"
    counts = connector_totals(metrics["source"])
    assert counts["acked"] == 60 and counts["dead_lettered"] == 1
    assert 0 <= counts["failed"] - 4 <= 19  # the poison's first tree, once each
    assert metrics["source"]["acked"] < 60  # trees, not entries


def test_killed_client_connections_lose_nothing(r: Any, streams: Any) -> None:
    """CLIENT KILL drops the spout's and the sink's connections every 20 ms while
    the topology runs: every entry still reaches the sink and none stays pending."""
    src, out, _ = streams
    bodies = [f"m{i}" for i in range(30000)]  # long enough a run to kill into
    put(r, src, bodies)
    stop = threading.Event()
    kills = []

    killer_client = redis.Redis.from_url(URL)

    def killer() -> None:
        # Only the connectors' connections (named tupletree:...), so that every kill
        # counted hit the spout or the sink.
        while not stop.wait(0.02):
            for client in killer_client.client_list():
                if client.get("name", "").startswith("tupletree:"):
                    kills.append(killer_client.client_kill_filter(_id=client["id"]))

    thread = threading.Thread(target=killer)
    with LocalCluster() as cluster:
        topology = pipeline(RedisStreamSpout(src, "g", URL), RedisStreamSink(out, URL))
        cluster.submit_topology("redis-kill", CONF, topology)
        thread.start()
        try:
            assert until(lambda: set(read(r, out)) == set(bodies))
        finally:
            stop.set()
            thread.join()
            killer_client.close()
        assert until(lambda: pending(r, src) == 0)
        spout = connector_totals(cluster.metrics("redis-kill")["source"])
        sink = connector_totals(cluster.metrics("redis-kill")["sink"])
    written = collections.Counter(read(r, out))
    duplicates = sum(written.values()) - len(bodies)
    print(f"Redis kills: {sum(kills)}, {duplicates} duplicates; spout {spout}; sink {sink}")
    # A kill can duplicate what was in flight then (pending trees and the spout's buffer,
    # 100 each; the sink's batch), not everything a second time.
    reconnects = spout["reconnects"] + sink["reconnects"]
    assert duplicates <= (reconnects + 1) * 3 * CONF["topology.max.spout.pending"]
    assert duplicates < len(bodies) // 4, duplicates
    assert sum(kills) > 0, "no connector's connection was killed: the run ended first"
    # Dozens of kills: some hit a command in flight, which ends its session (a kill
    # between two commands redis-py mends by itself, unseen by the metrics).
    assert spout["reconnects"] + sink["reconnects"] >= 1


def test_entries_a_dead_consumer_left_pending_are_claimed(r: Any, streams: Any) -> None:
    src, out, _ = streams
    bodies = [f"m{i}" for i in range(40)]
    put(r, src, bodies)
    # A consumer reads 15 entries and dies without acknowledging them.
    r.xreadgroup("g", "dead-worker", {src: ">"}, count=15)
    assert pending(r, src) == 15
    spout = RedisStreamSpout(
        src, "g", URL, claim_idle_secs=1.5, retry=RetryPolicy(max_delay_secs=0.1)
    )
    conf = {**CONF, "topology.message.timeout.secs": 0.5}
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-claim", conf, pipeline(spout, RedisStreamSink(out, URL)))
        assert until(lambda: set(read(r, out)) == set(bodies))
        assert until(lambda: pending(r, src) == 0)
        spout_counts = connector_totals(cluster.metrics("redis-claim")["source"])
    assert spout_counts["redelivered"] >= 15


def held_by_a_slow_bolt(src: str, hold_ticks: int, tick_secs: float) -> Any:
    """The stream's spout (claim idle time 1 s) -> a bolt that holds each entry
    ``hold_ticks`` ticks, resetting its tree's timeout at each."""
    b = TopologyBuilder()
    b.set_spout(
        "source",
        RedisStreamSpout(src, "g", URL, claim_idle_secs=1.0, retry=RetryPolicy(max_delay_secs=0.1)),
    )
    b.set_bolt("slow", SlowAcker(hold_ticks)).shuffle_grouping("source").add_configuration(
        "topology.tick.tuple.freq.secs", tick_secs
    )
    return b.create_topology()


def sample_idle_times(r: Any, src: str, idle: list[int]) -> None:
    """Add each pending entry's idle time to ``idle``; each was delivered once."""
    for entry in r.xpending_range(src, "g", "-", "+", 10):
        idle.append(entry["time_since_delivered"])
        assert entry["times_delivered"] == 1
    threading.Event().wait(0.05)


def test_reset_timeout_keeps_the_entrys_claim_fresh(r: Any, streams: Any) -> None:
    """A bolt holds the entry for ~3 s, three times the claim idle time, resetting its
    timeout each tick: the entry's idle time at the broker stays under the claim idle
    time (no other consumer could claim it), and it is delivered once."""
    src, _, _ = streams
    put(r, src, ["slow"])
    conf = {"topology.message.timeout.secs": 0.4}
    idle: list[int] = []
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-reset", conf, held_by_a_slow_bolt(src, 15, 0.2))
        assert until(lambda: pending(r, src) == 1)
        while pending(r, src):
            sample_idle_times(r, src, idle)
        metrics = connector_totals(cluster.metrics("redis-reset")["source"])
    assert len(idle) > 20 and max(idle) < 1000
    assert metrics["acked"] == 1 and metrics["failed"] == 0


def test_entries_waiting_in_the_spouts_buffer_keep_their_claim_fresh(r: Any, streams: Any) -> None:
    """Max spout pending (2) is held by two trees a bolt keeps alive, so the two entries
    fetched after them wait in the spout's buffer for the whole test, three times the
    claim idle time. Their idle time at the broker stays under it all the same (no other
    consumer could claim them), and every entry is delivered once."""
    src, _, _ = streams
    put(r, src, [f"m{i}" for i in range(10)])
    conf = {"topology.message.timeout.secs": 0.4, "topology.max.spout.pending": 2}
    idle: list[int] = []
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-buffered", conf, held_by_a_slow_bolt(src, 10_000, 0.1))
        assert until(lambda: pending(r, src) == 4)  # two emitted, two buffered
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            sample_idle_times(r, src, idle)
        counts = connector_totals(cluster.metrics("redis-buffered")["source"])
    assert len(idle) > 100 and max(idle) < 1000, max(idle)
    assert counts["held"] == 2 and counts["buffered"] == 2 and counts["renewed"] >= 10


def test_a_missing_group_is_refused_at_submit_naming_it(r: Any, streams: Any) -> None:
    src, _, _ = streams
    with LocalCluster() as cluster, pytest.raises(ConnectorError) as err:
        cluster.submit_topology(
            "t", CONF, pipeline(RedisStreamSpout(src, "nope", URL), SlowAcker(1))
        )
    assert "consumer group 'nope' does not exist" in str(err.value)
    assert "RedisStreamSpout 'source'" in str(err.value) and "127.0.0.1:6379" in err.value.address


def test_a_missing_stream_and_an_unreachable_server_are_refused_at_submit(r: Any) -> None:
    with LocalCluster() as cluster:
        with pytest.raises(ConnectorError, match="does not exist"):
            spout = RedisStreamSpout(f"tt-none-{uuid.uuid4().hex}", "g", URL)
            cluster.submit_topology("t", CONF, pipeline(spout, SlowAcker(1)))
        with pytest.raises(ConnectorError) as err:
            spout = RedisStreamSpout("s", "g", "redis://:secret@127.0.0.1:1/0")
            cluster.submit_topology("t", CONF, pipeline(spout, SlowAcker(1)))
        assert "127.0.0.1:1" in str(err.value) and "secret" not in str(err.value)
        with pytest.raises(ConnectorError, match="RedisStreamSink 'sink'"):
            sink = RedisStreamSink("s", "redis://127.0.0.1:1/0")
            cluster.submit_topology("t", CONF, pipeline(FeederSpout(["message"]), sink))


def test_a_claim_idle_time_under_the_trees_lifetime_is_refused(r: Any, streams: Any) -> None:
    src, out, _ = streams
    spout = RedisStreamSpout(src, "g", URL, claim_idle_secs=30)
    with LocalCluster() as cluster, pytest.raises(InvalidConfigError) as err:
        cluster.submit_topology("t", CONF, pipeline(spout, RedisStreamSink(out, URL)))
    assert err.value.key == "topology.message.timeout.secs"
    assert "claim_idle_secs" in str(err.value)


def test_the_sinks_batched_appends_keep_order_trim_and_refuse_per_entry(r: Any) -> None:
    """The sink appends a batch with one script call: entries keep the inputs' order,
    MAXLEN ~ trims, and a key of the wrong type refuses each body with Redis's reason."""
    from tupletree.connectors.redis import _SinkSession

    tag = uuid.uuid4().hex[:10]
    out, trimmed, wrong = f"tt-out-{tag}", f"tt-trim-{tag}", f"tt-wrong-{tag}"
    r.set(wrong, "not a stream")
    try:
        bodies = [f"m{i}".encode() for i in range(600)]
        session = _SinkSession(RedisStreamSink(out, URL))
        assert session.write(bodies[:300]) == [None] * 300
        r.script_flush()  # a restarted server has lost the script: it is loaded again
        assert session.write(bodies[300:]) == [None] * 300
        assert session.append_all is not None  # still the script, not the fallback
        assert [fields[b"message"] for _, fields in r.xrange(out)] == bodies
        assert _SinkSession(RedisStreamSink(trimmed, URL, maxlen=10)).write(bodies) == [None] * 600
        assert 10 <= r.xlen(trimmed) < 600
        verdicts = _SinkSession(RedisStreamSink(wrong, URL)).write([b"a", b"b"])
        assert len(verdicts) == 2 and all("WRONGTYPE" in (v or "") for v in verdicts)
        assert wrong in (verdicts[0] or "")
    finally:
        r.delete(out, trimmed, wrong)


def test_a_server_that_refuses_scripts_gets_a_pipeline_instead(r: Any) -> None:
    """A user whose ACL denies scripting still writes: the sink falls back to one XADD
    per body, with the same verdicts."""
    from tupletree.connectors.redis import _SinkSession

    tag = uuid.uuid4().hex[:10]
    user, password, out = f"tt-noscript-{tag}", uuid.uuid4().hex, f"tt-out-{tag}"
    r.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "+@all", "-@scripting")
    try:
        session = _SinkSession(RedisStreamSink(out, f"redis://{user}:{password}@127.0.0.1:6379/0"))
        assert session.write([b"a", b"b"]) == [None, None]
        assert session.append_all is None  # it tried the script once, then stopped
        assert session.write([b"c"]) == [None]
        assert [fields[b"message"] for _, fields in r.xrange(out)] == [b"a", b"b", b"c"]
    finally:
        r.execute_command("ACL", "DELUSER", user)
        r.delete(out)


@pytest.mark.parametrize("maxlen", [0, -5, "100", 2.5, True])
def test_a_bad_maxlen_is_refused_when_the_sink_is_made(maxlen: Any) -> None:
    with pytest.raises(ValueError, match="maxlen must be a positive integer"):
        RedisStreamSink("s", URL, maxlen=maxlen)


def test_refused_credentials_are_an_error_naming_connector_address_and_cause(
    r: Any, streams: Any
) -> None:
    """A user Redis does not know: submit fails with the connector, the address without
    the password, and Redis's own words."""
    src, out, _ = streams
    url = f"redis://tt-nobody-{uuid.uuid4().hex[:6]}:hunter2@127.0.0.1:6379/0"
    with LocalCluster() as cluster:
        for spout, sink, name in (
            (RedisStreamSpout(src, "g", url), None, "RedisStreamSpout 'source'"),
            (FeederSpout(["message"]), RedisStreamSink(out, url), "RedisStreamSink 'sink'"),
        ):
            with pytest.raises(ConnectorError) as err:
                cluster.submit_topology("t", CONF, pipeline(spout, sink, bolt=SlowAcker(1)))
            text = str(err.value)
            assert name in text and "127.0.0.1:6379" in text and "hunter2" not in text
            assert "WRONGPASS" in text or "invalid username-password" in text, text


# -- promises a mutation run found untested ---------------------------------------------

EXECUTED: collections.Counter[str] = collections.Counter()


class CountThenHold(Bolt):
    """Counts each execution per message; acks once ``RELEASE`` is set (held meanwhile,
    so the spout holds the entries while the test drops its connection)."""

    outputs: list[str] = []

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tup: Any) -> None:
        if not tup.is_tick():
            EXECUTED[tup[0]] += 1
            self.held.append(tup)
        if RELEASE.is_set():
            for held in self.held:
                self.collector.ack(held)
            self.held.clear()


RELEASE = threading.Event()


def test_an_entry_failed_while_its_replay_waits_stays_pending_if_the_topology_dies(
    r: Any, streams: Any
) -> None:
    """A failed entry waits 30 s for its replay; the topology is killed meanwhile (its
    close sends every queued settle): the entry is still pending in the group, for the
    next consumer, not acknowledged (XACK) with the failure."""
    src, _, _ = streams
    put(r, src, [POISON, "fine"])
    spout = RedisStreamSpout(
        src,
        "g",
        URL,
        claim_idle_secs=200,
        retry=RetryPolicy(initial_delay_secs=30, max_delay_secs=30),
    )
    b = TopologyBuilder()
    b.set_spout("source", spout)
    b.set_bolt("work", FailPoison()).shuffle_grouping("source")
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-retry-wait", CONF, b.create_topology())
        assert until(
            lambda: (
                connector_totals(cluster.metrics("redis-retry-wait")["source"]).get("acked") == 1
            )
        )
        assert connector_totals(cluster.metrics("redis-retry-wait")["source"])["retried"] == 1
        cluster.kill_topology("redis-retry-wait")
    entries = r.xpending_range(src, "g", "-", "+", 10)
    assert [e["message_id"] for e in entries] == [r.xrange(src)[0][0]]  # the poison's


def test_entries_held_across_a_dropped_connection_are_executed_once(r: Any, streams: Any) -> None:
    """Five entries held by a bolt while the spout's connection is killed: the new
    session re-reads them from the group's pending list, and the spout, which holds
    them, must not emit them again: each is executed exactly once."""
    src, _, _ = streams
    bodies = [f"m{i}" for i in range(5)]
    put(r, src, bodies)
    EXECUTED.clear()
    RELEASE.clear()
    b = TopologyBuilder()
    b.set_spout("source", RedisStreamSpout(src, "g", URL))
    b.set_bolt("hold", CountThenHold()).shuffle_grouping("source").add_configuration(
        "topology.tick.tuple.freq.secs", 0.1
    )
    killer = redis.Redis.from_url(URL)
    try:
        with LocalCluster() as cluster:
            cluster.submit_topology("redis-held", CONF, b.create_topology())
            assert until(lambda: sum(EXECUTED.values()) == 5)

            # Killed between two commands, the spout's connection is found closed when
            # redis-py's pool hands it out next, and the pool reconnects it silently: no
            # reply was lost, so no new session is needed, and none is counted (about
            # one run in six here). Only a kill during a command (the spout's blocking
            # read, most of its time) starts the new session this test is about: kill
            # again until one does.
            def reconnected() -> bool:
                totals = connector_totals(cluster.metrics("redis-held")["source"])
                return totals["reconnects"] >= 1

            for _ in range(20):
                for client in killer.client_list():
                    if client.get("name", "").startswith("tupletree:RedisStreamSpout"):
                        killer.client_kill_filter(_id=client["id"])
                if until(reconnected, secs=3):
                    break
            assert reconnected()
            # The new session has re-read the pending entries once its own cursor ran dry.
            assert until(
                lambda: connector_totals(cluster.metrics("redis-held")["source"])["buffered"] == 0
            )
            RELEASE.set()
            assert until(lambda: pending(r, src) == 0)
    finally:
        killer.close()
    assert dict(EXECUTED) == {body: 1 for body in bodies}
