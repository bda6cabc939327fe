"""Trident: exactly-once batches over an ordinary topology."""
