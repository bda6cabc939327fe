"""``tupletree pack``: an archive of the Python environment Spark's executors need.

    tupletree pack [-o env.tar.gz] [--requirements FILE] [--extras kafka,redis]
                   [--python /usr/bin/python3.11]

Spark ships an archive named in ``spark.archives`` (``--archives env.tar.gz#environment``)
to every executor and unpacks it in the executor's working directory; with
``spark.pyspark.python=./environment/bin/python`` the executors' Python workers then run
on it (PySpark's documented way to ship a Python environment). The archive is venv's
(and venv-pack's) layout: ``bin/python``, ``pyvenv.cfg``, ``lib/pythonX.Y/site-packages``.

The rules:

- Nothing is downloaded or built: the archive holds copies of what this Python has
  installed, so the executors run exactly the versions the driver runs. That is tupletree
  itself (the files this process imports: compiled or not, installed or a source
  checkout on PYTHONPATH), the closure of its runtime requirements (with ``extras``), and
  the closure of the requirements file's names (the topology's own libraries), each
  resolved by ``spark/requirements.py``: a requirement that is not installed here, or
  whose installed version is outside its range, is an error naming it.
- Not pyspark, nor py4j: Spark puts its own on the executors' path. Not console
  scripts (their ``#!`` names this machine's venv), nor files a distribution installs
  outside site-packages; not ``__pycache__`` of a source checkout (may be stale).
- The interpreter is not in the archive: ``bin/python`` is a symlink to ``python`` (by
  default this Python's base interpreter, e.g. ``/usr/bin/python3.11``), which must
  exist at that path on every executor host, the same X.Y (compiled extensions are
  built for it). This is venv-pack's assumption too: clusters built from one image meet
  it. ``--python`` names the path where executors have it when it differs from here.
- Entries are sorted, owned by 0:0 and keep their modification times (a shipped
  ``.pyc`` stays valid); the gzip header carries no timestamp: the same environment
  packs to the same bytes.

Cost: copying and compressing what is listed, about 43 MB of files into a 13 MB archive
for tupletree's own dependencies (two seconds; ``cryptography``, which seals the frames,
is 16 MB of it); the executors fetch and unpack it once per executor
(``notes/performance.md`` has the figures).
"""

from __future__ import annotations

import gzip
import importlib.metadata as metadata
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tupletree.spark.requirements import (
    Installed,
    RequirementError,
    requirement_lines,
    resolve,
)

DEFAULT_OUTPUT = "env.tar.gz"
ARCHIVE_NAME = "environment"
"""The directory Spark unpacks the archive into (the ``#fragment`` of ``--archives``)."""
COMPRESS_LEVEL = 6  # gzip's default: 9 is twice as slow for 2 % less here


class PackError(ValueError):
    """The archive cannot be made as asked; the message says what and how to fix it."""


@dataclass(frozen=True)
class Packed:
    """What ``pack`` wrote: the archive, its size, the distributions in it (name,
    version), the interpreter ``bin/python`` points at, and how long packing took."""

    path: Path
    size: int
    distributions: list[tuple[str, str]]
    python: str
    seconds: float


# ---------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _Source:
    """One distribution to copy: its files as (path on disk, or the content of a file
    made here; path in site-packages)."""

    name: str
    version: str
    files: list[tuple[Path | bytes, str]]


def _installed(name: str) -> Installed | None:
    """The resolver's lookup: an installed distribution's name, version, requirements."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return Installed(dist.metadata["Name"], dist.version, tuple(dist.requires or ()))


def _editable_location(dist: metadata.Distribution) -> str | None:
    """Where an editable (``pip install -e``) install's code lives, or None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if info.get("dir_info", {}).get("editable"):
        return str(info.get("url", "?")).removeprefix("file://")
    return None


def _record_files(dist: metadata.Distribution) -> list[tuple[Path | bytes, str]]:
    """A distribution's files inside site-packages, from its RECORD."""
    name = dist.metadata["Name"]
    editable = _editable_location(dist)
    if editable is not None:
        raise PackError(
            f"{name} is installed in editable mode (pip install -e): its code lives in "
            f"{editable}, which executors do not have; install it without -e, or ship it "
            f"another way (spark.submit.pyFiles)"
        )
    if dist.files is None:
        raise PackError(
            f"{name} {dist.version} was installed without a RECORD: pack cannot tell "
            f"which files are its; reinstall it with pip"
        )
    out: list[tuple[Path | bytes, str]] = []
    for item in dist.files:
        parts = item.parts
        if not parts or parts[0] == ".." or Path(item).is_absolute():
            continue  # console scripts, data files: outside site-packages
        path = Path(dist.locate_file(item))
        if path.is_file():
            out.append((path, item.as_posix()))
    return out


