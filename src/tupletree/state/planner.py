"""How a topology with a stateful bolt is built (Storm's TopologyBuilder, for
IStatefulBolt): ``plan_topology(specs)``, which ``TopologyBuilder.create_topology``
calls through the components' ``plan_topology`` hook (topology/builder.py says why the
hook exists).

If any component is a StatefulBolt (or already one of this package's wrappers):

- the checkpoint spout ``$checkpointspout`` (one task) is added;
- every StatefulBolt is wrapped in a StatefulBoltExecutor; every other bolt with inputs
  in a checkpoint forwarder (a BasicCheckpointForwarder for a BasicBolt whose
  ``$checkpoint`` comes from one upstream task in both modes, a CheckpointForwarder
  otherwise), so ``$checkpoint`` flows through the whole graph;
- every data spout is wrapped in a CheckpointedSpout (aligned.py), which passes
  everything straight through in Storm's mode and sends the checkpoint steps in band in
  the aligned mode;
- every bolt subscribes, all-grouped, to ``$checkpoint`` of each component it reads
  from: of the checkpoint spout *and* of the spout for an input that is a spout (the
  first counts in Storm's mode, the second in the aligned mode), of the bolt for an
  input that is a bolt. The wrappers know both sets and pick one at ``prepare``.

Idempotent: already wrapped components and existing subscriptions are left alone, so
planning a planned topology changes nothing. A topology without a stateful bolt is
returned as it is.
"""

from __future__ import annotations

import warnings
from typing import Any

from tupletree.errors import InvalidTopologyError
from tupletree.state.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM

_HOOKS = (
    "prepare",
    "execute",
    "cleanup",
    "init_state",
    "pre_prepare",
    "pre_commit",
    "pre_rollback",
)


def plan_topology(specs: list[Any]) -> list[Any]:
    """See the module docstring. ``specs``: the builder's ComponentSpecs."""
    from tupletree.state.aligned import CheckpointedSpout
    from tupletree.state.bolts import (
        BasicCheckpointForwarder,
        CheckpointForwarder,
        StatefulBoltExecutor,
    )
    from tupletree.state.spout import CheckpointSpout
    from tupletree.state.stateful_bolt import StatefulBolt
    from tupletree.topology import groupings as g
    from tupletree.topology.builder import SPOUT, ComponentSpec, Subscription
    from tupletree.topology.components import check_called_methods

    wrappers = (StatefulBoltExecutor, CheckpointForwarder, BasicCheckpointForwarder)
    if not any(isinstance(s.obj, StatefulBolt | StatefulBoltExecutor) for s in specs):
        return specs
    by_id = {s.id: s for s in specs}
    checkpoint = by_id.get(CHECKPOINT_COMPONENT)
    if checkpoint is None:
        checkpoint = ComponentSpec(CHECKPOINT_COMPONENT, CheckpointSpout(), SPOUT, 1, 1)
        specs = [*specs, checkpoint]
        by_id[CHECKPOINT_COMPONENT] = checkpoint
    elif not isinstance(checkpoint.obj, CheckpointSpout):
        raise InvalidTopologyError(
            f"component id {CHECKPOINT_COMPONENT!r} is reserved for the checkpoint spout of "
            "a topology with stateful bolts",
            component=CHECKPOINT_COMPONENT,
        )
    spouts = [s for s in specs if s.is_spout and s.id != CHECKPOINT_COMPONENT]
    for spec in spouts:
        if not isinstance(spec.obj, CheckpointedSpout):
            spec.obj = CheckpointedSpout(spec.obj)
    checkpoint.obj.spouts = tuple(sorted(s.id for s in spouts))

    for spec in specs:
        if spec.is_spout:
            continue
        sources = {sub.source for sub in spec.inputs if sub.stream != CHECKPOINT_STREAM}
        if not sources:
            if isinstance(spec.obj, StatefulBolt):
                raise InvalidTopologyError(
                    f"stateful bolt {spec.id!r} has no inputs, so no checkpoint would ever "
                    "reach it: subscribe it to a component",
                    component=spec.id,
                )
            continue
        unknown = sorted(s for s in sources if s not in by_id)
        if unknown:
            continue  # validate_structure names the unknown component
        storm = {CHECKPOINT_COMPONENT if by_id[s].is_spout else s for s in sources}
        aligned = set(sources)
        if not isinstance(spec.obj, wrappers):
            spec.obj = _wrap(spec, storm, aligned, by_id)
        else:
            spec.obj.storm_sources = frozenset(storm)
            spec.obj.aligned_sources = frozenset(aligned)
        if isinstance(spec.obj, StatefulBoltExecutor):
            check_called_methods(spec.id, spec.obj.delegate, "bolt")
            _check_hooks(spec.id, spec.obj.delegate)
        subscribed = {sub.source for sub in spec.inputs if sub.stream == CHECKPOINT_STREAM}
        for source in sorted(storm | aligned):
            if source not in subscribed:
                spec.inputs.append(Subscription(source, CHECKPOINT_STREAM, g.Grouping(g.ALL)))
    return specs


