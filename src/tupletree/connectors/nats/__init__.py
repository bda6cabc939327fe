"""NATS JetStream: JetStreamSpout (a durable pull consumer) and JetStreamSink (nats-py,
its asyncio loop on a thread of its own)."""

from tupletree.connectors.nats.sink import JetStreamSink
from tupletree.connectors.nats.spout import JetStreamSpout
from tupletree.extras import require

# The client is imported where it is used; a missing one is named here, at import.
require("nats", "nats", "tupletree.connectors.nats")

__all__ = ["JetStreamSink", "JetStreamSpout"]