def _tupletree() -> tuple[_Source, Installed, set[str]]:
    """tupletree as this process imports it (its files, its requirements, its extras):
    the installed distribution when that is what is imported, else the source checkout
    (a minimal dist-info is written for it)."""
    import tupletree

    package = Path(tupletree.__file__).resolve().parent
    try:
        dist = metadata.distribution("tupletree")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None and _editable_location(dist) is None:
        init = Path(dist.locate_file("tupletree/__init__.py")).resolve()
        files = _record_files(dist)
        # A distribution that lists none of the package's files (an egg-info left in a
        # source tree by an old editable install) would ship no tupletree at all.
        if init == package / "__init__.py" and any(
            name.startswith("tupletree/") for _, name in files
        ):
            source = _Source("tupletree", dist.version, files)
            installed = Installed("tupletree", dist.version, tuple(dist.requires or ()))
            return source, installed, set(dist.metadata.get_all("Provides-Extra") or [])
    return _tupletree_checkout(package)


def _tupletree_checkout(package: Path) -> tuple[_Source, Installed, set[str]]:
    """tupletree from a source tree (``src/tupletree`` beside ``pyproject.toml``)."""
    pyproject = package.parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise PackError(
            f"tupletree is imported from {package}, which is neither an installed "
            f"distribution nor a source tree with its pyproject.toml ({exc})"
        ) from None
    requires = list(project.get("dependencies", []))
    for extra, lines in project.get("optional-dependencies", {}).items():
        requires += [_with_extra(line, extra) for line in lines]
    version = str(project.get("version", "0"))
    files: list[tuple[Path | bytes, str]] = [
        (path, f"tupletree/{path.relative_to(package).as_posix()}")
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    info = f"tupletree-{version}.dist-info"
    meta = "Metadata-Version: 2.1\nName: tupletree\nVersion: " + version + "\n"
    meta += "".join(f"Provides-Extra: {e}\n" for e in project.get("optional-dependencies", {}))
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    return (
        _Source("tupletree", version, [*files, (meta.encode(), f"{info}/METADATA")]),
        Installed("tupletree", version, tuple(requires)),
        set(project.get("optional-dependencies", {})),
    )


def _with_extra(line: str, extra: str) -> str:
    """A pyproject optional-dependency line as Requires-Dist writes it: its marker,
    if any, and ``extra == "..."``."""
    req = Requirement(line)
    marker = f'extra == "{extra}"'
    if req.marker is not None:
        marker = f"({req.marker}) and {marker}"
    req.marker = None
    return f"{req}; {marker}"


# ---------------------------------------------------------------------------- packing


def base_python() -> str:
    """This Python's base interpreter (outside any venv): what ``bin/python`` points at."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def pack(
    output: str | os.PathLike[str] = DEFAULT_OUTPUT,
    *,
    requirements: str | os.PathLike[str] | None = None,
    extras: Iterable[str] = (),
    python: str | None = None,
) -> Packed:
    """Write the executors' archive to ``output`` (see the module's rules)."""
    started = time.monotonic()
    out = check_output(output)
    if python is not None:
        check_python(python)
    tupletree_source, tupletree_dist, known = _tupletree()
    extras = sorted({e.strip() for e in extras if e.strip()})
    unknown = [e for e in extras if e not in known]
    if unknown:
        raise PackError(
            f"tupletree has no extra {', '.join(unknown)}; its extras: "
            f"{', '.join(sorted(known)) or 'none'}"
        )
    root = "tupletree" + (f"[{','.join(extras)}]" if extras else "")
    roots = [(root, "tupletree pack")]
    if requirements is not None:
        file = Path(requirements)
        try:
            text = file.read_text()
        except OSError as exc:
            raise PackError(f"cannot read the requirements file {file}: {exc}") from None
        try:
            roots += requirement_lines(text, str(file))
        except RequirementError as exc:
            raise PackError(str(exc)) from None

    def lookup(name: str) -> Installed | None:
        if name == "tupletree":
            return tupletree_dist
        return _installed(name)

    try:
        closure = resolve(roots, lookup)
    except RequirementError as exc:
        raise PackError(str(exc)) from None
    sources = [tupletree_source]
    for name, resolved in sorted(closure.items()):
        if name == "tupletree":
            continue
        dist = metadata.distribution(name)
        sources.append(_Source(resolved.dist.name, resolved.dist.version, _record_files(dist)))
    interpreter = python or base_python()
    _write(out, sources, interpreter)
    return Packed(
        path=out,
        size=out.stat().st_size,
        distributions=[(s.name, s.version) for s in sources],
        python=interpreter,
        seconds=time.monotonic() - started,
    )


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
"""Spark unpacks an archive by its name's suffix: a gzip tar must end in one of these."""


