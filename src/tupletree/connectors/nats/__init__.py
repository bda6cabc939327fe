"""NATS JetStream: JetStreamSpout (a durable pull consumer) and JetStreamSink (nats-py,
its asyncio loop on a thread of its own)."""

from tupletree.connectors.nats.sink import JetStreamSink
from tupletree.connectors.nats.spout import JetStreamSpout

__all__ = ["JetStreamSink", "JetStreamSpout"]
