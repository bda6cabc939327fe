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


_VERSION_MISMATCH = re.compile(
    r"Python in worker has different version:? ([\d.]+) than that in driver:? ([\d.]+)"
)


def _archive_dirs(archives: str) -> dict[str, str]:
    """``spark.archives`` (comma-separated ``path#name``) as {directory name: path}."""
    out: dict[str, str] = {}
    for entry in archives.split(","):
        entry = entry.strip()
        if not entry:
            continue
        path, _, fragment = entry.partition("#")
        name = fragment or path.rstrip("/").rsplit("/", 1)[-1]
        out[name] = path
    return out


def executor_python_hint(text: str, python: str, archives: str | None = None) -> str | None:
    """What to do when a worker's task failed because the executors' Python could not
    be started or could not import a module (``text`` is the job's error, ``python``
    the executors' Python as this session starts it, ``archives`` the session's
    ``spark.archives``: "" when none, None when not known), or None when that is not why.

    tupletree or pyzmq missing means the executors run a Python it was never installed
    in (a session built without ``PYSPARK_PYTHON``: Spark's default is ``python3``);
    another module is one the topology imports that the executors lack. A Python that
    is not there at all is an archive's (``./environment/bin/python``) whose archive was
    not shipped (or under another name), or, when it was, whose ``bin/python`` links to
    an interpreter the executor host does not have (``tupletree pack --python``). A
    Python of another X.Y than the driver's is PySpark's PYTHON_VERSION_MISMATCH: with
    an archive, its ``bin/python`` links to an interpreter of another version."""
    program = _NO_PROGRAM.search(text)
    if program is not None:
        return _no_program_hint(program.group(1), archives)
    mismatch = _VERSION_MISMATCH.search(text)
    if mismatch is not None:
        worker, driver = mismatch.group(1), mismatch.group(2)
        return (
            f"the executors' Python ({python}) is Python {worker} and the driver's "
            f"{driver}: PySpark needs the same X.Y on both. An archive of `tupletree pack` "
            f"is for the X.Y it was packed with and its bin/python links to the "
            f"interpreter pack named (pack --python; pack prints it): pack again with "
            f"--python naming a Python {driver} that every executor host has, or run the "
            f"driver (and pack) on Python {worker}"
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


def _no_program_hint(program: str, archives: str | None) -> str:
    """The hint for "Cannot run program PROGRAM": the executors' Python is not there."""
    parts = program.split("/")
    in_archive = len(parts) >= 3 and parts[0] == "." and parts[-2] == "bin"
    shipped = _archive_dirs(archives) if archives else {}
    if in_archive and parts[1] in shipped:
        return (
            f"the executors could not start {program} (spark.pyspark.python), though "
            f"the archive {shipped[parts[1]]} is shipped as {parts[1]!r}: its bin/python "
            f"is a symlink to an interpreter outside the archive (the one `tupletree pack` "
            f"named: its --python, by default the packing Python's), which the executor "
            f"hosts do not have at that path: install that Python there, or pack again "
            f"with --python naming where the executor hosts have the same X.Y"
        )
    if in_archive and shipped:
        names = ", ".join(f"{path} as {name!r}" for name, path in shipped.items())
        return (
            f"the executors have no Python at {program} (spark.pyspark.python): "
            f"spark.archives ships {names}, none as {parts[1]!r}: ship the archive as "
            f"--archives env.tar.gz#{parts[1]}, or point spark.pyspark.python at "
            f"./NAME/bin/python of the name it is shipped as"
        )
    if in_archive and archives is None:
        return (
            f"the executors have no Python at {program} (spark.pyspark.python): ship the "
            f"archive it lives in with spark-submit --archives (e.g. --archives "
            f"env.tar.gz#{parts[1]}; `tupletree pack` writes one and prints both "
            f"options); if it is shipped, its bin/python links to an interpreter the "
            f"executor hosts lack (pack --python names it)"
        )
    return (
        f"the executors have no Python at {program} (spark.pyspark.python): ship the "
        f"archive it lives in with spark-submit --archives (e.g. "
        f"--archives env.tar.gz#environment for ./environment/bin/python; "
        f"`tupletree pack` writes one and prints both options), or point "
        f"spark.pyspark.python at a Python every executor host has"
    )
