"""tests/ mirrors src/tupletree/: the tests of ``src/tupletree/<pkg>/`` sit in
``tests/<pkg>/`` (a package: every test folder has an ``__init__.py``), and the tests of a
top-level module ``src/tupletree/<m>.py`` sit at the top as ``test_<m>.py`` or
``test_<m>_<topic>.py``. Nothing else lives at the top but the cross-cutting files
listed in ``TOP_LEVEL``, and no test folder lacks its package but those listed in
``FOLDERS_WITHOUT_PACKAGE``. A test added in the wrong place, or a package renamed
without its tests, fails here."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Files at the top of tests/ that belong to no one module: the suite's fixtures and the
# harness every cluster-parametrised test uses, and the checks on the whole repository.
TOP_LEVEL = {
    "__init__.py",
    "conftest.py",  # fixtures for every folder (sim_cluster, spark, any_cluster...)
    "clusters.py",  # the harness that runs one test on every cluster
    "registry.py",  # state shared by a test and its components' task copies
    "standalone.py",  # the suite's Spark standalone cluster
    "test_docs_paths.py",  # docs and docstrings name only paths that exist
    "test_first_hour_mistakes.py",  # a new user's mistakes, across builder, config, testing, cli
    "test_layers.py",  # the layering ARCHITECTURE.md states
    "test_readme.py",  # the README's examples run; its length
    "test_tree_mirror.py",  # this file
}
# Test folders that mirror no package, and why (each says so in its __init__.py).
FOLDERS_WITHOUT_PACKAGE = {
    "scenarios",  # Storm's scenarios and the transcripts: every layer, every cluster
}


def misplaced(tests: Path, src: Path) -> list[str]:
    """What breaks the mirror between ``tests`` and ``src`` (the package's folder)."""
    modules = {p.stem for p in src.glob("*.py")} - {"__init__"}
    problems = []
    for path in sorted(tests.glob("*.py")):
        name = path.name
        if name in TOP_LEVEL:
            continue
        stem = path.stem.removeprefix("test_")
        if name.startswith("test_") and any(stem == m or stem.startswith(f"{m}_") for m in modules):
            continue
        problems.append(f"{name}: at the top of tests/, but tests no top-level module")
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir()):
        rel = folder.relative_to(tests)
        if "__pycache__" in rel.parts or any(part.startswith(".") for part in rel.parts):
            continue
        if not (folder / "__init__.py").exists():
            problems.append(f"{rel}/: no __init__.py")
        if rel.parts[0] not in FOLDERS_WITHOUT_PACKAGE and not (src / rel).is_dir():
            problems.append(f"{rel}/: no src/tupletree/{rel}/ to mirror")
    return problems


def test_tests_mirror_the_source_tree() -> None:
    assert misplaced(ROOT / "tests", ROOT / "src" / "tupletree") == []


def test_the_mirror_check_sees_a_stray_file_and_folder(tmp_path: Path) -> None:
    """The checker itself: a test of a package left at the top, a folder without its
    package and a folder without ``__init__.py`` are each reported; tests of a top-level
    module and the listed files are not."""
    src, tests = tmp_path / "src", tmp_path / "tests"
    (src / "runtime").mkdir(parents=True)
    (src / "cluster.py").touch()
    (tests / "runtime").mkdir(parents=True)
    (tests / "runtime" / "__init__.py").touch()
    for name in ("conftest.py", "test_cluster.py", "test_cluster_rebalance.py"):
        (tests / name).touch()
    assert misplaced(tests, src) == []
    (tests / "test_worker.py").touch()
    (tests / "gone").mkdir()
    (tests / "gone" / "__init__.py").touch()
    (tests / "runtime" / "inner").mkdir()
    (src / "runtime" / "inner").mkdir()
    assert misplaced(tests, src) == [
        "test_worker.py: at the top of tests/, but tests no top-level module",
        "gone/: no src/tupletree/gone/ to mirror",
        "runtime/inner/: no __init__.py",
    ]
