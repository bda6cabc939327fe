"""The planner: a TridentTopology's graph compiled into an ordinary Topology.

What it makes (Storm's TridentTopology.build and TridentTopologyBuilder, with two
simplifications said below):

- Batch groups: the graph's connected components (streams joined or merged share one).
  A group whose spouts are Trident spouts gets a master batch coordinator, the spout
  ``__mastercoord-<group>`` (one task). A DRPC stream's group is driven by its DRPC
  spout ``__drpc-<function>`` instead (each request a batch), and ends in a
  ReturnResults after a batch-global repartition.
- Bolts: operations between repartitions run in one bolt (Storm's "processor" graph):
  operations linked directly (not through a partition) are in the same bolt, and a
  state query is in its state's bolt (it reads that task's state object). Each bolt is a
  TridentBolt; its id is ``b-<n>``, plus the names given with ``.name()``.
- Simplification 1: a spout's emitter runs in the bolt of the operations right after it
  (a chain of ``each`` after a spout is one bolt with the spout, Storm has two with an
  identity partition between); that bolt's id is the spout's name (``new_stream``'s
  first argument).
- Simplification 2: the coordinator also does what Storm's TridentSpoutCoordinator
  bolt does (the spouts' metadata per txid): one component and one hop fewer.
- Parallelism: a bolt's parallelism is the largest ``parallelism_hint`` among its
  operations (one given on a partition counts for the bolt after it), 1 if none.
- Wiring: each repartition is a stream of the bolt before it (``s<node>``) with the
  partition's grouping (partition_by: fields; global: global; batch_global: a custom
  grouping by txid; shuffle; broadcast: all; identity: task i to task i). Every bolt
  declares a direct stream ``$coord-<group>`` per group and subscribes to each upstream
  component's; bolts that commit a group's state, and spout bolts of committer
  (opaque) spouts, subscribe to ``$commit``; spout bolts to ``$batch`` and ``$success``.
  Trident bolts get system ticks every second (their batches' expiry).

Refused, naming the node: a DRPC stream joined with a spout's stream (Storm's rule), a
partition from a bolt into itself (a state query fed from its own state's bolt through
a repartition), two spouts named alike, a spout name starting with ``__``.
"""

from __future__ import annotations

import copy
import os
import uuid
from collections import defaultdict
from typing import Any

from tupletree.config import Config
from tupletree.errors import InvalidTopologyError
from tupletree.topology import groupings as g
from tupletree.topology.builder import (
    BOLT,
    SPOUT,
    ComponentSpec,
    Subscription,
    Topology,
    validate_structure,
)
from tupletree.topology.groupings import Grouping
from tupletree.trident.bolt import (
    BATCH,
    BATCH_STREAM,
    COMMIT,
    COMMIT_STREAM,
    COORD,
    DATA,
    SUCCESS,
    SUCCESS_STREAM,
    BoltPlan,
    GroupSpec,
    InputSpec,
    SpoutSpec,
    TridentBolt,
    coord_stream,
)
from tupletree.trident.graph import DRPC, OP, PARTITION, STATE, Node
from tupletree.trident.graph import SPOUT as SPOUT_NODE
from tupletree.trident.groupings import BatchGlobalGrouping, IdentityGrouping
from tupletree.trident.guarantees import Verdict, check, judge_all
from tupletree.trident.master import MasterBatchCoordinator
from tupletree.trident.processors import Output, ReturnResults


def master_id(group: str) -> str:
    return f"__mastercoord-{group}"


class _BoltParts:
    """What a bolt's plan is assembled from."""

    def __init__(self) -> None:
        self.processors: list[Any] = []
        self.index: dict[int, int] = {}  # node id -> processor index
        self.groups: dict[str, GroupSpec] = {}
        self.inputs: dict[tuple[str, str], tuple[InputSpec, Grouping]] = {}
        self.outputs: dict[str, list[str]] = {}
        self.states: dict[str, Any] = {}

    def group(self, name: str) -> GroupSpec:
        return self.groups.setdefault(name, GroupSpec(name))

    def output(self, stream: str, src: Node, group: str) -> None:
        """An Output for ``stream``, fed by ``src`` (an operation or a spout here)."""
        if stream in self.outputs:
            return
        i = len(self.processors)
        self.processors.append(Output(f"out {stream}", src.fields, stream))
        self.outputs[stream] = list(src.fields)
        if src.kind == SPOUT_NODE:
            _spout_spec(self.group(group), src).entries.append((i, 0))
        else:
            self.processors[self.index[src.id]].children.append((i, 0))

    def subscribe(
        self,
        component: str,
        stream: str,
        grouping: Grouping,
        group: str,
        fields: list[str],
        entry: tuple[int, int],
    ) -> None:
        got = self.inputs.get((component, stream))
        if got is None:
            got = self.inputs[(component, stream)] = (InputSpec(group, DATA, fields, []), grouping)
        elif repr(got[1]) != repr(grouping):
            raise InvalidTopologyError(
                f"one bolt reads stream {stream} of {component} with two partitions "
                f"({got[1]!r} and {grouping!r}); not supported",
                component=component,
            )
        got[0].entries.append(entry)