def _wrap(spec: Any, storm: set[str], aligned: set[str], by_id: dict[str, Any]) -> Any:
    from tupletree.state.bolts import (
        BasicCheckpointForwarder,
        CheckpointForwarder,
        StatefulBoltExecutor,
    )
    from tupletree.state.stateful_bolt import StatefulBolt
    from tupletree.topology.components import BasicBolt

    obj = spec.obj
    if isinstance(obj, StatefulBolt):
        return StatefulBoltExecutor(obj, storm, aligned)
    if isinstance(obj, BasicBolt):
        channels = max(sum(by_id[c].tasks for c in storm), sum(by_id[c].tasks for c in aligned))
        if channels <= 1:
            return BasicCheckpointForwarder(obj, storm, aligned)
    if isinstance(obj, BasicBolt) or _is_bolt(obj):
        return CheckpointForwarder(obj, storm, aligned)
    return obj  # not a bolt at all: validate_structure says so


def _is_bolt(obj: Any) -> bool:
    from tupletree.topology.components import Bolt

    return isinstance(obj, Bolt)


def _check_hooks(component: str, bolt: Any) -> None:
    import inspect

    for name in _HOOKS[3:]:
        method = getattr(bolt, name, None)
        if inspect.isgeneratorfunction(method) or inspect.iscoroutinefunction(method):
            raise InvalidTopologyError(
                f"component {component!r}: {type(bolt).__name__}.{name} is a generator or "
                "coroutine function, so calling it would run none of its body; write it "
                "as a plain def",
                component=component,
            )


def warn_unbounded_aligned(name: str, topology: Any, conf: dict[str, Any]) -> None:
    """At submit (ClusterBase._checked_submission): warn when a topology checkpoints in
    the aligned mode and some data spout has no ``topology.max.spout.pending`` (its
    own or the topology's). Unbounded, the spouts fill every queue and each checkpoint
    step waits behind them; under load a data tuple times out, every checkpoint is
    refused and rewound, and the topology may commit nothing until the load drops
    (docs/state.md, Costs). A warning, not a refusal: a light load runs fine."""
    from tupletree.config import Config
    from tupletree.state.spout import CheckpointSpout

    checkpoint = topology.components.get(CHECKPOINT_COMPONENT)
    if checkpoint is None or not isinstance(checkpoint.obj, CheckpointSpout):
        return  # no stateful bolt: nothing checkpoints
    mode, pending = Config.TOPOLOGY_STATE_CHECKPOINT_MODE, Config.TOPOLOGY_MAX_SPOUT_PENDING
    unbounded = []
    for cid, spec in topology.components.items():
        if not spec.is_spout or cid == CHECKPOINT_COMPONENT:
            continue
        merged = {**conf, **spec.conf}  # what the spout's task runs with
        if merged.get(mode) == "aligned" and merged.get(pending) is None:
            unbounded.append(cid)
    unbounded.sort()
    if not unbounded:
        return
    spouts = ("spout " if len(unbounded) == 1 else "spouts ") + ", ".join(map(repr, unbounded))
    warnings.warn(
        f"topology {name!r} checkpoints in {mode} 'aligned' with {pending} unset "
        f"({spouts}): under load the spouts fill every queue, a checkpoint waits behind "
        "them, any data tuple timing out refuses it, and the topology may commit nothing "
        f"until the load drops. Set {pending} (in the topology's config, or per spout "
        "with set_max_spout_pending) above what one checkpoint interval brings "
        "(docs/state.md, Costs)",
        UserWarning,
        stacklevel=4,  # this, _checked_submission, submit_topology: the user's call
    )
