"""Workers of one host reach each other over a Unix socket (Linux's abstract namespace),
workers of different hosts over TCP; both paths carry sealed frames only."""

from __future__ import annotations

import sys
from collections import deque
from typing import Any

import pytest
import zmq

from tests.distributed.test_transport import flush_all, receive_all
from tupletree.config import Config, validate
from tupletree.distributed import transport as transport_module
from tupletree.distributed.control import data_key, new_secret
from tupletree.distributed.transport import Transport, same_host_endpoint
from tupletree.errors import InvalidConfigError
from tupletree.topology.fields import Fields
from tupletree.topology.tuple import Tuple, TupleSource

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's"
)

KEY = data_key(new_secret())
SRC = TupleSource("split", "default", 3, Fields(["word"]))


def transport(host: str = "127.0.0.1", **kwargs: Any) -> Transport:
    return Transport(zmq.Context.instance(), host, KEY, lambda item, exc: None, **kwargs)


def send_words(a: Transport, words: list[str]) -> None:
    inbox = a.remote_inbox(5, worker=1)
    inbox.extend(Tuple([w], SRC, 11, 22) for w in words)
    flush_all(a)


def assert_crosses(a: Transport, b: Transport, words: list[str]) -> None:
    """``words`` sent from ``a`` arrive at ``b``, in order; then both are closed."""
    send_words(a, words)
    inboxes: dict[int, Any] = {5: deque()}
    receive_all(b, inboxes, len(words))
    assert [t.values[0] for t in inboxes[5]] == words
    a.close()
    b.close()


def test_peers_of_one_host_use_the_unix_socket_and_not_tcp() -> None:
    """With the receiver's TCP endpoint closed, a peer of the same host still gets
    its frames through: they travel over the Unix socket named after the address."""
    a, b = transport(), transport()
    b.socket.unbind(b.address)  # no TCP left to the receiver
    a.set_peer(1, b.address)
    assert a.endpoints[1] == same_host_endpoint(b.address)
    assert a.endpoints[1].startswith("ipc://@")
    sender = a.address
    assert_crosses(a, b, ["over", "the", "unix", "socket"])
    assert b.received_from == {sender: 1}  # counted by the sender's TCP address


def test_peers_of_different_hosts_use_tcp() -> None:
    """127.0.0.2 and 127.0.0.3 stand for two hosts (as in the standalone cluster's
    tests): with the receiver's Unix socket closed, frames still arrive, over TCP."""
    a, b = transport("127.0.0.2"), transport("127.0.0.3")
    b.socket.unbind(same_host_endpoint(b.address))
    a.set_peer(1, b.address)
    assert a.endpoints[1] == b.address
    assert_crosses(a, b, ["across", "hosts"])


def test_turned_off_it_binds_no_unix_socket_and_sends_over_tcp() -> None:
    a, b = transport(same_host_ipc=False), transport(same_host_ipc=False)
    probe = zmq.Context.instance().socket(zmq.PULL)
    probe.bind(same_host_endpoint(b.address))  # free: b never bound it
    probe.close(linger=0)
    a.set_peer(1, b.address)
    assert a.endpoints[1] == b.address
    assert_crosses(a, b, ["tcp"])


def test_a_frame_pushed_to_the_unix_socket_unsealed_or_under_another_key_is_refused() -> None:
    """Any process of the host can write to the Unix socket, as to the TCP port: what
    it writes is checked the same way and delivers nothing."""
    reports: list[str] = []
    b = Transport(
        zmq.Context.instance(), "127.0.0.1", KEY, lambda i, e: None, on_rejected=reports.append
    )
    forger = Transport(zmq.Context.instance(), "127.0.0.1", data_key(new_secret()), print)
    forger.set_peer(1, b.address)
    assert forger.endpoints[1].startswith("ipc://@")
    send_words(forger, ["forged"])
    raw = zmq.Context.instance().socket(zmq.PUSH)
    raw.connect(same_host_endpoint(b.address))
    raw.send(b"\x80\x04 not a frame, never unpickled")
    inboxes: dict[int, Any] = {5: deque()}
    poller = zmq.Poller()
    poller.register(b.socket, zmq.POLLIN)
    for _ in range(100):
        b.receive(inboxes, 10)
        if b.rejections.total >= 2:
            break
        poller.poll(20)
    assert b.rejections.total == 2
    assert not inboxes[5]
    assert b.received_from == {}
    assert reports and "mac" in reports[0]
    raw.close(linger=0)
    forger.close()
    b.close()


def test_a_taken_unix_socket_name_makes_it_pick_another_port(monkeypatch: Any) -> None:
    """The name follows the TCP port; a process that took the name of a port before
    the worker bound it costs the worker a retry on another port, not its start."""
    ctx = zmq.Context.instance()
    real = zmq.Socket.bind_to_random_port
    squatters: list[zmq.Socket] = []
    taken: list[int] = []

    def first_port_squatted(self: zmq.Socket, addr: str, *args: Any, **kwargs: Any) -> int:
        port = real(self, addr, *args, **kwargs)
        if not squatters:
            squatter = ctx.socket(zmq.PULL)
            squatter.bind(same_host_endpoint(f"{addr}:{port}"))
            squatters.append(squatter)
            taken.append(port)
        return port

    monkeypatch.setattr(zmq.Socket, "bind_to_random_port", first_port_squatted)
    b = transport()
    assert b.address != f"tcp://127.0.0.1:{taken[0]}"
    a = transport()
    a.set_peer(1, b.address)
    assert_crosses(a, b, ["retried"])
    squatters[0].close(linger=0)


def test_when_every_name_is_taken_the_error_names_the_setting(monkeypatch: Any) -> None:
    ctx = zmq.Context.instance()
    real = zmq.Socket.bind_to_random_port
    squatters: list[zmq.Socket] = []

    def squatted(self: zmq.Socket, addr: str, *args: Any, **kwargs: Any) -> int:
        port = real(self, addr, *args, **kwargs)
        squatter = ctx.socket(zmq.PULL)
        squatter.bind(same_host_endpoint(f"{addr}:{port}"))
        squatters.append(squatter)
        return port

    monkeypatch.setattr(zmq.Socket, "bind_to_random_port", squatted)
    with pytest.raises(OSError, match=r"tupletree\.worker\.same\.host\.ipc"):
        transport()
    assert len(squatters) == transport_module.BIND_ATTEMPTS
    for s in squatters:
        s.close(linger=0)


def test_the_setting_is_on_by_default_and_must_be_a_bool() -> None:
    assert validate({})[Config.TUPLETREE_WORKER_SAME_HOST_IPC] is True
    with pytest.raises(InvalidConfigError, match=r"tupletree\.worker\.same\.host\.ipc"):
        validate({Config.TUPLETREE_WORKER_SAME_HOST_IPC: "no"})
