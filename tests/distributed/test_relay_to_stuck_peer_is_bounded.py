"""A worker that relays tuples from a live sender to a peer that stopped reading must
stop reading too, not hold every frame it relays.

What a user saw: worker A runs a bolt fed by worker C's spout and emitting to a bolt on
worker B. B hangs (a bolt stuck in ``execute``, a paused process). A's transport queued
every frame it made for B, while A kept reading C's frames as fast as C sent them: C
never saw backpressure, its spouts never stopped, and A's memory grew without limit
(about 10 MB a second on loopback here) until it was killed, its frames lost with it.
Expected: once A's frames waiting for B hold ``stalled_bytes_limit`` bytes, A reads
nothing more, C's socket fills and C blocks (its spouts stop); and once B reads again,
every item C sent arrives, none lost."""

from __future__ import annotations

import threading
from collections import deque

import zmq

from tupletree import BasicBolt, Config, Spout, TopologyBuilder
from tupletree.config import validate
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.transport import Transport
from tupletree.runtime.worker import Worker, make_layout
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

KEY = data_key(new_secret())
LIMIT = 256 * 1024


def stalled(transport: Transport) -> int:
    """Bytes of the frames waiting for peers' sockets (counted here, not trusted)."""
    return sum(len(p) for payloads in transport._stalled.values() for p in payloads)


class Source(Spout):
    outputs = ["n"]

    def next_tuple(self) -> None:
        pass


class Relay(BasicBolt):
    outputs = ["n"]

    def execute(self, tup, collector) -> None:
        collector.emit([tup.get("n")])


class Sink(BasicBolt):
    def execute(self, tup, collector) -> None:
        pass


def test_a_relay_whose_peer_stopped_reading_stops_reading_and_loses_nothing() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", Source())
    builder.set_bolt("relay", Relay()).shuffle_grouping("src")
    builder.set_bolt("sink", Sink()).shuffle_grouping("relay")
    topology = builder.create_topology()
    conf = validate({Config.TOPOLOGY_WORKERS: 3, Config.TOPOLOGY_ACKER_EXECUTORS: 0})
    tasks = make_layout(topology, conf).component_to_tasks
    relay, sink, spout = tasks["relay"][0], tasks["sink"][0], tasks["src"][0]
    placement = {relay: 0, sink: 1, spout: 2}

    ctx = zmq.Context.instance()
    a = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    b = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    c = Transport(ctx, "127.0.0.1", KEY, lambda item, exc: None)
    a.stalled_bytes_limit = LIMIT
    try:
        worker = Worker(
            "relay",
            topology,
            conf,
            lambda: 0.0,
            local_tasks={relay},
            remote_inbox=lambda t: a.remote_inbox(t, placement[t]),
            link=a,
        )
        a.set_peers({1: b.address}, 0)
        c.set_peer(0, a.address)
        worker.start(active=True)
        source = TupleSource("src", "default", spout, Fields(["n"]))
        to_relay = c.remote_inbox(relay, 0)
        sent = 0
        most_stalled = 0
        # C acts as a spout that stops while its transport is blocked; B never reads.
        for _ in range(1500):
            if not c.blocked():
                for _ in range(512):
                    to_relay.append(Tuple([sent], source))
                    sent += 1
            c.flush()
            worker.step(0.0)
            most_stalled = max(most_stalled, stalled(a))
        # One flush's frames past the limit at most: what the relay made of one step.
        assert most_stalled < 4 * LIMIT, (
            f"{most_stalled:,} bytes stalled at the relay (limit {LIMIT:,}) after the "
            f"sender sent {sent:,} items"
        )
        assert c.blocked(), (
            f"the sender never felt backpressure: {sent} items sent, "
            f"{stalled(a):,} bytes stalled at the relay"
        )

        assert a.stalled_bytes == stalled(a)
        # B reads again: everything C sent arrives, in order.
        got: deque = deque()
        inboxes = {sink: got}
        for _ in range(20000):
            c.flush()
            worker.step(0.0)
            b.receive(inboxes, 64)
            if len(got) >= sent:
                break
            if not (c.blocked() or a.blocked() or worker.inboxes[relay] or a.buffered()):
                threading.Event().wait(0.001)
        assert [t.values[0] for t in got] == list(range(sent))
    finally:
        a.close()
        b.close()
        c.close()
