"""Build script: everything is declared in pyproject.toml except the compiled hot path.

The modules listed in src/tupletree/compiled.py are compiled with mypyc when possible.
The build never fails for want of it: with TUPLETREE_PURE=1, without mypyc, or when the
C compiler fails, the same modules are installed as plain Python (and say so).
"""

from __future__ import annotations

import os
import runpy
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HOT_MODULES = runpy.run_path(os.path.join("src", "tupletree", "compiled.py"))["HOT_MODULES"]


def warn(message: str) -> None:
    print(f"tupletree build: {message}; the hot path stays pure Python", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """Compile if we can; if any module fails, install none of them compiled.

    All or nothing, because mypyc's per-module extensions share one library: a partial
    set would not import.
    """

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # a missing compiler or headers, in any of its forms
            for ext in self.extensions:
                built = self.get_ext_fullpath(ext.name)
                if os.path.exists(built):
                    os.remove(built)
            warn(f"compiling failed ({type(exc).__name__}: {exc})")


def ext_modules() -> list:
    if os.environ.get("TUPLETREE_PURE") == "1":
        warn("TUPLETREE_PURE=1")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        warn("mypyc is not installed")
        return []
    try:
        return mypycify(
            [os.path.join("src", m) for m in HOT_MODULES], opt_level="3", group_name="tupletree"
        )
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by SystemExit
        warn(f"mypyc refused the sources ({type(exc).__name__}: {exc})")
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
