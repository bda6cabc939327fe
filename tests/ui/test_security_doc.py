"""docs/security.md's example runs as written and prints what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_the_token_example_runs(capsys):
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    exec(compile(example, str(DOC), "exec"), {})
    assert capsys.readouterr().out.splitlines() == ["[]", "UIClientError 401"]
