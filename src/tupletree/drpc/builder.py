"""LinearDRPCTopologyBuilder: a DRPC function as a linear chain of bolts.

    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 4)
    builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 6).fields_grouping(["request", "follower"])
    builder.add_bolt(CountAggregator(), 3).fields_grouping(["request"])
    topology = builder.create_local_topology(drpc)      # or create_remote_topology()

The topology built around the user's bolts (component ids as shown):

    drpc-spout -> prepare-request -> bolt0 -> bolt1 -> ... -> boltN -> join-result
                        |  "ret" ------------------------------------->^     |
                        |  "id" (if boltN is a FinishedCallback) -> boltN    v
                                                                      return-results
    and "__drpc_failure" from every boltI to join-result, and from it to return-results:
    why a request failed (a user bolt's exception), for its caller (bolts.py).

Each user bolt is wrapped in a CoordinatedBolt: bolt0 tracks a request through the
ack of its request tuple, bolt1 expects one count report (from the bolt0 task that had
the request: ``single``), later bolts one from every task of the previous bolt
(``all``), over the previous bolt's direct ``__coord`` stream.

Groupings: each ``add_bolt`` declarer subscribes to the previous bolt (``stream``
defaults to "default"). Without one, bolt0 gets the requests by none grouping (fields
grouping on "request" when it is also a FinishedCallback last bolt), and a later bolt
by shuffle grouping. (Storm subscribes a later bolt to nothing in that case, which is
never what anyone means.)

The last bolt must declare exactly one stream of exactly two fields, [request, result];
anything else is rejected here, when the topology is built. If it is a FinishedCallback
with several tasks, its input must be grouped on the request id (fields grouping on
the first field, or global grouping): the request's id tuple goes to one task chosen
that way, and only that task finishes the request.
"""

from __future__ import annotations

from typing import Any

from tupletree.config import Config
from tupletree.drpc.bolts import (
    ARGS_STREAM,
    ID_STREAM,
    RETURN_STREAM,
    JoinResult,
    PrepareRequest,
    ReturnResults,
)
from tupletree.drpc.coordinated_bolt import (
    ALL,
    COORD_STREAM,
    FAILURE_STREAM,
    SINGLE,
    CoordinatedBolt,
    is_finished_callback,
)
from tupletree.drpc.spout import FAILURE_GRACE_SECS, DRPCSpout
from tupletree.errors import InvalidTopologyError
from tupletree.topology.builder import Topology, TopologyBuilder, field_list
from tupletree.topology.components import (
    DEFAULT_STREAM,
    BasicBolt,
    Bolt,
    StreamSpec,
    declared_streams,
)
from tupletree.topology.fields import Fields

SPOUT_ID = "drpc-spout"
PREPARE_ID = "prepare-request"
JOIN_ID = "join-result"
RETURN_ID = "return-results"
# Tick period of the coordinated bolts (system ticks) and JoinResult (its own ticks):
# drives their state expiry.
EXPIRY_TICK_SECS = 1


def bolt_id(i: int) -> str:
    return f"bolt{i}"


class _Component:
    def __init__(self, bolt: Bolt | BasicBolt, parallelism: int, tasks: int | None) -> None:
        self.bolt = bolt
        self.parallelism = parallelism
        self.tasks = tasks
        self.declarations: list[tuple[str, tuple[Any, ...], str]] = []
        self.conf: dict[str, Any] = {}


class LinearDRPCInputDeclarer:
    """How an added bolt subscribes to the previous one; every method is chainable."""

    def __init__(self, component: _Component) -> None:
        self._component = component

    def _declare(self, method: str, *args: Any, stream: str) -> LinearDRPCInputDeclarer:
        self._component.declarations.append((method, args, stream))
        return self

    def shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("shuffle_grouping", stream=stream)

    def fields_grouping(
        self, fields: list[str] | Fields, stream: str = DEFAULT_STREAM
    ) -> LinearDRPCInputDeclarer:
        return self._declare("fields_grouping", field_list(fields), stream=stream)

    def global_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("global_grouping", stream=stream)

    def all_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("all_grouping", stream=stream)

    def none_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("none_grouping", stream=stream)

    def direct_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("direct_grouping", stream=stream)

    def local_or_shuffle_grouping(self, stream: str = DEFAULT_STREAM) -> LinearDRPCInputDeclarer:
        return self._declare("local_or_shuffle_grouping", stream=stream)

    def partial_key_grouping(
        self, fields: list[str] | Fields, stream: str = DEFAULT_STREAM
    ) -> LinearDRPCInputDeclarer:
        return self._declare("partial_key_grouping", field_list(fields), stream=stream)

    def custom_grouping(
        self, grouping: Any, stream: str = DEFAULT_STREAM
    ) -> LinearDRPCInputDeclarer:
        return self._declare("custom_grouping", grouping, stream=stream)

    def add_configuration(self, key: str, value: Any) -> LinearDRPCInputDeclarer:
        """Per-bolt config, as ``add_configuration`` on a plain topology's bolt (tick
        tuples set here or for the whole topology reach the bolt)."""
        self._component.conf[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any]) -> LinearDRPCInputDeclarer:
        self._component.conf.update(conf)
        return self


