"""Which stores a cluster may use: a store only one host can see (memory, SQLite) is
refused on a master whose workers run on several hosts, with the reason.

One host: tupletree's ``LocalCluster`` (master ``"local"``) and Spark's local masters,
``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local[*,F]`` (the executor is
this process's JVM) and ``local-cluster[N,C,M]`` (Spark's test mode: N executor JVMs,
but launched by a master and workers that Spark itself starts on this machine; they can
be nowhere else). Every other master (``spark://``, ``yarn``, ``k8s://``, ``mesos://``,
anything unknown) may place workers on several hosts: even a master on 127.0.0.1 may
have workers that registered from elsewhere, and the driver cannot tell where its next
executor will be, so only the shapes above count as one host. Pure functions.
"""

from __future__ import annotations

import re

# kind -> whether workers on other hosts see the same data (each class's
# ``shared_across_hosts``; a test keeps the two the same). Known without opening one.
SHARED_ACROSS_HOSTS = {"memory": False, "sqlite": False, "redis": True, "postgresql": True}

_WHY_NOT = {
    "memory": "the memory store lives in one process on one host",
    "sqlite": "SQLite is a file on one host",
}

_ONE_HOST = re.compile(
    r"local|local\[(?:\*|[1-9]\d*)(?:,\s*[1-9]\d*)?\]"
    r"|local-cluster\[\s*[1-9]\d*\s*,\s*[1-9]\d*\s*,\s*[1-9]\d*\s*\]"
)


def is_one_host(master: str) -> bool:
    """True for the masters whose workers all run on this machine (module docstring)."""
    return bool(_ONE_HOST.fullmatch(master.strip()))


def require_shared(kind: str, master: str, *, what: str = "store") -> None:
    """Refuse (ValueError naming ``what``, the store and the master) a store that only one
    host can see when ``master`` may run workers on several; nothing otherwise.
    ``what`` names the setting the kind came from (``'topology.state.provider'``)."""
    if kind not in SHARED_ACROSS_HOSTS:
        raise ValueError(
            f"{what}: unknown store {kind!r}; choose one of {sorted(SHARED_ACROSS_HOSTS)}"
        )
    if SHARED_ACROSS_HOSTS[kind] or is_one_host(master):
        return
    shared = [k for k, v in SHARED_ACROSS_HOSTS.items() if v]
    raise ValueError(
        f"{what}: {_WHY_NOT[kind]}; the master {master!r} runs workers on several: "
        f"use {' or '.join(shared)}"
    )
