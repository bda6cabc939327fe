"""Which installed distributions Spark's executors need: the closure of some requirements
over what this Python has installed (pure: the installed set is a lookup function).

Rules:

- A requirement (``redis[hiredis]>=5.0; python_version >= "3.11"``) whose marker is
  false here is skipped; otherwise the distribution of that name must be installed and
  its version inside the specifier: a missing one or a version outside the range is an
  error naming the requirement and what asked for it, never a silent gap that executors
  would meet as an ImportError an hour later.
- A distribution's own requirements are followed with the extras asked of it (markers
  evaluated with ``extra`` set to each); a distribution reached again with more extras is
  walked again for those.
- ``exclude`` names are never entered, nor is anything reached only through them: Spark
  ships pyspark and py4j to its executors itself, and their own requirements are
  Spark's business.
- Names compare normalized (PEP 503: ``Confluent_Kafka`` is ``confluent-kafka``).

Cost: one lookup per distribution and one marker evaluation per requirement line of
each distribution visited; no bound is needed beyond what is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

SPARK_PROVIDES = frozenset({"pyspark", "py4j"})
"""What Spark puts on its executors' path itself (pyspark.zip, py4j's zip)."""


@dataclass(frozen=True)
class Installed:
    """One installed distribution as the resolver sees it: its name, version and the
    requirement lines of its metadata (``Requires-Dist``)."""

    name: str
    version: str
    requires: tuple[str, ...] = ()


@dataclass
class Resolved:
    """A distribution the executors need, with the extras asked of it and one chain
    that reached it (for messages: ``tupletree -> aiohttp -> yarl``)."""

    dist: Installed
    extras: set[str] = field(default_factory=set)
    via: str = ""


class RequirementError(ValueError):
    """A requirement that this Python cannot satisfy from what it has installed.

    ``requirement`` is the line as written, ``required_by`` what asked for it (a
    distribution, or a requirements file), ``installed`` the version found (None: not
    installed)."""

    def __init__(
        self, message: str, *, requirement: str, required_by: str, installed: str | None
    ) -> None:
        super().__init__(message)
        self.requirement = requirement
        self.required_by = required_by
        self.installed = installed

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_error, (str(self), self.requirement, self.required_by, self.installed))


def _rebuild_error(
    message: str, requirement: str, required_by: str, installed: str | None
) -> RequirementError:
    return RequirementError(
        message, requirement=requirement, required_by=required_by, installed=installed
    )


def parse(line: str, required_by: str) -> Requirement:
    """One requirement line, or a RequirementError naming it and where it came from."""
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise RequirementError(
            f"{required_by}: {line!r} is not a requirement ({exc})",
            requirement=line,
            required_by=required_by,
            installed=None,
        ) from None


def applies(req: Requirement, extras: Iterable[str], environment: dict[str, str]) -> bool:
    """True if ``req``'s marker holds here for one of ``extras`` (or with no extra)."""
    if req.marker is None:
        return True
    return any(
        req.marker.evaluate({**environment, "extra": extra}) for extra in ("", *sorted(extras))
    )


def resolve(
    roots: Iterable[tuple[str, str]],
    installed: Callable[[str], Installed | None],
    *,
    exclude: Iterable[str] = SPARK_PROVIDES,
    environment: dict[str, str] | None = None,
) -> dict[str, Resolved]:
    """The closure of ``roots`` (``(requirement line, who asked)`` pairs) over what
    ``installed(name)`` finds, as ``{normalized name: Resolved}``, without ``exclude``.

    Raises RequirementError for a requirement that applies here but is not installed or
    whose installed version is outside its specifier."""
    env = dict(environment if environment is not None else default_environment())
    skip = {canonicalize_name(n) for n in exclude}
    out: dict[str, Resolved] = {}
    todo: list[tuple[Requirement, str, str]] = [
        (parse(line, who), line, who) for line, who in roots
    ]
    while todo:
        req, line, who = todo.pop()
        if not applies(req, (), env):
            continue
        name = canonicalize_name(req.name)
        if name in skip:
            continue
        seen = out.get(name)
        if seen is None:
            dist = installed(name)
            if dist is None:
                raise RequirementError(
                    f"{who} requires {line!r}, which is not installed in this Python: "
                    f"install it here (the driver needs it too) and pack again",
                    requirement=line,
                    required_by=who,
                    installed=None,
                )
            seen = out[name] = Resolved(dist, via=who)
            # "" stands for the requirements that hold without any extra.
            walk = {"", *req.extras}
        else:
            # Reached again: only extras not walked before add anything.
            walk = set(req.extras) - seen.extras
        if req.specifier and not req.specifier.contains(seen.dist.version, prereleases=True):
            raise RequirementError(
                f"{who} requires {line!r}, but this Python has {seen.dist.name} "
                f"{seen.dist.version}: the executors would run a version it does not accept",
                requirement=line,
                required_by=who,
                installed=seen.dist.version,
            )
        if not walk:
            continue
        seen.extras |= walk - {""}
        chain = f"{who} -> {seen.dist.name}"
        for sub_line in seen.dist.requires:
            sub = parse(sub_line, seen.dist.name)
            if sub.marker is None:
                if "" in walk:
                    todo.append((sub, sub_line, chain))
                continue
            if any(sub.marker.evaluate({**env, "extra": extra}) for extra in sorted(walk)):
                todo.append((_without_marker(sub), sub_line, chain))
    return out


def _without_marker(req: Requirement) -> Requirement:
    """``req`` with its marker dropped: the resolver has evaluated it already (with the
    right extras), and ``extra`` is meaningless once the requirement leaves its owner."""
    copy = Requirement(str(req))
    copy.marker = None
    return copy


def requirement_lines(text: str, source: str) -> list[tuple[str, str]]:
    """The requirement lines of a requirements file's ``text``, as ``(line, "FILE:N")``
    pairs: comments and blank lines dropped, continuation backslashes joined. Options
    (``-e``, ``--index-url``, ``-r``...) are refused with the line: pack resolves names
    against this Python and does not read pip's options."""
    out: list[tuple[str, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if not line:
            continue
        where = f"{source}:{start}"
        if line.startswith("-"):
            raise RequirementError(
                f"{where}: {line!r} is a pip option; pack reads requirement names only "
                f"(it copies what this Python has installed): install with pip first, "
                f"then list the names",
                requirement=line,
                required_by=where,
                installed=None,
            )
        parse(line, where)
        out.append((line, where))
    return out