class LinearDRPCTopologyBuilder:
    """Builds a DRPC topology for ``function`` from a linear chain of bolts."""

    def __init__(self, function: str) -> None:
        if not isinstance(function, str) or not function:
            raise ValueError(f"a DRPC function name must be a non-empty str, got {function!r}")
        self.function = function
        self._components: list[_Component] = []

    def add_bolt(
        self, bolt: Bolt | BasicBolt, parallelism: int = 1, tasks: int | None = None
    ) -> LinearDRPCInputDeclarer:
        """Append a step. Field 0 of every tuple the bolt gets or emits is the request
        id; the first bolt gets ``[request, args]``; the last must emit
        ``[request, result]``."""
        component = _Component(bolt, parallelism, tasks)
        self._components.append(component)
        return LinearDRPCInputDeclarer(component)

    def create_local_topology(self, drpc: Any) -> Topology:
        """The topology for a LocalCluster, served by ``drpc`` (a LocalDRPC)."""
        if not hasattr(drpc, "key"):
            raise TypeError(
                f"create_local_topology needs a LocalDRPC, got {type(drpc).__name__}; "
                "for a DRPC server over HTTP use create_remote_topology()"
            )
        return self._create(DRPCSpout(self.function, drpc, failure_grace_secs=FAILURE_GRACE_SECS))

    def create_remote_topology(self) -> Topology:
        """The topology for any cluster, served by the DRPC servers named in the
        topology config (drpc.servers, drpc.http.port; default 127.0.0.1:3774)."""
        return self._create(DRPCSpout(self.function, failure_grace_secs=FAILURE_GRACE_SECS))

    # -- building ---------------------------------------------------------------------

    def _create(self, spout: DRPCSpout) -> Topology:
        components = self._components
        if not components:
            raise InvalidTopologyError(
                f"linear DRPC topology {self.function!r} has no bolts: add_bolt at least one"
            )
        streams = [self._streams(i, c) for i, c in enumerate(components)]
        last = len(components) - 1
        out_stream, out_spec = self._result_stream(last, streams[last])

        b = TopologyBuilder()
        b.set_spout(SPOUT_ID, spout)
        prepare = PrepareRequest()
        b.set_bolt(PREPARE_ID, prepare).none_grouping(SPOUT_ID)
        for i, c in enumerate(components):
            sources = {} if i == 0 else {bolt_id(i - 1): SINGLE if i == 1 else ALL}
            wants_id = i == last and is_finished_callback(c.bolt)
            id_stream = (PREPARE_ID, ID_STREAM) if wants_id else None
            wrapped = CoordinatedBolt(c.bolt, sources, id_stream)
            d = b.set_bolt(bolt_id(i), wrapped, c.parallelism, c.tasks)
            d.add_configurations(
                {Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS: EXPIRY_TICK_SECS, **c.conf}
            )
            prev = PREPARE_ID if i == 0 else bolt_id(i - 1)
            declarations = c.declarations or self._default_declarations(i, wants_id)
            if wants_id:
                prev_streams = (
                    {DEFAULT_STREAM: declared_streams(PREPARE_ID, prepare)[ARGS_STREAM].fields}
                    if i == 0
                    else {s: spec.fields for s, spec in streams[i - 1].items()}
                )
                self._check_request_grouping(i, c, declarations, prev_streams)
            for method, args, stream in declarations:
                getattr(d, method)(prev, *args, stream=stream)
            if wants_id:
                if all(method == "global_grouping" for method, _, _ in declarations):
                    d.global_grouping(PREPARE_ID, ID_STREAM)
                else:
                    d.fields_grouping(PREPARE_ID, ["request"], ID_STREAM)
            if i > 0:
                d.direct_grouping(bolt_id(i - 1), COORD_STREAM)
        join = b.set_bolt(JOIN_ID, JoinResult(PREPARE_ID)).fields_grouping(
            bolt_id(last), [out_spec.fields[0]], out_stream
        )
        join.fields_grouping(PREPARE_ID, ["request"], RETURN_STREAM).add_configuration(
            Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, EXPIRY_TICK_SECS
        )
        # Why a request failed, from whichever bolt raised, to the task holding its
        # return info (bolts.py).
        for i in range(len(components)):
            join.fields_grouping(bolt_id(i), ["request"], FAILURE_STREAM)
        b.set_bolt(RETURN_ID, ReturnResults()).none_grouping(JOIN_ID).none_grouping(
            JOIN_ID, FAILURE_STREAM
        )
        return b.create_topology()

    @staticmethod
    def _default_declarations(i: int, wants_id: bool) -> list[tuple[str, tuple[Any, ...], str]]:
        if i == 0:
            if wants_id:
                return [("fields_grouping", (["request"],), DEFAULT_STREAM)]
            return [("none_grouping", (), DEFAULT_STREAM)]
        return [("shuffle_grouping", (), DEFAULT_STREAM)]

    @staticmethod
    def _streams(i: int, c: _Component) -> dict[str, StreamSpec]:
        cid = bolt_id(i)
        if not isinstance(c.bolt, Bolt | BasicBolt):
            raise InvalidTopologyError(
                f"{cid}: add_bolt takes a Bolt or BasicBolt, got {type(c.bolt).__name__}",
                component=cid,
            )
        try:
            streams = declared_streams(cid, c.bolt)
        except InvalidTopologyError:
            raise
        except Exception as exc:
            raise InvalidTopologyError(
                f"{cid}: declare_output_fields raised {exc!r}", component=cid
            ) from exc
        for reserved in (COORD_STREAM, FAILURE_STREAM):
            if reserved in streams:
                raise InvalidTopologyError(
                    f"{cid} ({type(c.bolt).__name__}) declares stream {reserved!r}, which "
                    "the DRPC coordination uses",
                    component=cid,
                    stream=reserved,
                )
        return streams

    @staticmethod
    def _result_stream(i: int, streams: dict[str, StreamSpec]) -> tuple[str, StreamSpec]:
        cid = bolt_id(i)
        shape = {s: spec.fields.to_list() for s, spec in streams.items()}
        if len(streams) != 1:
            raise InvalidTopologyError(
                f"the last bolt of a linear DRPC topology ({cid}) must declare exactly one "
                f"output stream, [request, result]; it declares {shape or 'none'}",
                component=cid,
            )
        ((stream, spec),) = streams.items()
        if len(spec.fields) != 2 or spec.direct:
            raise InvalidTopologyError(
                f"the last bolt of a linear DRPC topology ({cid}) must emit exactly two "
                f"fields, [request, result] (the request id first), on a non-direct "
                f"stream; it declares {stream!r}: {shape[stream]}"
                f"{' (direct)' if spec.direct else ''}",
                component=cid,
                stream=stream,
            )
        return stream, spec

    @staticmethod
    def _check_request_grouping(
        i: int,
        c: _Component,
        declarations: list[tuple[str, tuple[Any, ...], str]],
        prev_streams: dict[str, Fields],
    ) -> None:
        """A FinishedCallback last bolt with several tasks must see all of a request on
        the task that gets its id tuple, or it never finishes (or finishes with part)."""
        tasks = c.tasks or c.parallelism
        if not isinstance(tasks, int) or tasks <= 1:
            return
        if all(method == "global_grouping" for method, _, _ in declarations):
            return
        cid = bolt_id(i)
        for method, args, stream in declarations:
            fields = prev_streams.get(stream)
            if fields is None:
                continue  # an unknown stream: create_topology names it
            if method == "fields_grouping" and list(args[0]) == [fields[0]]:
                continue
            raise InvalidTopologyError(
                f"{cid} ({type(c.bolt).__name__}) is the last bolt and a FinishedCallback "
                f"with {tasks} tasks, so all tuples of a request must reach the task that "
                f"gets the request's id: group its input with "
                f"fields_grouping([{fields[0]!r}]) (the request id) or global_grouping(), "
                f"not {method}{list(args) if args else '()'} on stream {stream!r}",
                component=cid,
                stream=stream,
            )
