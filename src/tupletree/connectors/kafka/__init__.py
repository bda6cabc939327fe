"""Kafka: KafkaSpout (storm-kafka-client's semantics) and KafkaSink, on confluent-kafka."""

from tupletree.connectors.kafka.sink import KafkaSink
from tupletree.connectors.kafka.spout import KafkaSpout

__all__ = ["KafkaSink", "KafkaSpout"]
