"""Killing a DRPC topology while requests are in flight: their callers get an error at
once, not after drpc.request.timeout.secs (600 s by default)."""

from __future__ import annotations

import threading
import time
from typing import Any

from tupletree.config import Config
from tupletree.drpc import (
    DRPCClient,
    DRPCExecutionError,
    DRPCServer,
    DRPCTimeoutError,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
)

from .support import NeverFinish, remote_conf

REQUEST_TIMEOUT = 60  # a caller still waiting when the test ends would fail it anyway
IN_FLIGHT = 3


def _call_in_background(execute: Any) -> tuple[list[threading.Thread], list[Any]]:
    outcomes: list[Any] = []

    def call(i: int) -> None:
        started = time.monotonic()
        try:
            outcomes.append((execute(f"x{i}"), time.monotonic() - started))
        except Exception as exc:
            outcomes.append((exc, time.monotonic() - started))

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(IN_FLIGHT)]
    for t in threads:
        t.start()
    return threads, outcomes


def _wait_fetched(book: Any, n: int) -> None:
    deadline = time.monotonic() + 5
    while (book.pending() < n or book.queued() > 0) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert book.pending() == n and book.queued() == 0, "the requests were not fetched"


def _assert_failed_promptly(threads: list[threading.Thread], outcomes: list[Any]) -> None:
    deadline = time.monotonic() + 3
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), (
        "callers of a killed topology still wait (they would until drpc.request.timeout.secs)"
    )
    assert len(outcomes) == IN_FLIGHT
    for outcome, _took in outcomes:
        assert isinstance(outcome, DRPCExecutionError), outcome
        assert not isinstance(outcome, DRPCTimeoutError), outcome
        assert "stopped" in str(outcome)


def test_local_drpc_callers_of_a_killed_topology_get_an_error_at_once(cluster):
    """A user killed a LocalDRPC topology while three requests were in its bolts: the
    callers stayed blocked in LocalDRPC.execute until drpc.request.timeout.secs (10
    minutes by default), then got a timeout that said nothing of the kill."""
    with LocalDRPC({Config.DRPC_REQUEST_TIMEOUT_SECS: REQUEST_TIMEOUT}) as drpc:
        builder = LinearDRPCTopologyBuilder("held")
        builder.add_bolt(NeverFinish(), 2)
        conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3600}
        cluster.submit_topology("held", conf, builder.create_local_topology(drpc))
        threads, outcomes = _call_in_background(lambda a: drpc.execute("held", a))
        _wait_fetched(drpc.book, IN_FLIGHT)
        cluster.kill_topology("held")
        _assert_failed_promptly(threads, outcomes)
        assert drpc.pending_requests() == 0


def test_drpc_server_callers_of_a_killed_topology_get_an_error_at_once(cluster):
    """The same through a DRPCServer and DRPCClient: the HTTP callers waited for the
    request timeout (504) although the topology serving them was gone."""
    conf = {Config.DRPC_REQUEST_TIMEOUT_SECS: REQUEST_TIMEOUT}
    with DRPCServer(port=0, conf=conf) as server:
        builder = LinearDRPCTopologyBuilder("held")
        builder.add_bolt(NeverFinish(), 2)
        topology_conf = remote_conf(server, **{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3600})
        cluster.submit_topology("held", topology_conf, builder.create_remote_topology())
        threads, outcomes = _call_in_background(
            lambda a: DRPCClient(server.host, server.port).execute("held", a)
        )
        _wait_fetched(server.book, IN_FLIGHT)
        cluster.kill_topology("held")
        _assert_failed_promptly(threads, outcomes)
        assert server.pending_requests() == 0


def test_answered_requests_are_not_failed_by_the_kill(cluster):
    """Requests answered before the kill keep their answers; the next topology serving
    the function answers as before."""
    with LocalDRPC({Config.DRPC_REQUEST_TIMEOUT_SECS: REQUEST_TIMEOUT}) as drpc:
        from .support import ExclamationDRPC

        builder = LinearDRPCTopologyBuilder("ex")
        builder.add_bolt(ExclamationDRPC(), 2)
        cluster.submit_topology("ex", {}, builder.create_local_topology(drpc))
        assert drpc.execute("ex", "a") == "a!!!"
        cluster.kill_topology("ex")
        cluster.submit_topology("ex", {}, builder.create_local_topology(drpc))
        assert drpc.execute("ex", "b") == "b!!!"
        assert drpc.pending_requests() == 0
