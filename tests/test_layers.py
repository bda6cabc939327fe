"""The layering ARCHITECTURE.md states, checked on the sources: a module imports only
from its own layer and those below it (imports inside functions and modules of
subpackages, such as connectors/kafka/, included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tupletree"

# package -> the tupletree packages it must never import
_SERVICES = {"drpc", "connectors", "ui", "testing", "cli", "webserver", "trident"}
FORBIDDEN = {
    "reliability": {"runtime", "distributed", "spark", "local"} | _SERVICES,
    "topology": {"runtime", "distributed", "spark", "local"} | _SERVICES,
    "runtime": {"distributed", "spark", "local"} | _SERVICES,
    "distributed": {"spark", "local"} | _SERVICES,
    # A connector is a plain Spout or Bolt to the runtime.
    "connectors": {"runtime", "distributed", "spark", "local", "ui", "testing", "cli"},
    # The web view and the testing helpers work on any cluster: through its protocol.
    "ui": {"runtime", "distributed", "spark", "local", "testing", "cli"},
    "testing": {"runtime", "distributed", "spark", "local", "ui", "cli"},
    # The store lies under every user of durable state (Trident, stateful bolts, windows)
    # and every cluster: it imports nothing of tupletree's but itself and the two modules
    # below every layer, redact.py and extras.py.
    "store": {p.stem for p in SRC.iterdir() if p.suffix == ".py" or p.is_dir()}
    - {"store", "redact", "extras", "__init__", "__pycache__"},
    # The records a cluster answers with (errors, timed-out trees, metric shapes): plain
    # data below every layer, so the runtime builds them and the web view reads them.
    "records": {p.stem for p in SRC.iterdir() if p.suffix == ".py" or p.is_dir()}
    - {"records", "__init__", "__pycache__"},
    # Trident's states: decisions and storage, driven by trident's committer bolts.
    "trident/state": {"runtime", "distributed", "spark", "local"} | _SERVICES - {"trident"},
    # Trident compiles to plain Spouts and Bolts (as a connector is one): it reaches the
    # runtime only through what components are given; Kafka's Trident spouts import it.
    "trident": {"runtime", "distributed", "spark", "local", "ui", "testing", "cli", "connectors"},
    # A windowed bolt is a plain Bolt to the runtime, like a connector.
    "windowing": {"runtime", "distributed", "spark", "local"} | _SERVICES,
    # Stateful bolts are plain Spouts and Bolts over the store; the topology layer
    # reaches them only through its generic plan_topology hook; persistent windows
    # (windowing/) build on them, not the other way round.
    "state": {"runtime", "distributed", "spark", "local", "windowing", "trident"} | _SERVICES,
}


def imported(path: Path) -> set[str]:
    """The tupletree packages a module imports (``tupletree.x...`` -> ``x``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "tupletree" and len(parts) > 1:
                names.add(parts[1])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(package: str) -> None:
    bad = {
        str(path.relative_to(SRC)): sorted(imported(path) & FORBIDDEN[package])
        for path in sorted((SRC / package).rglob("*.py"))
        if imported(path) & FORBIDDEN[package]
    }
    assert bad == {}


def test_distributed_uses_no_spark_api() -> None:
    """distributed/ may use pyspark's cloudpickle as a serializer, nothing else of it."""
    uses = {}
    for path in sorted((SRC / "distributed").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyspark"):
                names = {alias.name for alias in node.names}
                if node.module != "pyspark" or names != {"cloudpickle"}:
                    uses[path.name] = node.module
    assert uses == {}


def test_topology_knows_nothing_of_state() -> None:
    """topology/ wires stateful bolts through plan_topology only: it imports no state/."""
    assert [p.name for p in (SRC / "topology").rglob("*.py") if "state" in imported(p)] == []


# Top-level modules: the ones below every layer import none of tupletree's packages
# (but each other as listed); the clusters' shared base sits with local.py.
_PACKAGES = {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
_MODULES = {p.stem for p in SRC.glob("*.py")} - {"__init__"}
_BOTTOM = {
    "errors",
    "config",
    "log_limit",
    "redact",
    "extras",
    "compiled",
    "webserver",
    # what both HTTP services apply (webserver.py), standard library only
    "connection_table",
    "descriptors",
    "http_guard",
}
TOP_LEVEL_FORBIDDEN = {
    **{m: (_PACKAGES | _MODULES) - _BOTTOM for m in _BOTTOM},
    "cluster": {"runtime", "distributed", "spark", "local", "services"} | _SERVICES,
    "local": {"distributed", "spark", "services"} | _SERVICES,
}


@pytest.mark.parametrize("module", sorted(TOP_LEVEL_FORBIDDEN))
def test_a_top_level_module_imports_no_higher_layer(module: str) -> None:
    """cluster.py once imported the DRPC server and the web view (a service, one layer
    up); they are wired in from above now (services.py)."""
    assert imported(SRC / f"{module}.py") & TOP_LEVEL_FORBIDDEN[module] == set()
