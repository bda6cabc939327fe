"""Spouts and sinks for real systems, whose per-message ack/nack fits Storm's model.

The common machinery: ``RetryPolicy`` (retry.py), ``BrokerSpout`` and ``Delivery``
(spout.py), ``BrokerSink`` (sink.py), ``ConnectorError`` (errors.py). Each broker has a
module of its own (``tupletree.connectors.redis``, ``.rabbitmq``, ...), imported on
demand so that a broker's client library is needed only by those who use it.
"""

from tupletree.connectors.errors import ConnectorError
from tupletree.connectors.retry import RetryPolicy
from tupletree.connectors.sink import BrokerSink
from tupletree.connectors.spout import BrokerSpout, Delivery, connector_totals

__all__ = [
    "BrokerSink",
    "BrokerSpout",
    "ConnectorError",
    "Delivery",
    "RetryPolicy",
    "connector_totals",
]
