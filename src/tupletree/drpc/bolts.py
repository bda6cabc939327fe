"""The fixed bolts of a linear DRPC topology: PrepareRequest, JoinResult, ReturnResults.

    drpc-spout --[args, return-info]--> prepare-request
        default [request, args]         -> bolt0 (the user's first bolt)
        "ret"   [request, return-info]  -> join-result
        "id"    [request]               -> the last user bolt (if a FinishedCallback)
    last user bolt --[request, result]--> join-result --[result, return-info]--> return-results
    any user bolt --"__drpc_failure" [request, reason]--> join-result
        --"__drpc_failure" [reason, return-info]--> return-results

PrepareRequest gives each request a random 63-bit id, the key every later tuple of the
request carries in field 0. JoinResult pairs the result with the return info.
ReturnResults delivers the result to the DRPC server the return info names (a LocalDRPC
in this process, or a DRPCServer over HTTP) and acks, which completes the request's
tuple tree; if delivery fails it fails the tuple, and the spout tells the server.

A user bolt that raised for a request (coordinated_bolt.py) says why on the failure
stream; JoinResult pairs the reason with the return info (the first reason of a request
wins, a result paired already wins over it), fails the return tuple, and ReturnResults
fails the request at its server with that reason, so the caller's DRPCExecutionError
names the bolt and its exception. The spout's own report of the failed tree (the same
request, with no reason) waits ``failure_grace_secs`` so that this one comes first.
"""

from __future__ import annotations

import random
from typing import Any

from tupletree.config import Config
from tupletree.drpc import registry
from tupletree.drpc.coordinated_bolt import FAILURE_STREAM
from tupletree.drpc.expiry import TickExpiry
from tupletree.drpc.invocations import DRPC_INVOCATIONS_TOKEN, ResultSender, parse_return_info
from tupletree.drpc.pending import PendingRequests
from tupletree.topology.components import BasicBolt, Bolt

ARGS_STREAM = "default"
RETURN_STREAM = "ret"
ID_STREAM = "id"


def result_text(value: Any) -> str:
    """DRPC results are text, as in Storm (``"" + value``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class PrepareRequest(BasicBolt):
    """``[args, return-info]`` -> a request id, then the request on three streams."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(ARGS_STREAM, ["request", "args"])
        declarer.declare_stream(RETURN_STREAM, ["request", "return-info"])
        declarer.declare_stream(ID_STREAM, ["request"])

    def prepare(self, conf: dict[str, Any], context: Any) -> None:
        self._rng = random.Random()  # seeded from os.urandom: ids differ across tasks/runs

    def execute(self, tup: Any, collector: Any) -> None:
        if tup.is_tick():
            return
        request = self._rng.getrandbits(63) or 1
        collector.emit([request, tup[0]], ARGS_STREAM)
        collector.emit([request, tup[1]], RETURN_STREAM)
        collector.emit([request], ID_STREAM)


class JoinResult(Bolt):
    """Pairs ``[request, result]`` from the last bolt with ``[request, return-info]``
    from ``return_component`` and emits ``[result, return-info]`` anchored to both.

    Unpaired halves expire (and are failed) a message timeout after they arrived.
    ``[request, reason]`` on the failure stream fails the request with ``reason``
    instead: ``[reason, return-info]`` on that stream (for ReturnResults), and the
    return tuple is failed.
    """

    def __init__(self, return_component: str) -> None:
        self.return_component = return_component

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["result", "return-info"])
        declarer.declare_stream(FAILURE_STREAM, ["reason", "return-info"])

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30
        self._returns: TickExpiry[Any] = TickExpiry(timeout)
        self._results: TickExpiry[Any] = TickExpiry(timeout)
        # Requests already paired, so a later result for one is known as a second one.
        self._answered: TickExpiry[bool] = TickExpiry(timeout)
        # Why a request failed, told before its return tuple arrived.
        self._failures: TickExpiry[str] = TickExpiry(timeout)

    def execute(self, tup: Any) -> None:
        collector = self._collector
        if tup.is_tick():
            for table in (self._returns, self._results):
                for _request, held in table.tick(tup[0]):
                    collector.fail(held)
            self._answered.tick(tup[0])
            self._failures.tick(tup[0])
            collector.ack(tup)
            return
        request = tup[0]
        if tup.source_stream == FAILURE_STREAM:
            self._failed(request, tup[1])
            collector.ack(tup)
            return
        if tup.source_component == self.return_component:
            mine, other = self._returns, self._results
        else:
            mine, other = self._results, self._returns
        match = other.pop(request)
        if match is None and mine is self._returns:
            reason = self._failures.pop(request)
            if reason is not None:
                self._fail_request(request, tup, reason)
                return
        if match is None:
            if request in mine or request in self._answered:
                # A second result for one request: the first one wins (Storm keeps the
                # last, and leaks). Ack it so it does not hold the tree open.
                collector.ack(tup)
            else:
                mine.put(request, tup)
            return
        result, ret = (match, tup) if mine is self._returns else (tup, match)
        collector.emit([result_text(result[1]), ret[1]], [result, ret])
        collector.ack(result)
        collector.ack(ret)
        self._answered.put(request, True)

    def _failed(self, request: Any, reason: Any) -> None:
        if request in self._answered or request in self._failures:
            return  # answered already, or failed with an earlier reason
        ret = self._returns.pop(request)
        if ret is None:
            self._failures.put(request, result_text(reason))
        else:
            self._fail_request(request, ret, result_text(reason))

    def _fail_request(self, request: Any, ret: Any, reason: str) -> None:
        collector = self._collector
        collector.emit([reason, ret[1]], [ret], FAILURE_STREAM)
        collector.fail(ret)
        self._answered.put(request, True)


