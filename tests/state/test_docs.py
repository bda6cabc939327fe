"""docs/state.md's examples marked "# example: runs as written" run (in a module of
their own, so their components pickle as the tasks' copies need)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from tupletree.store.memory import forget

DOC = Path(__file__).resolve().parents[2] / "docs" / "state.md"


def test_marked_examples_run() -> None:
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
        if b.startswith("# example: runs as written")
    ]
    assert blocks
    for i, block in enumerate(blocks):
        module = types.ModuleType(f"state_doc_{i}")
        sys.modules[module.__name__] = module
        try:
            exec(compile(block, str(DOC), "exec"), module.__dict__)
        finally:
            del sys.modules[module.__name__]
            forget("docs-example")


def test_the_other_examples_compile() -> None:
    for block in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S):
        compile(block, str(DOC), "exec")
