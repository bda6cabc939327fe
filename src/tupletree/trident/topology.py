"""TridentTopology: where Trident streams start, and ``build()`` (Storm's
TridentTopology).

    topology = TridentTopology()
    counts = (topology.new_stream("spout1", spout)
              .each(Fields("sentence"), Split(), Fields("word"))
              .group_by(Fields("word"))
              .persistent_aggregate(MemoryMapState.Factory(), Count(), Fields("count")))
    cluster.submit_topology("wc", conf, topology.build())

``build()`` compiles the streams into an ordinary Topology (planner.py) after checking
that every spout and state pair is exactly-once (guarantees.py); pass
``allow_at_least_once=True`` to accept the pairs that are not (the refusal names each
and why). The verdicts stay on the result, ``topology.trident_guarantees``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tupletree.topology.builder import Topology
from tupletree.topology.fields import Fields
from tupletree.trident.graph import DRPC, OP, SPOUT, STATE, Node
from tupletree.trident.processors import Join, Merge
from tupletree.trident.spout.adapt import adapt
from tupletree.trident.stream import Stream, TridentState, as_fields, check_factory

INNER, OUTER = "inner", "outer"


class TridentTopology:
    def __init__(self) -> None:
        self._nodes: list[Node] = []
        self._states = 0
        self._tx_ids: set[str] = set()

    def _add(self, kind: str, fields: Sequence[str], parents: Sequence[Node], **kw: Any) -> Node:
        node = Node(len(self._nodes), kind, fields, parents, **kw)
        self._nodes.append(node)
        return node

    def _state_id(self) -> str:
        self._states += 1
        return f"state-{self._states}"

    # -- sources ------------------------------------------------------------------------

    def new_stream(self, tx_id: str, spout: Any) -> Stream:
        """A stream of ``spout``'s batches. ``tx_id`` names the spout, its bolt, and
        where its progress is kept: a topology submitted again under the same names
        resumes from the stored progress (Storm's txStateId)."""
        if not isinstance(tx_id, str) or not tx_id or tx_id.startswith("__"):
            raise ValueError(
                f"new_stream's name must be a non-empty str not starting with '__', got {tx_id!r}"
            )
        if any(c in tx_id for c in "/@"):
            raise ValueError(f"new_stream's name {tx_id!r} may not contain '/' or '@'")
        if tx_id in self._tx_ids:
            raise ValueError(
                f"a stream named {tx_id!r} was already made; each spout's name is unique"
            )
        adapter = adapt(spout)
        fields = adapter.output_fields()
        self._tx_ids.add(tx_id)
        node = self._add(SPOUT, fields, [], label=f"spout {tx_id}", spout=adapter, tx_id=tx_id)
        return Stream(self, node)

    def new_drpc_stream(self, function: str, drpc: Any = None) -> Stream:
        """A stream of the DRPC requests for ``function``, field ``args``; each request
        is a batch, answered with the JSON list of the stream's last tuples' values.
        ``drpc``: a LocalDRPC, or None for the cluster's DRPC servers."""
        if not isinstance(function, str) or not function:
            raise ValueError(f"a DRPC function name must be a non-empty str, got {function!r}")
        node = self._add(DRPC, ["args"], [], label=f"drpc {function}", spout=(function, drpc))
        return Stream(self, node)

    def new_static_state(self, factory: Any) -> TridentState:
        """A state no stream writes, to query with ``state_query``."""
        check_factory(factory, "new_static_state")
        node = self._add(
            STATE, [], [], label="static state", state_id=self._state_id(), factory=factory
        )
        return TridentState(self, node)

    # -- combining ----------------------------------------------------------------------

    def merge(self, *streams: Any) -> Stream:
        """The union of ``streams`` (or one list of them), by position: all must have as
        many fields; the result has the first one's names."""
        if len(streams) == 1 and isinstance(streams[0], list | tuple):
            streams = tuple(streams[0])
        if not streams or not all(isinstance(s, Stream) for s in streams):
            raise TypeError(f"merge takes Streams, got {streams!r}")
        width = len(streams[0]._node.fields)
        for s in streams:
            if len(s._node.fields) != width:
                raise ValueError(
                    f"merge: every stream needs {width} fields like the first "
                    f"({streams[0]._node.fields}), got {s._node.fields}"
                )
        out = list(streams[0]._node.fields)
        node = self._add(
            OP,
            out,
            [s._node for s in streams],
            label="merge",
            make=lambda in_fields, name: Merge(name, in_fields, out),
        )
        return Stream(self, node)

    def join(self, *args: Any) -> Stream:
        """``join(s1, join_fields1, s2, join_fields2, out_fields[, join_type])``, or
        ``join([s1, s2, ...], [fields1, fields2, ...], out_fields[, [types]])``: per
        batch, the tuples of the streams with equal join values. ``out_fields`` names
        the join values, then each stream's other fields in order; ``join_type``
        "inner" (default) or "outer" (one per stream, or one for all)."""
        if args and isinstance(args[0], list | tuple):
            streams, join_fields, out = list(args[0]), list(args[1]), args[2]
            types = args[3] if len(args) > 3 else INNER
        else:
            if len(args) not in (5, 6):
                raise TypeError("join takes (s1, fields1, s2, fields2, out_fields[, join_type])")
            streams, join_fields, out = [args[0], args[2]], [args[1], args[3]], args[4]
            types = args[5] if len(args) == 6 else INNER
        if isinstance(types, str):
            types = [types] * len(streams)
        if len(streams) < 2 or len(join_fields) != len(streams) or len(types) != len(streams):
            raise ValueError("join needs two or more streams, each with its join fields and type")
        bad = [t for t in types if t not in (INNER, OUTER)]
        if bad:
            raise ValueError(f"join types are 'inner' or 'outer', got {bad}")
        keys = [as_fields(f, "join fields") for f in join_fields]
        for i, (s, k) in enumerate(zip(streams, keys, strict=True)):
            if not isinstance(s, Stream):
                raise TypeError(f"join: stream {i + 1} must be a Stream, got {s!r}")
            s._inputs(k, f"join fields of stream {i + 1}")
        if len({len(k) for k in keys}) != 1:
            raise ValueError(f"join: every stream needs as many join fields, got {keys}")
        out_fields = as_fields(out, "join's output fields")
        width = len(keys[0]) + sum(
            len(s._node.fields) - len(k) for s, k in zip(streams, keys, strict=True)
        )
        if len(out_fields) != width:
            raise ValueError(
                f"join makes {width} fields (the join fields, then each stream's others), "
                f"but out_fields names {len(out_fields)}: {out_fields}"
            )
        parts = [s.partition_by(k) for s, k in zip(streams, keys, strict=True)]
        in_fields = [list(s._node.fields) for s in streams]
        outer = [t == OUTER for t in types]
        node = self._add(
            OP,
            out_fields,
            [p._node for p in parts],
            label="join",
            make=lambda _, name: Join(name, in_fields, keys, outer, out_fields),
        )
        return Stream(self, node)

    # -- compiling ----------------------------------------------------------------------

    def build(self, *, allow_at_least_once: bool = False) -> Topology:
        """The ordinary Topology to submit. InvalidTopologyError if a spout and state
        pair is not exactly-once (naming each and why), unless allow_at_least_once."""
        from tupletree.trident.planner import plan

        topology, verdicts = plan(self, allow_at_least_once=allow_at_least_once)
        topology.trident_guarantees = verdicts  # type: ignore[attr-defined]
        return topology

    def guarantees(self) -> list[Any]:
        """The verdict of every (spout, state) pair, without building."""
        from tupletree.trident.guarantees import judge_all
        from tupletree.trident.planner import _complete_drpc, _groups

        nodes = _complete_drpc(self, sorted(self._nodes, key=lambda n: n.id))
        return judge_all(nodes, _groups(nodes))


__all__ = ["INNER", "OUTER", "Fields", "TridentTopology"]
