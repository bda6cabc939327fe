"""Spouts and sinks for real systems, whose per-message ack/nack fits Storm's model."""
