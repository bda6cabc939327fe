"""An in-memory broker with RabbitMQ's delivery semantics, for testing the common
connector machinery without a real broker: deliveries are tagged per connection
(epoch); dropping the connection requeues what it held, marked redelivered."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from tupletree.connectors import BrokerSink, BrokerSpout, Delivery
from tupletree.connectors.spout import ACK, DEAD, TOUCH


class FakeBroker:
    def __init__(self, bodies: list[bytes] = ()) -> None:  # type: ignore[assignment]
        self.lock = threading.Lock()
        self.ready: deque[tuple[bytes, bool]] = deque((b, False) for b in bodies)
        self.unacked: dict[tuple[int, int], bytes] = {}
        self.dead: list[bytes] = []
        self.written: list[bytes] = []
        self.touched = 0
        self.epoch_alive = 0
        self.down = False
        self.refuse: set[bytes] = set()
        self.idle_wait = 0.005  # how long a fetch with nothing to give waits
        self.fetch_gate = threading.Event()  # ... and then until it is set
        self.fetch_gate.set()
        self.sink_gate = threading.Event()  # writes wait until it is set
        self.sink_gate.set()

    def drop_connections(self) -> None:
        """The broker closes every connection: what they held goes back, redelivered."""
        with self.lock:
            for key in sorted(self.unacked):
                self.ready.appendleft((self.unacked[key], True))
            self.unacked.clear()
            self.epoch_alive = -1


class FakeSession:
    def __init__(self, broker: FakeBroker, epoch: int) -> None:
        if broker.down:
            raise ConnectionRefusedError("connection refused")
        self.broker = broker
        self.epoch = epoch
        self.tag = 0
        broker.epoch_alive = epoch

    def _alive(self) -> None:
        if self.broker.epoch_alive != self.epoch:
            raise ConnectionResetError("connection closed by the broker")

    def fetch(self, max_messages: int, timeout: float) -> list[Delivery]:
        b = self.broker
        with b.lock:
            self._alive()
            out = []
            while b.ready and len(out) < max_messages:
                body, redelivered = b.ready.popleft()
                self.tag += 1
                b.unacked[(self.epoch, self.tag)] = body
                out.append(Delivery((self.epoch, self.tag), body, self.epoch, redelivered))
        if not out:
            threading.Event().wait(b.idle_wait)
            b.fetch_gate.wait(30)
        return out

    def keepalive(self) -> None:
        """As a real client's heartbeat would, find out that the broker dropped us."""
        with self.broker.lock:
            self._alive()

    def settle(self, actions: list[tuple[str, Delivery]]) -> None:
        b = self.broker
        with b.lock:
            self._alive()
            for action, d in actions:
                assert d.epoch == self.epoch, "a settle for another channel's tag was sent"
                if action == ACK:
                    del b.unacked[d.key]
                elif action == DEAD:
                    b.dead.append(b.unacked.pop(d.key))
                elif action == TOUCH:
                    b.touched += 1

    def close(self) -> None:
        pass


class FakeSpout(BrokerSpout):
    settles_survive_reconnect = False

    def __init__(self, broker_name: str, lease_secs: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.broker_name = broker_name
        self.lease_secs = lease_secs

    def connect(self, epoch: int) -> FakeSession:
        return FakeSession(BROKERS[self.broker_name], epoch)

    def address(self) -> str:
        return f"fake://{self.broker_name}"

    def leases(self, conf: dict[str, Any]) -> list[tuple[str, float | None, str]]:
        return [("lease_secs", self.lease_secs, "the fake broker's lease")]


class FakeSinkSession:
    def __init__(self, broker: FakeBroker) -> None:
        if broker.down:
            raise ConnectionRefusedError("connection refused")
        self.broker = broker

    def write(self, bodies: list[bytes]) -> list[str | None]:
        self.broker.sink_gate.wait()
        out: list[str | None] = []
        with self.broker.lock:
            for body in bodies:
                if body in self.broker.refuse:
                    out.append("refused by the fake broker")
                else:
                    self.broker.written.append(body)
                    out.append(None)
        return out

    def close(self) -> None:
        pass


class FakeSink(BrokerSink):
    def __init__(self, broker_name: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.broker_name = broker_name

    def connect(self) -> FakeSinkSession:
        return FakeSinkSession(BROKERS[self.broker_name])

    def address(self) -> str:
        return f"fake://{self.broker_name}"


BROKERS: dict[str, FakeBroker] = {}
