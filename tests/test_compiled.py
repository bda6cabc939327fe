"""The installed build: compiled hot path unless a pure build was asked for.

The build falls back to interpreted modules rather than fail (setup.py), so a type error
in a hot module, or a lost build requirement, would only show as a slower benchmark.
This test makes it fail the suite instead.
"""

from __future__ import annotations

import os

from tupletree import compiled


def test_every_hot_module_is_compiled_unless_pure_was_asked_for():
    if os.environ.get("TUPLETREE_PURE") == "1":
        assert compiled.compiled_modules() == []
        assert "interpreted" in compiled.describe()
        return
    names = [m.removesuffix(".py").replace("/", ".") for m in compiled.HOT_MODULES]
    assert compiled.compiled_modules() == names, (
        "the build fell back to pure Python: reinstall with `pip install -v .` and read "
        "the 'tupletree build:' lines"
    )
    assert compiled.describe() == "hot path compiled (mypyc)"
