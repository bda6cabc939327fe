"""Docs and docstrings name only paths that exist: a renamed or deleted file fails
here, not in a reader's hands. A path is a token like ``runtime/worker.py`` or
``docs/state-backends.md`` in any ``.md`` of the repository's top, ``docs/`` and ``notes/``,
and in every docstring of ``src/``, ``tests/`` and ``bench/``; it may be written from
the repository's root, from ``src/tupletree/``, from ``tests/``, or from the naming
file's own package. Paths of other projects are written as URLs (which this skips)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(r"(?<![\w./:-])((?:[\w-]+/)+[\w.-]+\.(?:py|md|sh|toml|json|js|html|css))\b")


def _exists(path: str, near: Path) -> bool:
    bases = [ROOT, ROOT / "src" / "tupletree", ROOT / "tests", ROOT / "src"]
    bases += [p for p in near.parents if ROOT in p.parents or p == ROOT]
    return any((base / path).exists() for base in bases)


def _docstrings(path: Path) -> list[str]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    tree = ast.parse(path.read_text())
    return [d for n in ast.walk(tree) if isinstance(n, kinds) and (d := ast.get_docstring(n))]


def _texts() -> list[tuple[Path, str]]:
    out = [(p, p.read_text()) for p in sorted(ROOT.glob("*.md"))]
    out += [
        (p, p.read_text()) for d in ("docs", "notes") for p in sorted(ROOT.glob(f"{d}/**/*.md"))
    ]
    for d in ("src", "tests", "bench"):
        for p in sorted(ROOT.glob(f"{d}/**/*.py")):
            out += [(p, doc) for doc in _docstrings(p)]
    return out


def test_every_path_a_doc_or_docstring_names_exists() -> None:
    missing = {
        f"{file.relative_to(ROOT)}: {path}"
        for file, text in _texts()
        for path in PATH.findall(text)
        if not _exists(path, file)
    }
    assert sorted(missing) == []


def test_the_path_check_catches_a_missing_file() -> None:
    """The checker itself: a made-up path is reported, a real one is not."""
    assert not _exists("runtime/no_such_module.py", ROOT / "src" / "tupletree" / "cli.py")
    assert _exists("runtime/worker.py", ROOT / "README.md")
    assert PATH.findall("see docs/x.md and https://example.org/a/b.md") == ["docs/x.md"]
