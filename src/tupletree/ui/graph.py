"""A topology as a graph: components as nodes, subscriptions as edges, and the text forms
``tupletree visualize`` prints (Mermaid, Graphviz DOT).

Pure: it reads a Topology and returns plain values; no rendering library is needed.
Layers (``layer`` of a node) place every component one step right of its furthest
input, so a page can lay the graph out left to right without a layout engine; a loop
(a bolt feeding an earlier one) is cut at the edge that closes it.
"""

from __future__ import annotations

import re
from typing import Any

from tupletree.topology.builder import Topology
from tupletree.topology.components import DEFAULT_STREAM


def grouping_label(grouping: Any) -> str:
    """``shuffle``, ``fields(word)``, ``partial_key(a, b)``, ``custom(MyGrouping)``..."""
    kind = grouping.kind
    if grouping.fields:
        return f"{kind}({', '.join(grouping.fields)})"
    if grouping.custom is not None:
        return f"{kind}({type(grouping.custom).__name__})"
    return kind


def topology_graph(topology: Topology) -> dict[str, Any]:
    """``{"nodes": [{"id", "type", "parallelism", "tasks", "layer"}],
    "edges": [{"source", "target", "stream", "grouping"}]}``, nodes in insertion order."""
    components = topology.components
    edges = [
        {
            "source": sub.source,
            "target": spec.id,
            "stream": sub.stream,
            "grouping": grouping_label(sub.grouping),
        }
        for spec in components.values()
        for sub in spec.inputs
        if sub.source in components
    ]
    layers = _layers(topology)
    nodes = [
        {
            "id": spec.id,
            "type": "spout" if spec.is_spout else "bolt",
            "parallelism": spec.parallelism,
            "tasks": spec.tasks,
            "layer": layers[spec.id],
        }
        for spec in components.values()
    ]
    return {"nodes": nodes, "edges": edges}


def _layers(topology: Topology) -> dict[str, int]:
    """Longest path from a spout over the edges left once the cycles are cut: a
    depth-first walk from the spouts marks an edge back to a component still on its path
    as closing a loop; the rest is a DAG, layered in topological order."""
    components = topology.components
    outs: dict[str, list[str]] = {cid: [] for cid in components}
    for spec in components.values():
        for sub in spec.inputs:
            if sub.source in components:
                outs[sub.source].append(spec.id)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done

    def visit(cid: str) -> None:
        state[cid] = 1
        for target in outs[cid]:
            if state.get(target) == 1:
                back.add((cid, target))
            elif target not in state:
                visit(target)
        state[cid] = 2

    for cid in [s.id for s in topology.spouts] + list(components):
        if cid not in state:
            visit(cid)
    indegree = dict.fromkeys(components, 0)
    for cid, targets in outs.items():
        for target in targets:
            if (cid, target) not in back:
                indegree[target] += 1
    layer = dict.fromkeys(components, 0)
    ready = [cid for cid, n in indegree.items() if n == 0]
    while ready:
        cid = ready.pop()
        for target in outs[cid]:
            if (cid, target) in back:
                continue
            layer[target] = max(layer[target], layer[cid] + 1)
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    return layer


def _edge_text(edge: dict[str, Any]) -> str:
    stream = "" if edge["stream"] == DEFAULT_STREAM else f"{edge['stream']}: "
    return f"{stream}{edge['grouping']}"


def _mermaid_id(cid: str) -> str:
    return "c_" + re.sub(r"[^A-Za-z0-9_]", "_", cid)


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def to_mermaid(topology: Topology) -> str:
    """A Mermaid flowchart: spouts as stadiums, bolts as boxes, edges labelled with
    their stream (when not ``default``) and grouping."""
    graph = topology_graph(topology)
    lines = ["flowchart LR"]
    for node in graph["nodes"]:
        label = _mermaid_text(f"{node['id']} x{node['parallelism']}")
        shape = f'(["{label}"])' if node["type"] == "spout" else f'["{label}"]'
        lines.append(f"    {_mermaid_id(node['id'])}{shape}")
    for edge in graph["edges"]:
        lines.append(
            f'    {_mermaid_id(edge["source"])} -->|"{_mermaid_text(_edge_text(edge))}"| '
            f"{_mermaid_id(edge['target'])}"
        )
    return "\n".join(lines) + "\n"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(topology: Topology, name: str = "topology") -> str:
    """A Graphviz digraph (left to right): spouts as ellipses, bolts as boxes."""
    graph = topology_graph(topology)
    lines = [
        f"digraph {_dot_quote(name)} {{",
        "    rankdir=LR;",
        '    node [fontname="Helvetica"]; edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in graph["nodes"]:
        shape = "ellipse" if node["type"] == "spout" else "box"
        label = f"{node['id']} x{node['parallelism']}"
        lines.append(f"    {_dot_quote(node['id'])} [shape={shape}, label={_dot_quote(label)}];")
    for edge in graph["edges"]:
        lines.append(
            f"    {_dot_quote(edge['source'])} -> {_dot_quote(edge['target'])} "
            f"[label={_dot_quote(_edge_text(edge))}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
