"""ragray: influence-aware RAG diagnostics on Ray."""

__version__ = "0.1.0"
