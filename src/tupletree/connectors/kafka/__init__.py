"""Kafka: KafkaSpout (storm-kafka-client's semantics) and KafkaSink, on confluent-kafka."""

from tupletree.connectors.kafka.sink import KafkaSink
from tupletree.connectors.kafka.spout import KafkaSpout
from tupletree.extras import require

# The client is imported where it is used; a missing one is named here, at import.
require("confluent_kafka", "kafka", "tupletree.connectors.kafka")

__all__ = ["KafkaSink", "KafkaSpout"]
