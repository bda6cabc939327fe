"""docs/windowing.md's example runs as written and does what its comments say."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "windowing.md"


def test_the_example_runs(capsys):
    (example, *_) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    module = types.ModuleType("windowing_doc_example")
    sys.modules[module.__name__] = module  # components are pickled by module name
    try:
        exec(compile(example, str(DOC), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "window [1, 2] sum 3",
        "window [1, 2, 3, 4] sum 10",
        "window [2, 3, 4, 5, 6] sum 20",
        "window [4, 5, 6, 7, 8] sum 30",
    ]