class _Unit:
    """A future bolt: its nodes (ids, ascending = topological)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.spouts: list[Node] = []
        self.component = ""


def _find(parent: dict[int, int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def _union(parent: dict[int, int], a: int, b: int) -> None:
    ra, rb = _find(parent, a), _find(parent, b)
    if ra != rb:
        parent[max(ra, rb)] = min(ra, rb)


def _groups(nodes: list[Node]) -> dict[int, str]:
    """node id -> batch group: the connected components of the parent links."""
    parent = {n.id: n.id for n in nodes}
    for n in nodes:
        for p in n.parents:
            _union(parent, n.id, p.id)
    roots: dict[int, str] = {}
    out = {}
    for n in nodes:
        r = _find(parent, n.id)
        if r not in roots:
            roots[r] = f"bg{len(roots)}"
        out[n.id] = roots[r]
    return out


def _grouping(node: Node) -> Grouping:
    kind = node.grouping
    if kind == "fields":
        return Grouping(g.FIELDS, list(node.grouping_fields))
    if kind == "shuffle":
        return Grouping(g.SHUFFLE)
    if kind == "local_or_shuffle":
        return Grouping(g.LOCAL_OR_SHUFFLE)
    if kind == "global":
        return Grouping(g.GLOBAL)
    if kind == "broadcast":
        return Grouping(g.ALL)
    if kind == "batch_global":
        return Grouping(g.CUSTOM, custom=BatchGlobalGrouping())
    if kind == "identity":
        return Grouping(g.CUSTOM, custom=IdentityGrouping())
    if kind == "custom":
        return Grouping(g.CUSTOM, custom=node.custom)
    raise InvalidTopologyError(f"unknown partition {kind!r}", component=str(node.id))


def plan(topology: Any, *, allow_at_least_once: bool = False) -> tuple[Topology, list[Verdict]]:
    """Compile; returns the Topology and the exactly-once verdict per (spout, state)."""
    nodes: list[Node] = sorted(topology._nodes, key=lambda n: n.id)
    nodes = _complete_drpc(topology, nodes)
    nodes = _break_merge_cycles(nodes)
    groups = _groups(nodes)
    _check_drpc_alone(nodes, groups)
    _check_states_apart(nodes)
    verdicts = judge_all(nodes, groups)
    check(verdicts, allow_at_least_once)
    progress = (f"trident-progress-{uuid.uuid4().hex}", os.getpid())

    # -- units: operations linked without a partition, state queries with their state,
    # and Trident spouts with the operations right after them.
    parent = _linked(nodes)
    units: dict[int, _Unit] = {}
    unit_of: dict[int, _Unit] = {}
    for n in nodes:
        if n.kind in (OP, STATE, SPOUT_NODE):
            u = units.setdefault(_find(parent, n.id), _Unit())
            if n.kind == SPOUT_NODE:
                u.spouts.append(n)
            else:
                u.nodes.append(n)
            unit_of[n.id] = u
    _name_units(list(units.values()))

    # -- partitions: a chain of them collapses to its last grouping, from the nearest
    # non-partition ancestor.
    def source_of(p: Node) -> Node:
        while p.kind == PARTITION:
            p = p.parents[0]
        return p

    plans = {id(u): _BoltParts() for u in units.values()}
    for u in units.values():
        bp = plans[id(u)]
        for n in u.nodes:
            gspec = bp.group(groups[n.id])
            if n.kind == STATE:
                bp.states[n.state_id] = n.factory
                continue
            proc = n.make([list(p.fields) for p in n.parents], f"{u.component}:{n.label}#{n.id}")
            bp.index[n.id] = len(bp.processors)
            bp.processors.append(proc)
            gspec.processors.append(bp.index[n.id])
            if n.committer:
                gspec.commit = True
                bp.states[n.state_id] = n.factory
        for s in u.spouts:
            bp.group(groups[s.id])

    drpc_components = {n.id: f"__drpc-{n.spout[0]}-{n.id}" for n in nodes if n.kind == DRPC}
    for n in nodes:
        if n.kind != OP:
            continue
        u = unit_of[n.id]
        bp = plans[id(u)]
        me = bp.index[n.id]
        for side, p in enumerate(n.parents):
            part = p if p.kind == PARTITION else None
            src = source_of(p)
            if part is None and src.kind != DRPC and unit_of[src.id] is u:
                if src.kind == SPOUT_NODE:
                    _spout_spec(bp.group(groups[n.id]), src).entries.append((me, side))
                else:
                    bp.processors[bp.index[src.id]].children.append((me, side))
                continue
            grouping = _grouping(part) if part is not None else Grouping(g.SHUFFLE)
            if src.kind == DRPC:
                component, stream, coord_kind = drpc_components[src.id], f"s{src.id}", "single"
            else:
                su = unit_of[src.id]
                if su is u:
                    raise InvalidTopologyError(
                        f"{n.label} (node {n.id}) would repartition the output of bolt "
                        f"{u.component} back into it; this happens when a state is queried "
                        "from a stream that comes from the state's own bolt",
                        component=u.component,
                    )
                assert part is not None
                component, stream, coord_kind = su.component, f"s{part.id}", "all"
                plans[id(su)].output(stream, src, groups[src.id])
            bp.subscribe(component, stream, grouping, groups[n.id], list(src.fields), (me, side))
            bp.group(groups[n.id]).coord_sources[component] = coord_kind

    # -- components
    specs: list[ComponentSpec] = []
    spout_groups: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    committers: dict[str, list[str]] = defaultdict(list)
    for u in units.values():
        bp = plans[id(u)]
        for s in u.spouts:
            spout_groups[groups[s.id]].append((s.tx_id, s.spout))
        for gname, gspec in bp.groups.items():
            if gspec.commit or any(_is_committer(sp.adapter) for sp in gspec.spouts):
                committers[gname].append(u.component)

    tick = {Config.TOPOLOGY_SYSTEM_TICK_FREQ_SECS: 1}
    for u in units.values():
        bp = plans[id(u)]
        if not bp.processors and not u.spouts:
            continue  # a static state nobody queries
        parallelism = _parallelism(u, nodes)
        inputs: dict[tuple[str, str], InputSpec] = {}
        subs: list[Subscription] = []
        for (component, stream), (ispec, grouping) in bp.inputs.items():
            inputs[(component, stream)] = ispec
            subs.append(Subscription(component, stream, grouping))
        for gname, gspec in bp.groups.items():
            for component in gspec.coord_sources:
                cs = coord_stream(gname)
                inputs[(component, cs)] = InputSpec(gname, COORD)
                subs.append(Subscription(component, cs, Grouping(g.DIRECT)))
            mc = master_id(gname)
            if gspec.spouts:
                inputs[(mc, BATCH_STREAM)] = InputSpec(gname, BATCH)
                inputs[(mc, SUCCESS_STREAM)] = InputSpec(gname, SUCCESS)
                subs.append(Subscription(mc, BATCH_STREAM, Grouping(g.ALL)))
                subs.append(Subscription(mc, SUCCESS_STREAM, Grouping(g.ALL)))
            if u.component in committers.get(gname, []):
                if groups_have_master(gname, spout_groups):
                    inputs[(mc, COMMIT_STREAM)] = InputSpec(gname, COMMIT)
                    subs.append(Subscription(mc, COMMIT_STREAM, Grouping(g.ALL)))
                else:
                    gspec.commit = False  # a DRPC group: nothing orders commits
        bolt = TridentBolt(
            BoltPlan(u.component, bp.processors, inputs, bp.groups, bp.outputs, bp.states, progress)
        )
        spec = ComponentSpec(u.component, bolt, BOLT, parallelism, parallelism)
        spec.inputs = subs
        spec.conf.update(tick)
        specs.append(spec)

    for gname, spouts in spout_groups.items():
        mbc = MasterBatchCoordinator(gname, spouts, progress)
        specs.append(ComponentSpec(master_id(gname), mbc, SPOUT, 1, 1))
    for n in nodes:
        if n.kind == DRPC:
            # Imported here: the DRPC client and server (aiohttp) only for a DRPC stream.
            from tupletree.trident.drpc_spout import TridentDRPCSpout

            function, drpc = n.spout
            spout = TridentDRPCSpout(function, drpc, f"s{n.id}", groups[n.id])
            par = n.parallelism or 1
            specs.append(ComponentSpec(drpc_components[n.id], spout, SPOUT, par, par))
    built = validate_structure(specs, allow_system=True)
    return built, verdicts


def groups_have_master(group: str, spout_groups: dict[str, Any]) -> bool:
    return group in spout_groups


def _is_committer(adapter: Any) -> bool:
    from tupletree.trident.spout.opaque import OpaquePartitionedExecutor

    if isinstance(adapter, OpaquePartitionedExecutor):
        return True
    from tupletree.trident.spout.interfaces import ICommitterTridentSpout

    return isinstance(getattr(adapter, "spout", None), ICommitterTridentSpout)


def _spout_spec(gspec: GroupSpec, spout_node: Node) -> SpoutSpec:
    for s in gspec.spouts:
        if s.tx_id == spout_node.tx_id:
            return s
    s = SpoutSpec(spout_node.tx_id, spout_node.spout, list(spout_node.fields), [])
    gspec.spouts.append(s)
    return s


MAX_TASK_PARALLELISM = "topology.max.task.parallelism"


def _parallelism(u: _Unit, nodes: list[Node]) -> int:
    """The largest hint of the bolt's operations (and of a partition into it), capped by
    a spout's ``topology.max.task.parallelism`` (FixedBatchSpout says 1: every task of a
    batch spout would emit the batch), as Storm's planner caps it."""
    hints = [n.parallelism for n in (*u.nodes, *u.spouts) if n.parallelism]
    members = {n.id for n in (*u.nodes, *u.spouts)}
    for n in nodes:  # a hint on a partition goes to the bolt after it
        if n.kind == PARTITION and n.parallelism:
            for m in nodes:
                if n in m.parents and m.id in members:
                    hints.append(n.parallelism)
    p = max(hints, default=1)
    for s in u.spouts:
        get = getattr(getattr(s.spout, "spout", None), "get_component_configuration", None)
        conf = get() if callable(get) else None
        cap = (conf or {}).get(MAX_TASK_PARALLELISM)
        if isinstance(cap, int) and cap >= 1:
            p = min(p, cap)
    return p


