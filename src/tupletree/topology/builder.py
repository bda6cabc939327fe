"""TopologyBuilder and the validated, picklable Topology it creates.

Planning: a component class may take part in building the topology it is set in, by
defining ``plan_topology(specs)`` (a staticmethod taking and returning the list of
ComponentSpecs). ``create_topology`` (and every other path through
``validate_structure``) calls each distinct ``plan_topology`` found on the components
once, in the order the components were set, before it validates anything. This is how
a package above this layer rewires a topology without this layer knowing it: Storm's
TopologyBuilder knows IStatefulBolt and adds the checkpoint spout itself, but here
``topology/`` must not import ``state/`` (ARCHITECTURE.md), so the stateful bolt brings
its own plan (tupletree.state.planner: the checkpoint spout, the ``$checkpoint``
subscriptions, the wrappers). A plan must be idempotent: a Topology's specs may be
validated again (complete_topology does), and the plan then runs again on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tupletree.config import validate_component_conf
from tupletree.errors import InvalidConfigError, InvalidTopologyError
from tupletree.topology import groupings as g
from tupletree.topology.components import (
    DEFAULT_STREAM,
    BasicBolt,
    BatchBolt,
    Bolt,
    Spout,
    StreamSpec,
    check_called_methods,
    declared_streams,
    runtime_component,
)
from tupletree.topology.groupings import CustomStreamGrouping, Grouping

SPOUT = "spout"
BOLT = "bolt"


class Subscription:
    """A bolt's input: ``source`` component's ``stream``, split by ``grouping``."""

    __slots__ = ("grouping", "source", "stream")

    def __init__(self, source: str, stream: str, grouping: Grouping) -> None:
        self.source = source
        self.stream = stream
        self.grouping = grouping

    def __getstate__(self) -> tuple[str, str, Grouping]:
        return (self.source, self.stream, self.grouping)

    def __setstate__(self, state: tuple[str, str, Grouping]) -> None:
        self.source, self.stream, self.grouping = state

    def __repr__(self) -> str:
        return f"Subscription({self.source!r}, {self.stream!r}, {self.grouping!r})"


class ComponentSpec:
    """One spout or bolt of a topology, with its parallelism and wiring."""

    def __init__(
        self, component_id: str, obj: Any, kind: str, parallelism: int, tasks: int
    ) -> None:
        self.id = component_id
        self.obj = obj
        self.kind = kind
        self.parallelism = parallelism
        self.tasks = tasks
        self.conf: dict[str, Any] = {}
        self.inputs: list[Subscription] = []
        self.streams: dict[str, StreamSpec] = {}

    @property
    def is_spout(self) -> bool:
        return self.kind == SPOUT

    @property
    def is_basic(self) -> bool:
        return isinstance(self.obj, BasicBolt)

    @property
    def is_batch(self) -> bool:
        """A BatchBolt: its tasks take Batches (topology/batch.py)."""
        return isinstance(self.obj, BatchBolt)

    def __repr__(self) -> str:
        return f"ComponentSpec({self.id!r}, {self.kind}, p={self.parallelism}, tasks={self.tasks})"


class Topology:
    """A validated topology: what ``TopologyBuilder.create_topology`` returns.

    ``components`` maps id -> ComponentSpec, in insertion order.
    """

    def __init__(self, components: dict[str, ComponentSpec]) -> None:
        self.components = components

    @property
    def spouts(self) -> list[ComponentSpec]:
        return [c for c in self.components.values() if c.is_spout]

    @property
    def bolts(self) -> list[ComponentSpec]:
        return [c for c in self.components.values() if not c.is_spout]

    def subscribers(self, source: str, stream: str) -> list[tuple[str, Grouping]]:
        """(bolt id, grouping) of every bolt subscribed to ``source``'s ``stream``."""
        return [
            (c.id, sub.grouping)
            for c in self.components.values()
            for sub in c.inputs
            if sub.source == source and sub.stream == stream
        ]


def require_topology(topology: object) -> Topology:
    """What ``submit_topology`` accepts: a Topology from ``create_topology()``."""
    if not isinstance(topology, Topology):
        raise TypeError(
            "submit_topology expects the result of TopologyBuilder.create_topology(), "
            f"got {type(topology).__name__}"
        )
    return topology


class _Declarer:
    def __init__(self, spec: ComponentSpec) -> None:
        self._spec = spec

    def add_configuration(self, key: str, value: Any) -> _Declarer:
        """Per-component config, overriding the topology's for this component."""
        self._spec.conf[key] = value
        return self

    def add_configurations(self, conf: dict[str, Any]) -> _Declarer:
        self._spec.conf.update(conf)
        return self

    def set_max_spout_pending(self, n: int | None) -> _Declarer:
        return self.add_configuration("topology.max.spout.pending", n)

    def set_num_tasks(self, n: int) -> _Declarer:
        self._spec.tasks = n
        return self


