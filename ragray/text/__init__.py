"""Text analysis shared by retrievers and metrics."""
