"""The README's Python examples run as written (the tour, then the testing example,
which uses the tour's topology and Split bolt)."""

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