def check_output(output: str | os.PathLike[str]) -> Path:
    """``output`` as a path to write the archive to, or PackError naming what is wrong
    with it, before anything is packed: not a directory, in a directory that exists,
    named with a suffix Spark unpacks as a gzip tar (a name Spark would take for a zip,
    or none at all, would ship an archive no executor can open; the suffix also keeps
    ``-o notes.txt`` from overwriting a file of another kind)."""
    out = Path(output)
    if not str(output).strip():
        raise PackError(f"-o wants a file name ending in .tar.gz, got {str(output)!r}")
    if out.is_dir() or not out.name:
        raise PackError(f"-o {out} is a directory: name the archive (e.g. {out / DEFAULT_OUTPUT})")
    if not out.name.endswith(ARCHIVE_SUFFIXES):
        stem = out.name.split(".")[0] or "env"
        raise PackError(
            f"-o {out}: the archive is a gzip tar, and Spark unpacks archives by their "
            f"suffix: name it {stem}.tar.gz or {stem}.tgz"
        )
    odd = sorted({c for c in str(output) if c in _URI_BREAKERS or c.isspace()})
    if odd:
        which = " or ".join("a space" if c.isspace() else repr(c) for c in odd)
        raise PackError(
            f"-o {str(output)!r}: Spark would misread a path with {which} in --archives "
            f"(a comma-separated list of URIs, '#' naming the directory it unpacks into): "
            f"choose a path without"
        )
    if not out.parent.is_dir():
        raise PackError(f"-o {out}: there is no directory {out.parent}")
    probe = out.with_name(f".{out.name}.probe-{os.getpid()}")
    try:  # a file can be made there (a read-only or special file system: refused now)
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        probe.unlink()
    except OSError as exc:
        raise PackError(
            f"-o {out}: cannot write in the directory {out.parent}: {exc.strerror or exc}"
        ) from None
    return out


_URI_BREAKERS = ",#?"
"""Characters of an archive's path that ``--archives`` would not take as part of it."""

_VERSIONED_NAME = re.compile(r"python(\d+)\.(\d+)$")
PYTHON_CHECK_TIMEOUT_SECS = 10.0


def check_python(python: str) -> None:
    """``--python``: the absolute path of an interpreter of this Python's X.Y, or
    PackError naming it. The archive's site-packages is ``lib/pythonX.Y`` and its
    compiled extensions are built for X.Y: an interpreter of another X.Y would start
    on the executors and fail there (PySpark's PYTHON_VERSION_MISMATCH, or a module
    not found). Its name says its X.Y (``python3.12``), or, when it is on this machine,
    it is asked; a path only the executor hosts have, named ``python3``, is taken."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not os.path.isabs(python):
        raise PackError(
            f"--python wants the absolute path of the executors' Python, got {python!r}"
        )
    named = _VERSIONED_NAME.search(os.path.basename(python))
    if named is not None and f"{named.group(1)}.{named.group(2)}" != here:
        raise PackError(
            f"--python {python} is Python {named.group(1)}.{named.group(2)}, but the "
            f"archive is for Python {here} (this Python's packages, its lib/python{here}): "
            f"name a Python {here} the executors have, or pack from a Python "
            f"{named.group(1)}.{named.group(2)} environment"
        )
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return  # only the executor hosts have it: its name is all there is to check
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=PYTHON_CHECK_TIMEOUT_SECS,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackError(f"--python {python} does not run as a Python here: {exc}") from None
    version = done.stdout.strip()
    if done.returncode != 0 or not re.fullmatch(r"\d+\.\d+", version):
        raise PackError(
            f"--python {python} does not run as a Python here (exit {done.returncode}): "
            f"{done.stderr.strip()[-300:]}"
        )
    if version != here:
        raise PackError(
            f"--python {python} is Python {version}, but the archive is for Python "
            f"{here} (this Python's packages, its lib/python{here}): name a Python {here} "
            f"the executors have, or pack from a Python {version} environment"
        )


def _layout(sources: list[_Source], interpreter: str) -> Iterator[tuple[str, Path | bytes]]:
    """(path in the archive, file on disk or content) for every regular file."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = f"lib/python{version}/site-packages"
    cfg = (
        f"home = {os.path.dirname(interpreter)}\n"
        "include-system-site-packages = false\n"
        f"version = {'.'.join(map(str, sys.version_info[:3]))}\n"
        f"executable = {interpreter}\n"
    )
    yield "pyvenv.cfg", cfg.encode()
    seen: set[str] = set()
    for source in sources:
        for what, rel in source.files:
            arcname = f"{site}/{rel}"
            if arcname in seen:
                continue  # two distributions own one file (a namespace __init__)
            seen.add(arcname)
            yield arcname, what


