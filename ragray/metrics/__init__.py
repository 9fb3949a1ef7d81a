"""Metrics: retrieval quality now; similarity, influence and faithfulness as they land."""
