"""Trident: Storm's exactly-once API (batches, txids, states) on tupletree."""
