"""The services a cluster may start beside its workers (the DRPC server, the web view),
wired into ``cluster.ClusterBase`` from above.

Why here: the clusters (``local.py``, ``spark/``) sit below the services in the layers
(ARCHITECTURE.md), yet ``LocalCluster(drpc_port=..., ui_port=...)`` starts them. So the
clusters know services only as ``cluster.SERVICES`` factories, and this module, at the
services' own layer, fills that table in; the package's ``__init__`` imports it, so
every program that uses tupletree has it. The factories import their service lazily:
``import tupletree`` stays light.
"""

from __future__ import annotations

from typing import Any

from tupletree import cluster


def _drpc(host: str, port: int, conf: dict[str, Any] | None) -> Any:
    from tupletree.drpc.hosting import ClusterDRPC

    return ClusterDRPC(host, port, conf)


def _ui(owner: Any, host: str, port: int) -> Any:
    from tupletree.ui.service import UIService

    return UIService(owner, host, port).start()


cluster.SERVICES.update({"drpc": _drpc, "ui": _ui})
