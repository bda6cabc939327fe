"""A bolt of a linear DRPC topology raising for a request: the caller's
DRPCExecutionError says which bolt and what it raised (type and message, cut to a few
hundred characters), not only that the request's tuple tree failed. Before, every
failure read the same ("the request's tuple tree failed ..."), and what the bolt raised
was only in the topology's errors, with nothing tying it to the request."""

from __future__ import annotations

import pytest

from tupletree import Config
from tupletree.drpc import (
    DRPCClient,
    DRPCExecutionError,
    DRPCServer,
    DRPCTimeoutError,
    LinearDRPCTopologyBuilder,
)

from .support import RaiseOn, Reverse, remote_conf

# An hour: a failure heard only through the tree's timeout would fail the test (by the
# request timeout, DRPCTimeoutError, 60 s).
CONF = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 3600}


def checked(drpc=None):
    builder = LinearDRPCTopologyBuilder("checked")
    builder.add_bolt(Reverse(), 2)
    builder.add_bolt(RaiseOn(), 2).shuffle_grouping()
    return builder.create_local_topology(drpc) if drpc else builder.create_remote_topology()


def failure(execute, args: str) -> DRPCExecutionError:
    with pytest.raises(DRPCExecutionError) as info:
        execute("checked", args)
    assert not isinstance(info.value, DRPCTimeoutError), info.value
    return info.value


def test_the_bolt_and_its_exception_reach_the_caller(cluster, drpc):
    cluster.submit_topology("checked", CONF, checked(drpc))
    assert drpc.execute("checked", "cba") == "abc"
    err = failure(drpc.execute, "dab")  # "bad" once reversed by bolt0
    assert err.function == "checked"
    assert "bolt1 (RaiseOn)" in err.reason, err.reason
    assert "ValueError: cannot take 'bad'" in err.reason, err.reason
    assert "ValueError: cannot take 'bad'" in str(err)
    assert "tuple tree failed" in err.reason  # what it always said, still said
    assert drpc.execute("checked", "zyx") == "xyz"  # the topology goes on
    assert drpc.pending_requests() == 0


def test_a_long_exception_message_is_cut(cluster, drpc):
    cluster.submit_topology("checked", CONF, checked(drpc))
    err = failure(drpc.execute, "gnol")  # "long"
    assert "bolt1 (RaiseOn)" in err.reason and "RuntimeError: yyyy" in err.reason
    assert 100 <= err.reason.count("y") <= 500, len(err.reason)
    assert "more characters]" in err.reason, err.reason[-200:]
    assert len(err.reason) < 1000, len(err.reason)


def test_the_bolt_and_its_exception_reach_an_http_caller(cluster):
    """Over HTTP, with the server's invocations token: ReturnResults fails the request
    with the reason on the token's endpoint, and the client raises it."""
    token = "reason-token-" + "r" * 24
    with DRPCServer(port=0, invocations_token=token) as server:
        conf = remote_conf(server, **CONF, **{Config.DRPC_INVOCATIONS_TOKEN: token})
        cluster.submit_topology("checked", conf, checked())
        client = DRPCClient(server.host, server.port)
        assert client.execute("checked", "cba") == "abc"
        err = failure(client.execute, "dab")
        assert "bolt1 (RaiseOn)" in err.reason, err.reason
        assert "ValueError: cannot take 'bad'" in err.reason, err.reason
        err = failure(client.execute, "gnol")
        assert "RuntimeError: yyyy" in err.reason and len(err.reason) < 1100, len(err.reason)
        assert server.pending_requests() == 0


class _Collector:
    def __init__(self) -> None:
        self.emitted: list[tuple[list, object]] = []

    def emit(self, values: list, msg_id: object = None) -> None:
        self.emitted.append((values, msg_id))


class _Context:
    """A task's context on a simulated clock (``clock``, seconds)."""

    clock = 0.0

    def wakeup(self) -> None:
        pass

    def now(self) -> float:
        return self.clock


def test_the_spout_tells_a_failed_tree_after_its_grace(drpc):
    """Across workers nothing orders the reason's path (bolt, join-result,
    return-results) before the acker's (acker, spout): the builder's spout tells the
    server of a failed tree ``failure_grace_secs`` late, so the reason, when there is
    one, is the failure the server keeps; deactivate tells at once."""
    from tupletree.drpc import DRPCSpout

    spout = DRPCSpout("graced", drpc, failure_grace_secs=0.3)
    collector = _Collector()
    context = _Context()
    spout.open({}, context, collector)
    try:
        reqs = [drpc.book.submit("graced", args) for args in "abc"]
        for _ in reqs:
            spout.next_tuple()
        ids = [msg_id for _values, msg_id in collector.emitted]
        assert ids == [req.id for req in reqs]
        spout.fail(ids[0])
        spout.fail(ids[1])
        spout.next_tuple()
        assert not any(req.done.is_set() for req in reqs)  # within the grace
        drpc.book.fail(ids[0], "bolt1 (X) raised ValueError: why")  # the topology's
        context.clock += 0.29
        spout.next_tuple()
        assert not reqs[1].done.is_set()  # still within it
        context.clock += 0.02
        spout.next_tuple()
        with pytest.raises(DRPCExecutionError, match="ValueError: why"):
            reqs[0].outcome()
        with pytest.raises(DRPCExecutionError, match="tuple tree failed in the topology"):
            reqs[1].outcome()
        spout.fail(ids[2])
        spout.deactivate()
        assert reqs[2].done.is_set()
    finally:
        spout.close()
