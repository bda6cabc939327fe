"""Where a topology's state lives: ``topology.state.provider`` (Storm's key) names a
``tupletree.store`` backend, ``topology.state.provider.config`` its config:

===============  ============================================  =========================
provider         config                                        survives
===============  ============================================  =========================
``memory``       ``{}``: private to the task (Storm's default)  nothing: lost with the task
                 ``{"name": n}``: shared by name in the process a topology killed and
                                                               submitted again in this
                                                               process (LocalCluster)
``sqlite``       ``{"path": "state.db"}``                      a worker's death, on one
                                                               host
``redis``        ``{"url": "redis://127.0.0.1:6379/0"}``       a worker's death, any host
``postgresql``   ``{"dsn": "postgresql://..."}``               a worker's death, any host
===============  ============================================  =========================

Every task opens its own connection (a Store is not shared between threads). State is
per task: namespace ``<component>-<task index>``. Storm names it by the global task id;
the index is the same thing while a component's task count stays fixed (it does, across
a rebalance), and unlike the global id it does not move when another component's task
count changes. The checkpoint spout's own namespace is ``$checkpointspout-<index>``.
Two different stateful topologies need distinct stores (a prefix, or a memory store's
name): distinct component ids are not enough, since both have a ``$checkpointspout``
and its progress is one per store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tupletree.config import Config
from tupletree.store import Store, open_store


def state_namespace(component: str, task_index: int) -> str:
    """The namespace of one task's state: ``<component>-<task index>``."""
    return f"{component}-{task_index}"


def open_state_store(conf: Mapping[str, Any]) -> Store:
    """Open the store ``conf`` names (``topology.state.provider`` and its config);
    ValueError naming the key for an unknown provider or config key."""
    kind = conf.get(Config.TOPOLOGY_STATE_PROVIDER) or "memory"
    config = conf.get(Config.TOPOLOGY_STATE_PROVIDER_CONFIG) or {}
    return open_store(kind, config, what=Config.TOPOLOGY_STATE_PROVIDER)
