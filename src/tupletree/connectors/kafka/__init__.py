"""Kafka: KafkaSpout (storm-kafka-client's semantics) and KafkaSink (confluent-kafka)."""