class SpoutDeclarer(_Declarer):
    """Returned by ``set_spout``: per-component configuration."""


class BoltDeclarer(_Declarer):
    """Returned by ``set_bolt``: subscriptions (groupings) and configuration, chainable."""

    def _subscribe(self, source: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        self._spec.inputs.append(Subscription(source, stream, grouping))
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.SHUFFLE))

    def fields_grouping(
        self, component: str, fields: Iterable[str], stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.FIELDS, field_list(fields)))

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.ALL))

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.GLOBAL))

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.NONE))

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.DIRECT))

    def local_or_shuffle_grouping(
        self, component: str, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.LOCAL_OR_SHUFFLE))

    def partial_key_grouping(
        self, component: str, fields: Iterable[str], stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.PARTIAL_KEY, field_list(fields)))

    def custom_grouping(
        self, component: str, grouping: CustomStreamGrouping, stream: str = DEFAULT_STREAM
    ) -> BoltDeclarer:
        return self._subscribe(component, stream, Grouping(g.CUSTOM, custom=grouping))


def field_list(fields: Iterable[str]) -> list[str]:
    """Grouping fields as a list: one field name, or an iterable of them (a Fields)."""
    if isinstance(fields, str):
        return [fields]
    return list(fields)


class TopologyBuilder:
    """Builds a topology: ``set_spout``, ``set_bolt(...).<grouping>(...)``, ``create_topology``."""

    def __init__(self) -> None:
        self._specs: list[ComponentSpec] = []

    def set_spout(
        self, component_id: str, spout: Spout, parallelism: int = 1, tasks: int | None = None
    ) -> SpoutDeclarer:
        spec = ComponentSpec(component_id, spout, SPOUT, parallelism, tasks or parallelism)
        self._specs.append(spec)
        return SpoutDeclarer(spec)

    def set_bolt(
        self,
        component_id: str,
        bolt: Bolt | BasicBolt | BatchBolt,
        parallelism: int = 1,
        tasks: int | None = None,
    ) -> BoltDeclarer:
        spec = ComponentSpec(
            component_id, runtime_component(bolt), BOLT, parallelism, tasks or parallelism
        )
        self._specs.append(spec)
        return BoltDeclarer(spec)

    def create_topology(self) -> Topology:
        """Validate the structure and return the Topology; InvalidTopologyError if wrong."""
        return validate_structure(self._specs)


def planned(specs: list[ComponentSpec]) -> list[ComponentSpec]:
    """``specs`` after every distinct ``plan_topology`` of their components ran once
    (see the module docstring); a plan that raises, or returns something else than a
    list of ComponentSpecs, is an InvalidTopologyError naming the component."""
    plans: list[tuple[str, Any]] = []
    for spec in specs:
        plan = getattr(type(spec.obj), "plan_topology", None)
        if plan is not None and all(plan is not seen for _, seen in plans):
            plans.append((spec.id, plan))
    for cid, plan in plans:
        try:
            result = plan(list(specs))
        except InvalidTopologyError:
            raise
        except Exception as exc:
            raise InvalidTopologyError(
                f"component {cid!r}: planning the topology raised {exc!r}", component=cid
            ) from exc
        if not isinstance(result, list) or not all(isinstance(s, ComponentSpec) for s in result):
            raise InvalidTopologyError(
                f"component {cid!r}: plan_topology must return a list of ComponentSpecs, "
                f"got {type(result).__name__}",
                component=cid,
            )
        specs = result
    return specs


