"""Distributed RPC over topologies (Storm's DRPC and LinearDRPCTopologyBuilder).

    from tupletree.drpc import LinearDRPCTopologyBuilder, LocalDRPC, DRPCClient, FinishedCallback

    builder = LinearDRPCTopologyBuilder("exclamation")
    builder.add_bolt(ExclaimBolt(), parallelism=3)
    drpc = LocalDRPC()
    cluster.submit_topology("drpc", conf, builder.create_local_topology(drpc))
    drpc.execute("exclamation", "aaa")                      # in-process

    with DRPCServer(port=3774):                             # over HTTP, any cluster
        cluster.submit_topology("drpc", conf, builder.create_remote_topology())
        DRPCClient("127.0.0.1", 3774).execute("exclamation", "aaa")

Modules: builder (LinearDRPCTopologyBuilder), coordinated_bolt (CoordinatedBolt,
FinishedCallback), bolts (PrepareRequest, JoinResult, ReturnResults), spout (DRPCSpout),
pending (the server's request book), local_drpc (LocalDRPC), server (DRPCServer over
HTTP), client (DRPCClient, cli_main), invocations (the topology's side of the HTTP API).
"""

from tupletree.drpc.bolts import JoinResult, PrepareRequest, ReturnResults
from tupletree.drpc.builder import LinearDRPCInputDeclarer, LinearDRPCTopologyBuilder
from tupletree.drpc.client import DRPCClient, cli_main
from tupletree.drpc.coordinated_bolt import (
    CoordinatedBolt,
    FinishedCallback,
    TimeoutCallback,
)
from tupletree.drpc.errors import (
    DRPCBusyError,
    DRPCConnectionError,
    DRPCExecutionError,
    DRPCTimeoutError,
    DRPCUnknownFunctionError,
)
from tupletree.drpc.local_drpc import LocalDRPC
from tupletree.drpc.server import DRPCServer, serve_main
from tupletree.drpc.spout import DRPCSpout

__all__ = [
    "CoordinatedBolt",
    "DRPCBusyError",
    "DRPCClient",
    "DRPCConnectionError",
    "DRPCExecutionError",
    "DRPCServer",
    "DRPCSpout",
    "DRPCTimeoutError",
    "DRPCUnknownFunctionError",
    "FinishedCallback",
    "JoinResult",
    "LinearDRPCInputDeclarer",
    "LinearDRPCTopologyBuilder",
    "LocalDRPC",
    "PrepareRequest",
    "ReturnResults",
    "TimeoutCallback",
    "cli_main",
    "serve_main",
]