class ResultDelivery:
    """Delivers results to the DRPC server a request's return info names: a LocalDRPC in
    this process (in memory, at once) or a DRPCServer over HTTP (queued to a background
    ResultSender, batched posts; its failures come back through ``errors()``). Shared by
    ReturnResults and Trident's DRPC streams."""

    def __init__(self, token: str | None = None) -> None:
        self._books: dict[str, PendingRequests] = {}
        self._senders: dict[tuple[str, int], ResultSender] = {}
        # The DRPC server's invocations token (drpc.invocations.token), which posting a
        # result needs; the cluster's own server puts it in its topologies' config.
        self._token = token

    def deliver(self, return_info: Any, result: str) -> None:
        """Send ``result`` for the request ``return_info`` names; raises if the return
        info is malformed or names an unknown LocalDRPC."""
        request_id, book, sender = self._route(return_info)
        if book is not None:
            book.respond(request_id, result)
        else:
            sender.send(request_id, result)

    def fail(self, return_info: Any, reason: str) -> None:
        """Fail the request ``return_info`` names with ``reason`` (its caller raises
        DRPCExecutionError saying it); raises as ``deliver``."""
        request_id, book, sender = self._route(return_info)
        if book is not None:
            book.fail(request_id, reason)
        else:
            sender.fail(request_id, reason)

    def _route(self, return_info: Any) -> tuple[str, PendingRequests | None, Any]:
        """The request's id and where its outcome goes: a LocalDRPC's book, or else the
        sender to its server (made on first use)."""
        info = parse_return_info(return_info)
        request_id = str(info["id"])
        key = info.get("local")
        if key is not None:
            book = self._books.get(key)
            if book is None:
                book = self._books[key] = registry.lookup(key)
            return request_id, book, None
        address = (str(info["host"]), int(info["port"]))
        sender = self._senders.get(address)
        if sender is None:
            sender = self._senders[address] = ResultSender(*address, token=self._token)
        return request_id, None, sender

    def errors(self) -> list[BaseException]:
        """What the background senders failed to deliver since the last call."""
        out: list[BaseException] = []
        for sender in self._senders.values():
            while sender.errors:
                out.append(sender.errors.popleft())
        return out

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()


class ReturnResults(Bolt):
    """``[result, return-info]`` -> the result delivered to the DRPC server; ack.

    Storm's ReturnResults: usable directly in a hand-built DRPC topology after a
    DRPCSpout (see Storm's test-drpc-flow). For a LocalDRPC the result is handed over
    in memory before the ack. For a DRPCServer it is queued to a background
    ResultSender (batched HTTP posts) and the tuple is acked at once, so the worker
    never waits for the network; a result that cannot be delivered is reported as an
    error of this bolt and its caller gets a timeout (a fail could not reach that
    server either). On the failure stream, ``[reason, return-info]`` fails the request
    at its server with ``reason`` (JoinResult's, in a linear DRPC topology).
    """

    outputs: list[str] = []

    def prepare(self, conf: dict[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._delivery = ResultDelivery(conf.get(DRPC_INVOCATIONS_TOKEN))

    def execute(self, tup: Any) -> None:
        collector = self._collector
        for exc in self._delivery.errors():
            collector.report_error(exc)
        if tup.is_tick():
            collector.ack(tup)
            return
        try:
            if tup.source_stream == FAILURE_STREAM:
                self._delivery.fail(tup[1], result_text(tup[0]))
            else:
                self._delivery.deliver(tup[1], result_text(tup[0]))
        except Exception as exc:
            collector.report_error(exc)
            collector.fail(tup)
            return
        collector.ack(tup)

    def cleanup(self) -> None:
        delivery = getattr(self, "_delivery", None)
        if delivery is not None:
            delivery.close()