def _name_units(units: list[_Unit]) -> None:
    seen: set[str] = set()
    ordered = sorted(units, key=lambda x: min(n.id for n in (*x.nodes, *x.spouts)))
    for u in ordered:
        if u.spouts:
            names = [s.tx_id for s in u.spouts]
            for name in names:
                if name in seen:
                    raise InvalidTopologyError(
                        f"two spouts are named {name!r}: new_stream's first argument names a "
                        "spout and where it keeps its progress, so it must be unique",
                        component=name,
                    )
                seen.add(name)
            u.component = "+".join(names)
    # The spouts' bolts are named by the user (new_stream's names): a bolt's number is
    # skipped when that would repeat one of them (a stream named "b-0").
    taken = {u.component for u in ordered if u.spouts}
    bolt = 0
    for u in ordered:
        if u.spouts:
            continue
        named = [n.name for n in u.nodes if n.name]
        while (component := "-".join([f"b-{bolt}", *named])) in taken:
            bolt += 1
        u.component = component
        taken.add(component)
        bolt += 1


def _complete_drpc(topology: Any, nodes: list[Node]) -> list[Node]:
    """Each DRPC stream ends in a batch-global partition and a ReturnResults (Storm's
    completeDRPC): added to a copy of the graph, after the stream's last node."""
    groups = _groups(nodes)
    out = list(nodes)
    for d in [n for n in nodes if n.kind == DRPC]:
        members = [n for n in nodes if groups[n.id] == groups[d.id]]
        last = max(members, key=lambda n: n.id)
        next_id = max(n.id for n in out) + 1
        part = Node(
            next_id, PARTITION, last.fields, [last], grouping="batch_global", label="batch_global"
        )
        ret = Node(
            next_id + 1,
            OP,
            [],
            [part],
            label="return results",
            make=lambda in_fields, name: ReturnResults(name, in_fields[0]),
        )
        out += [part, ret]
    return out


