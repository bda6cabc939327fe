"""Errors raised while starting or supervising workers on Spark.

They live here rather than in ``tupletree.errors`` so that this layer can be used (and
tested) without the topology runtime. Each carries the numbers it talks about as
attributes, so callers need not parse the message.
"""

from __future__ import annotations

import re


class SparkLaunchError(RuntimeError):
    """Base class: workers could not be started or kept running on Spark."""


class SparkUnavailableError(SparkLaunchError):
    """Spark cannot start here at all: pyspark is missing, or Java is missing or too old."""


class NotEnoughSlotsError(SparkLaunchError):
    """Spark has fewer free task slots than there are workers to run.

    Every worker is a task that runs for the topology's whole life, so a worker that
    does not get a slot would wait forever; we say so at once instead.
    """

    def __init__(self, message: str, *, needed: int, available: int, master: str) -> None:
        super().__init__(message)
        self.needed = needed
        self.available = available
        self.master = master


class WorkerStartTimeout(SparkLaunchError):
    """Not every worker registered within the start timeout; ``missing`` lists them."""

    def __init__(self, message: str, *, missing: list[int]) -> None:
        super().__init__(message)
        self.missing = missing


class SparkJobFailed(SparkLaunchError):
    """The workers' Spark jobs ended for good: one ended before every worker had
    registered, or Spark itself stopped (after the start a worker whose job ends is
    started again instead, see ``supervision``). ``worker_errors`` maps a worker index to
    the last error that worker reported itself, which is usually more readable than
    Spark's own message."""

    def __init__(self, message: str, *, worker_errors: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.worker_errors = dict(worker_errors or {})


def summarize_spark_error(exc: BaseException) -> str:
    """The useful line of a Py4J-wrapped Spark job failure (the full text is a page of
    Java stack): Spark's 'Job aborted ...' reason, else the Python exception's last
    line, else the first line."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "Job aborted" in ln or "cancelled" in ln.lower():
            return ln[:500]
    for ln in reversed(lines):
        if ln.startswith(("org.apache.spark.api.python.PythonException", "Traceback")):
            continue
        if ":" in ln and not ln.startswith("at "):
            return ln[:500]
    return (lines[0] if lines else repr(exc))[:500]


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_NO_PROGRAM = re.compile(r'Cannot run program "([^"]+)"')
_OURS = ("tupletree", "zmq")  # what tupletree's own task function needs to unpickle


def executor_python_hint(text: str, python: str) -> str | None:
    """What to do when a worker's task failed because the executors' Python could not
    be started or could not import a module (``text`` is the job's error, ``python``
    the executors' Python as this session starts it), or None when that is not why.

    tupletree or pyzmq missing means the executors run a Python it was never installed
    in (a session built without ``PYSPARK_PYTHON``: Spark's default is ``python3``);
    another module is one the topology imports that the executors lack. A Python that
    is not there at all is most often an archive's (``./environment/bin/python``) whose
    archive was not shipped."""
    program = _NO_PROGRAM.search(text)
    if program is not None:
        return (
            f"the executors have no Python at {program.group(1)} (spark.pyspark.python): "
            f"ship the archive it lives in with spark-submit --archives (e.g. "
            f"--archives env.tar.gz#environment for ./environment/bin/python; "
            f"`tupletree pack` writes one and prints both options), or point "
            f"spark.pyspark.python at a Python every executor host has"
        )
    match = _NO_MODULE.search(text)
    if match is None:
        return None
    module = match.group(1)
    if module.split(".")[0] in _OURS:
        return (
            f"the executors' Python ({python}) cannot import {module}: set PYSPARK_PYTHON "
            f"before the session starts (spark-submit: --conf spark.pyspark.python=...) to "
            f"a Python that has tupletree on every executor host, or ship one with "
            f"`tupletree pack`, which prints the spark-submit options"
        )
    from tupletree.extras import EXTRAS

    top = module.split(".")[0]
    extra = next((e for e, modules in EXTRAS.items() if top in modules), None)
    if extra is not None:
        return (
            f"the executors' Python ({python}) cannot import {module}, of tupletree's "
            f"extra {extra!r}: pack it with `tupletree pack --extras {extra}` and submit "
            f"with the options it prints (or install tupletree[{extra}] there)"
        )
    return (
        f"the executors' Python ({python}) cannot import {module}, which the topology "
        f"needs: install it there, or list it in a requirements file for "
        f"`tupletree pack --requirements FILE` and submit with the options it prints"
    )
