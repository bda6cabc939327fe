"""Kafka: KafkaSpout (storm-kafka-client's semantics), KafkaSink, and Trident's
exactly-once output (TridentKafkaStateFactory), on confluent-kafka."""

from tupletree.connectors.kafka.sink import KafkaSink
from tupletree.connectors.kafka.spout import KafkaSpout
from tupletree.connectors.kafka.trident_state import (
    TridentKafkaStateFactory,
    TridentKafkaStateUpdater,
)
from tupletree.extras import require

# The client is imported where it is used; a missing one is named here, at import.
require("confluent_kafka", "kafka", "tupletree.connectors.kafka")

__all__ = ["KafkaSink", "KafkaSpout", "TridentKafkaStateFactory", "TridentKafkaStateUpdater"]