def _unit_roots(nodes: list[Node]) -> dict[int, int]:
    """node id -> its bolt (a representative id): nodes linked without a partition, a
    state query with its state (as ``plan`` forms its units)."""
    parent = _linked(nodes)
    return {n.id: _find(parent, n.id) for n in nodes}


def _linked(nodes: list[Node]) -> dict[int, int]:
    """The union-find forest of the nodes one bolt runs: linked without a partition, a
    state query with its state."""
    parent = {n.id: n.id for n in nodes}
    for n in nodes:
        if n.kind in (OP, STATE):
            for p in n.parents:
                if p.kind in (OP, STATE, SPOUT_NODE):
                    _union(parent, n.id, p.id)
            if n.colocate_with is not None:
                _union(parent, n.id, n.colocate_with.id)
    return parent


def _cyclic_units(nodes: list[Node]) -> set[int]:
    """The bolts (as in ``_unit_roots``) that a repartition leads back into, directly or
    through other bolts."""
    root = _unit_roots(nodes)
    edges: dict[int, set[int]] = defaultdict(set)
    for n in nodes:
        if n.kind != OP:
            continue
        for p in n.parents:
            if p.kind != PARTITION:
                continue
            src = p
            while src.kind == PARTITION:
                src = src.parents[0]
            if src.kind != DRPC:
                edges[root[src.id]].add(root[n.id])
    cyclic = set()
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            u = todo.pop()
            if u == start:
                cyclic.add(start)
                break
            if u not in seen:
                seen.add(u)
                todo.extend(edges.get(u, ()))
    return cyclic