def _write(out: Path, sources: list[_Source], interpreter: str) -> None:
    """The archive, written beside ``out`` and renamed over it when complete (an
    existing file of that name is replaced only then); PackError when it cannot be."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        with (
            partial.open("wb") as raw,
            # No name nor time in the gzip header: the same files, the same bytes.
            gzip.GzipFile(
                filename="", fileobj=raw, mode="wb", compresslevel=COMPRESS_LEVEL, mtime=0
            ) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            site = f"lib/python{version}/site-packages"
            for name in ("bin", "lib", f"lib/python{version}", site):
                tar.addfile(_info(name, tarfile.DIRTYPE, 0o755))
            links = {
                "bin/python": interpreter,
                "bin/python3": "python",
                f"bin/python{version}": "python",
            }
            for name, target in links.items():
                info = _info(name, tarfile.SYMTYPE, 0o777)
                info.linkname = target
                tar.addfile(info)
            for arcname, what in sorted(_layout(sources, interpreter), key=lambda e: e[0]):
                if isinstance(what, bytes):
                    info = _info(arcname, tarfile.REGTYPE, 0o644)
                    info.size = len(what)
                    tar.addfile(info, io.BytesIO(what))
                    continue
                stat = what.stat()
                info = _info(arcname, tarfile.REGTYPE, 0o755 if stat.st_mode & 0o111 else 0o644)
                info.size = stat.st_size
                info.mtime = int(stat.st_mtime)
                with what.open("rb") as f:
                    tar.addfile(info, f)
        partial.replace(out)
    except OSError as exc:  # a full disk, a file of a distribution that cannot be read
        what = "" if exc.filename in (None, str(partial), str(out)) else f" ({exc.filename})"
        raise PackError(
            f"-o {out}: cannot write the archive: {exc.strerror or exc}{what}"
        ) from None
    finally:
        partial.unlink(missing_ok=True)


def _info(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


# ---------------------------------------------------------------------------- options


def submit_options(archive: str | os.PathLike[str], name: str = ARCHIVE_NAME) -> list[str]:
    """The ``spark-submit`` options that ship ``archive`` and run executors on it."""
    return [
        "--archives",
        f"{archive}#{name}",
        "--conf",
        f"spark.pyspark.python=./{name}/bin/python",
    ]


def driver_options(driver_python: str | None = None) -> list[str]:
    """What client mode (the driver runs where spark-submit does) adds: the driver's own
    Python, which spark-submit would otherwise take from ``spark.pyspark.python``
    (a path that exists only inside the executors' working directories)."""
    return ["--conf", f"spark.pyspark.driver.python={driver_python or sys.executable}"]


def _shell_join(words: list[str]) -> str:
    """``words`` as a shell reads them back (a path with a quote or ``$`` is quoted);
    ``#`` inside a word, not a comment there, stays as it is."""
    return " ".join(w if re.fullmatch(r"[\w@%+=:,./#-]+", w) else shlex.quote(w) for w in words)


def describe(packed: Packed) -> str:
    """What ``tupletree pack`` prints: what was written and the options that ship it."""
    others = [f"{n} {v}" for n, v in packed.distributions if canonicalize_name(n) != "tupletree"]
    tupletree_version = next(
        (v for n, v in packed.distributions if canonicalize_name(n) == "tupletree"), "?"
    )
    options = _shell_join(submit_options(packed.path))
    return "\n".join(
        [
            f"tupletree: wrote {packed.path} ({packed.size / 2**20:.1f} MB) in "
            f"{packed.seconds:.1f} s: tupletree {tupletree_version} and {len(others)} "
            f"distributions ({', '.join(others) or 'none'}); not pyspark (Spark ships it)",
            f"tupletree: executors need Python {sys.version_info.major}."
            f"{sys.version_info.minor} at {packed.python} (bin/python points there)"
            + ("" if os.path.exists(packed.python) else "; it is not on this machine"),
            "spark-submit options that ship it:",
            f"  {options}",
            "and in client mode (the driver runs here, e.g. on a standalone master):",
            f"  {_shell_join(driver_options())}",
        ]
    )
