"""What the launcher reads from a Spark session's settings: that speculation is off,
where the driver's control socket binds and which host name workers dial, and whether
Spark keeps finished Python workers for reuse. Each is read when a launch needs it, so
a session configured later than tupletree was imported is read as it is.
"""

from __future__ import annotations

import socket
from typing import Any

from tupletree.spark.errors import SparkLaunchError
from tupletree.spark.slots import is_local_master


def check_no_speculation(sc: Any) -> None:
    """Refuse a session with ``spark.speculation`` on: Spark would start duplicate
    copies of the long-running worker tasks (and kill one when the other finishes)."""
    if (sc.getConf().get("spark.speculation") or "false").lower() == "true":
        raise SparkLaunchError(
            "spark.speculation is on: Spark would start duplicate copies of the "
            "long-running worker tasks (and kill one when the other finishes); "
            "turn it off for a session that runs tupletree topologies"
        )


def control_hosts(sc: Any, bind_host: str | None) -> tuple[str, str]:
    """(IP to bind the control socket on, host name workers connect to): ``bind_host``
    if given; loopback on a local master; else Spark's own driver host and address."""
    if bind_host:
        return socket.gethostbyname(bind_host), bind_host
    if is_local_master(sc.master):
        return "127.0.0.1", "127.0.0.1"
    conf = sc.getConf()
    advertised = conf.get("spark.driver.host") or socket.gethostname()
    bind = conf.get("spark.driver.bindAddress") or advertised
    return socket.gethostbyname(bind), advertised


def reuses_python_workers(sc: Any) -> bool:
    """``spark.python.worker.reuse`` (Spark's default: on): a worker whose task ended
    stays alive as an idle pooled Python process, by design."""
    return (sc.getConf().get("spark.python.worker.reuse") or "true").lower() == "true"