def _break_merge_cycles(nodes: list[Node]) -> list[Node]:
    """A merge joins its parents' bolts into one; when a branch of a stream is
    repartitioned and merged back with another branch (``s.each(...)`` merged with
    ``s.shuffle().each(...)``), that bolt would feed itself through the repartition
    (a cycle of bolts, whose batches never complete). Such a merge is fed through an
    identity partition instead (Storm puts one after each spout): the merge and what
    follows it become a bolt of their own. Works on a renumbered copy of the graph
    (ids stay a topological order)."""
    cyclic = _cyclic_units(nodes)
    if not cyclic:
        return nodes
    root = _unit_roots(nodes)
    merges = {
        n.id
        for n in nodes
        if n.kind == OP
        and len(n.parents) > 1
        and root[n.id] in cyclic
        and any(p.kind != PARTITION for p in n.parents)
    }
    if not merges:
        return nodes
    copies: dict[int, Node] = {}
    out: list[Node] = []
    for n in nodes:
        c = copy.copy(n)
        c.parents = [copies[p.id] for p in n.parents]
        if n.colocate_with is not None:
            c.colocate_with = copies[n.colocate_with.id]
        if n.id in merges:
            parents = []
            for p in c.parents:
                if p.kind != PARTITION:
                    p = Node(-1, PARTITION, p.fields, [p], grouping="identity", label="identity")
                    out.append(p)
                parents.append(p)
            c.parents = parents
        copies[n.id] = c
        out.append(c)
    for i, c in enumerate(out):
        c.id = i
    return out


def _check_states_apart(nodes: list[Node]) -> None:
    """Two states that write to one place (one factory, or two whose ``location`` is the
    same) would each take the other's txids and opaque batch record for its own: a
    state reverting "what an earlier attempt of this txid wrote" undid the other's
    counts. Refused, naming both."""
    seen: dict[Any, Node] = {}
    for n in nodes:
        if not n.committer or n.factory is None:
            continue
        where = n.factory.location()
        key = where if where is not None else ("factory", id(n.factory))
        first = seen.setdefault(key, n)
        if first is n or first.state_id == n.state_id:
            continue
        place = " ".join(map(str, where)) if where is not None else repr(n.factory)
        raise InvalidTopologyError(
            f"{first.label!r} and {n.label!r} both write their state to {place}: one "
            "would take the other's transaction ids and batch records for its own (and "
            "undo its writes); give each a factory of its own (another "
            "MemoryMapState.Factory(), name=, table or key prefix)",
            component=str(n.id),
        )


def _check_drpc_alone(nodes: list[Node], groups: dict[int, str]) -> None:
    kinds: dict[str, set[str]] = defaultdict(set)
    for n in nodes:
        if n.kind in (SPOUT_NODE, DRPC):
            kinds[groups[n.id]].add(n.kind)
    for group, ks in kinds.items():
        if ks == {SPOUT_NODE, DRPC}:
            raise InvalidTopologyError(
                "a DRPC stream cannot be joined or merged with a spout's stream (Storm's "
                "rule: a DRPC request is a batch of its own); query the spout's state "
                "with state_query instead",
                component=group,
            )


__all__ = ["master_id", "plan"]
