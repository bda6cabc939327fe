"""docs/trident-state.md's examples marked "# example: runs as written" run."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "trident-state.md"


def test_marked_examples_run() -> None:
    blocks = [
        b
        for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
        if b.startswith("# example: runs as written")
    ]
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {"__name__": "trident_state_doc"})
