"""Which modules the build compiles with mypyc, and whether this install has them.

Decision: the per-tuple path (tuples, collectors, executors, routing, the reliability
core) is plain, type-annotated Python that mypyc compiles to C extension modules when
tupletree is built (setup.py). The compiled code runs the same source with the same
semantics and far fewer instructions (bench/instructions.sh; the figures are in
notes/performance.md); where no C compiler is at hand, or with
``TUPLETREE_PURE=1`` at build time, the same modules run interpreted.

The rules that keep these modules compilable and fast: no attributes created with
``setattr``, no ``*args`` forwarding to ``super().__init__``, no method aliases in class
bodies, ``Any`` on parameters that user code passes (mypyc checks annotated types at
run time, so ``values: list`` would turn EmitError's clear message into a TypeError),
and ``Id`` (reliability/ids.py), not ``int``, for 64-bit tuple ids. And check the
generated C (build/__native_tupletree.c) for ``CPyObject_GetAttr``/``PyObject_SetAttr``
on hot lines: an attribute of a value typed ``Any`` or ``X | None``, or ``x.__class__``,
is looked up by name at run time (typing ``metrics`` as TaskMetrics and narrowing one
Optional saved a sixth of the instructions per sentence: notes/performance.md).

This module is read by setup.py before tupletree is installed: standard library only.
"""

from __future__ import annotations

import importlib
import importlib.machinery

# Paths relative to src/, in the order mypyc is given them.
HOT_MODULES = [
    "tupletree/reliability/protocol.py",
    "tupletree/reliability/ids.py",
    "tupletree/reliability/rotating_map.py",
    "tupletree/reliability/acker.py",
    "tupletree/reliability/pending.py",
    "tupletree/reliability/anchoring.py",
    "tupletree/topology/tuple.py",
    "tupletree/topology/batch.py",
    "tupletree/runtime/hashing.py",
    "tupletree/runtime/metrics.py",
    "tupletree/runtime/routing.py",
    "tupletree/runtime/target_kinds.py",
    "tupletree/runtime/worker_acks.py",
    "tupletree/runtime/collectors.py",
    "tupletree/runtime/executors.py",
    "tupletree/runtime/batch_collector.py",
    "tupletree/runtime/batch_executor.py",
    "tupletree/distributed/frames.py",
    # A frame's way between workers around frames.py: flush, seal, send; receive, open.
    # Compiled, a crossing item costs ~75 instructions less (2,144 to 2,070 with
    # bench/instructions_crossing.sh batch; notes/performance.md, stop 32).
    "tupletree/distributed/sealing.py",
    "tupletree/distributed/transport.py",
]


def compiled_modules() -> list[str]:
    """The hot modules that this installation runs as compiled extensions."""
    out = []
    for path in HOT_MODULES:
        name = path.removesuffix(".py").replace("/", ".")
        module = importlib.import_module(name)
        loader = getattr(module, "__loader__", None)
        if isinstance(loader, importlib.machinery.ExtensionFileLoader):
            out.append(name)
    return out


def describe() -> str:
    """One line for benchmark and CLI output: how the hot path runs here."""
    n = len(compiled_modules())
    if n == len(HOT_MODULES):
        return "hot path compiled (mypyc)"
    if n == 0:
        return "hot path interpreted (pure Python build)"
    return f"hot path partly compiled ({n} of {len(HOT_MODULES)} modules)"