def validate_structure(specs: list[ComponentSpec], *, allow_system: bool = False) -> Topology:
    """Plan (``planned``), then check ids, kinds, parallelism, declared streams and every
    subscription.

    ``allow_system`` lets tupletree's own wrappers (testing, DRPC) use ``__`` ids.
    """
    specs = planned(specs)
    components: dict[str, ComponentSpec] = {}
    for spec in specs:
        cid = spec.id
        if not isinstance(cid, str) or not cid:
            raise InvalidTopologyError(f"invalid component id {cid!r}", component=str(cid))
        if cid in components:
            raise InvalidTopologyError(
                f"duplicate component id {cid!r}: set_spout/set_bolt used it twice",
                component=cid,
            )
        if cid.startswith("__") and not allow_system:
            raise InvalidTopologyError(
                f"component id {cid!r} starts with '__', which is reserved for system "
                "components (__acker, __system)",
                component=cid,
            )
        if spec.is_spout and not isinstance(spec.obj, Spout):
            raise InvalidTopologyError(
                f"component {cid!r} was set with set_spout but is a "
                f"{type(spec.obj).__name__}, not a Spout",
                component=cid,
            )
        if not spec.is_spout and not isinstance(spec.obj, Bolt | BasicBolt | BatchBolt):
            raise InvalidTopologyError(
                f"component {cid!r} was set with set_bolt but is a "
                f"{type(spec.obj).__name__}, not a Bolt, BasicBolt or BatchBolt",
                component=cid,
            )
        check_called_methods(cid, spec.obj, SPOUT if spec.is_spout else BOLT)
        for name, value in (("parallelism", spec.parallelism), ("tasks", spec.tasks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidTopologyError(
                    f"component {cid!r}: {name} must be a positive integer, got {value!r}",
                    component=cid,
                )
        # Storm runs at most one executor per task.
        spec.parallelism = min(spec.parallelism, spec.tasks)
        try:
            validate_component_conf(cid, spec.conf)
        except InvalidConfigError as exc:
            raise InvalidTopologyError(str(exc), component=cid) from exc
        try:
            spec.streams = declared_streams(cid, spec.obj)
        except InvalidTopologyError:
            raise
        except Exception as exc:
            raise InvalidTopologyError(
                f"component {cid!r}: declare_output_fields raised {exc!r}", component=cid
            ) from exc
        components[cid] = spec

    for spec in components.values():
        seen: set[tuple[str, str]] = set()
        for sub in spec.inputs:
            _check_subscription(spec, sub, components)
            if (sub.source, sub.stream) in seen:
                # Storm keys a bolt's inputs by stream: two groupings of one stream would
                # deliver each of its tuples twice.
                raise InvalidTopologyError(
                    f"bolt {spec.id!r} subscribes twice to stream {sub.stream!r} of "
                    f"{sub.source!r} (every tuple would arrive twice): keep one grouping",
                    component=spec.id,
                    stream=sub.stream,
                )
            seen.add((sub.source, sub.stream))
    return Topology(components)


def _check_subscription(
    spec: ComponentSpec, sub: Subscription, components: dict[str, ComponentSpec]
) -> None:
    cid = spec.id
    source = components.get(sub.source)
    if source is None:
        raise InvalidTopologyError(
            f"bolt {cid!r} subscribes to unknown component {sub.source!r}; "
            f"known components: {sorted(components)}",
            component=cid,
        )
    stream = source.streams.get(sub.stream)
    if stream is None:
        raise InvalidTopologyError(
            f"bolt {cid!r} subscribes to stream {sub.stream!r} of {sub.source!r}, which "
            + (
                f"declares only {sorted(source.streams)}"
                if source.streams
                else "declares no output streams (give it outputs = [...] or declare_output_fields)"
            ),
            component=cid,
            stream=sub.stream,
        )
    grouping = sub.grouping
    if grouping.kind == g.DIRECT and not stream.direct:
        raise InvalidTopologyError(
            f"bolt {cid!r} uses a direct grouping on stream {sub.stream!r} of "
            f"{sub.source!r}, which is not declared direct",
            component=cid,
            stream=sub.stream,
        )
    if grouping.kind != g.DIRECT and stream.direct:
        raise InvalidTopologyError(
            f"bolt {cid!r} uses a {grouping.kind} grouping on stream {sub.stream!r} of "
            f"{sub.source!r}, which is direct: only direct_grouping can subscribe to it",
            component=cid,
            stream=sub.stream,
        )
    if grouping.kind in (g.FIELDS, g.PARTIAL_KEY):
        if not grouping.fields:
            raise InvalidTopologyError(
                f"bolt {cid!r}: {grouping.kind} grouping on {sub.source!r} needs at least "
                "one field",
                component=cid,
                stream=sub.stream,
            )
        for name in grouping.fields:
            if name not in stream.fields:
                raise InvalidTopologyError(
                    f"bolt {cid!r} groups stream {sub.stream!r} of {sub.source!r} by "
                    f"unknown field {name!r}; the stream's fields are "
                    f"{stream.fields.to_list()}",
                    component=cid,
                    stream=sub.stream,
                    field=name,
                )
    if grouping.kind == g.CUSTOM and not callable(getattr(grouping.custom, "choose_tasks", None)):
        raise InvalidTopologyError(
            f"bolt {cid!r}: custom grouping on {sub.source!r} must have a choose_tasks "
            f"method (subclass CustomStreamGrouping), got {type(grouping.custom).__name__}",
            component=cid,
            stream=sub.stream,
        )
