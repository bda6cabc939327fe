"""spark/requirements.py: the closure of requirements over installed distributions,
with plain values (no metadata, no file system)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tupletree.spark.requirements import (
    Installed,
    RequirementError,
    requirement_lines,
    resolve,
)

ENV = {
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "sys_platform": "linux",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
    "platform_release": "",
    "platform_version": "",
    "implementation_version": "3.11.7",
}


def lookup(*dists: Installed):
    table = {d.name.lower().replace("_", "-"): d for d in dists}
    return table.get


def names(closure) -> set[str]:
    return set(closure)


def test_follows_requirements_and_the_extras_asked_for():
    """``redis[hiredis]`` brings hiredis; a requirement of an extra nobody asked for, or
    whose marker is false here, does not come."""
    installed = lookup(
        Installed("tupletree", "0.1", ("redis[hiredis]>=5", 'pytest; extra == "dev"')),
        Installed("redis", "8.1", ('hiredis>=3; extra == "hiredis"', 'xxhash; extra == "x"')),
        Installed("hiredis", "3.5"),
        Installed("pytest", "8"),
        Installed("xxhash", "3"),
    )
    closure = resolve([("tupletree", "pack")], installed, environment=ENV)
    assert names(closure) == {"tupletree", "redis", "hiredis"}
    assert closure["redis"].extras == {"hiredis"}
    assert closure["hiredis"].via == "pack -> tupletree -> redis"


def test_an_extra_asked_later_walks_the_distribution_again():
    """A distribution reached first without an extra and then with it gets the extra's
    requirements too."""
    installed = lookup(
        Installed("app", "1", ("other", "lib")),  # lib is reached first without [fast]
        Installed("other", "1", ("lib[fast]",)),
        Installed("lib", "1", ('speedup; extra == "fast"',)),
        Installed("speedup", "1"),
    )
    closure = resolve([("app", "file:1")], installed, environment=ENV)
    assert names(closure) == {"app", "lib", "other", "speedup"}


def test_markers_are_evaluated_for_this_python():
    """``async-timeout; python_version < "3.11"`` is not needed on 3.11."""
    installed = lookup(
        Installed("aiohttp", "3", ('async-timeout<6; python_version < "3.11"', "yarl")),
        Installed("yarl", "1"),
    )
    closure = resolve([("aiohttp", "x")], installed, environment=ENV)
    assert names(closure) == {"aiohttp", "yarl"}


def test_spark_s_own_packages_are_left_out_with_what_only_they_need():
    """pyspark and py4j are Spark's to ship; nothing is entered through them."""
    installed = lookup(
        Installed("tupletree", "0.1", ("pyspark>=4", "pyzmq")),
        Installed("pyspark", "4.3", ("py4j==0.10.9.9", "pandas")),
        Installed("py4j", "0.10.9.9"),
        Installed("pandas", "2"),
        Installed("pyzmq", "27"),
    )
    closure = resolve([("tupletree", "pack")], installed, environment=ENV)
    assert names(closure) == {"tupletree", "pyzmq"}


def test_names_compare_normalized():
    """``Typing_Extensions`` is ``typing-extensions``."""
    installed = lookup(Installed("typing-extensions", "4.16"))
    closure = resolve([("Typing_Extensions>=4", "r.txt:1")], installed, environment=ENV)
    assert names(closure) == {"typing-extensions"}


def test_a_missing_requirement_names_itself_and_who_asked():
    installed = lookup(Installed("app", "1", ("numpy>=2",)))
    with pytest.raises(RequirementError, match=r"app requires 'numpy>=2', which is not") as info:
        resolve([("app", "requirements.txt:3")], installed, environment=ENV)
    assert info.value.requirement == "numpy>=2"
    assert info.value.required_by == "requirements.txt:3 -> app"
    assert info.value.installed is None
    copy = pickle.loads(pickle.dumps(info.value))
    assert (copy.requirement, copy.required_by, str(copy)) == (
        "numpy>=2",
        "requirements.txt:3 -> app",
        str(info.value),
    )


def test_a_version_outside_the_range_is_refused_with_both():
    installed = lookup(Installed("pyzmq", "27.3.0"))
    with pytest.raises(RequirementError, match=r"'pyzmq<26'.*pyzmq 27.3.0") as info:
        resolve([("pyzmq<26", "requirements.txt:1")], installed, environment=ENV)
    assert info.value.installed == "27.3.0"


def test_requirements_file_lines():
    """Comments, blank lines and continuations are read; pip options are refused with
    their line."""
    text = "# mine\nnumpy>=2  # arrays\n\nrequests \\\n  >=2.31\n"
    assert requirement_lines(text, "r.txt") == [
        ("numpy>=2", "r.txt:2"),
        ("requests >=2.31", "r.txt:4"),
    ]
    with pytest.raises(RequirementError, match=r"r.txt:2: '-e \./mylib' is a pip option"):
        requirement_lines("numpy\n-e ./mylib\n", "r.txt")
    with pytest.raises(RequirementError, match=r"r.txt:1: 'numpy>>2' is not a requirement"):
        requirement_lines("numpy>>2\n", "r.txt")


# -- property: the closure is closed, and holds nothing it need not ---------------------

NAMES = [f"d{i}" for i in range(8)]
EXTRAS = ["a", "b"]


@st.composite
def worlds(draw):
    """Random installed sets: each distribution requires some others, some only under
    an extra of its own; some names are not installed (only reachable ones matter)."""
    installed = {}
    for name in NAMES:
        if draw(st.booleans()) and name != "d0":
            continue  # not installed
        reqs = []
        for other in draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True)):
            extra = draw(st.sampled_from([None, *EXTRAS]))
            asked = draw(st.lists(st.sampled_from(EXTRAS), max_size=2, unique=True))
            line = other + (f"[{','.join(asked)}]" if asked else "")
            if extra is not None:
                line += f'; extra == "{extra}"'
            reqs.append(line)
        installed[name] = Installed(name, "1.0", tuple(reqs))
    return installed


def _needed(installed: dict[str, Installed]) -> tuple[set[str], bool]:
    """A slow, obviously right reference: fixpoint over (name, extra) pairs."""
    active = {("d0", "")}
    changed = True
    while changed:
        changed = False
        for name, extra in list(active):
            dist = installed.get(name)
            if dist is None:
                continue
            for line in dist.requires:
                target, _, marker = line.partition(";")
                needs = marker.split('"')[1] if marker else ""
                if needs != extra and needs != "":
                    continue
                if needs == "" and extra != "":
                    continue  # walked with extra ""
                base, _, rest = target.partition("[")
                for e in ["", *[x for x in rest.rstrip("]").split(",") if x]]:
                    if (base, e) not in active:
                        active.add((base, e))
                        changed = True
    reached = {n for n, _ in active}
    return reached, all(n in installed for n in reached)


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_closure_matches_a_reference_fixpoint(installed):
    """Whatever the graph (cycles, extras asking for extras), the resolver returns
    exactly the distributions a fixpoint over (name, extra) reaches, or refuses when one
    of them is not installed."""
    reached, complete = _needed(installed)
    if not complete:
        with pytest.raises(RequirementError, match="not installed"):
            resolve([("d0", "root")], installed.get, environment=ENV, exclude=())
        return
    closure = resolve([("d0", "root")], installed.get, environment=ENV, exclude=())
    assert set(closure) == reached
