"""docs/state-backends.md: its Python examples run as written, and the layouts it
shows are the ones the backends create."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "state-backends.md"


def test_the_pages_store_example_runs() -> None:
    """The last ```python block (the first is a config dict needing servers)."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 2
    exec(compile(blocks[-1], str(PAGE), "exec"), {})


def test_the_pages_sqlite_layout_is_the_created_one(tmp_path: Path) -> None:
    import sqlite3

    from tupletree.store import open_store

    open_store("sqlite", {"path": str(tmp_path / "s.db")}).close()
    (created,) = (
        sqlite3.connect(tmp_path / "s.db")
        .execute("SELECT sql FROM sqlite_master WHERE name = 'tupletree_store'")
        .fetchone()
    )
    shown = re.search(r"(CREATE TABLE tupletree_store \(.*?WITHOUT ROWID)", PAGE.read_text(), re.S)
    assert shown is not None
    normal = lambda s: " ".join(s.replace("IF NOT EXISTS ", "").replace('"', "").split())  # noqa: E731
    assert normal(shown.group(1)) == normal(created)
