"""The README is a front door: its Python examples run as written (the tour, then the
testing example, which uses the tour's topology and Split bolt), and it stays short;
what does not fit is a page under docs/."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_tour_and_testing_examples_run():
    """The first two ```python blocks of the README execute without error, in a module
    of their own as a user's script would (components are copied with pickle, which
    finds classes by module name)."""
    blocks = python_blocks()
    assert len(blocks) >= 2
    module = types.ModuleType("readme_examples")
    sys.modules[module.__name__] = module
    try:
        exec(compile(blocks[0] + "\n" + blocks[1], str(README), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    assert module.tracker.acked == {1}


MAX_LINES = 250


def test_the_readme_stays_a_front_door() -> None:
    """At most ``MAX_LINES`` lines, and every page it links to exists (a link is how the
    rest is reached: a page moved without its link would leave a dead end)."""
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert "docs/README.md" in links
    assert [link for link in links if not (README.parent / link).exists()] == []
