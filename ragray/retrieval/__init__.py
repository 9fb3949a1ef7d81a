"""Retrievers: BM25, dense (sentence-transformers + FAISS), hybrid fusion, and the given order."""

from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex, hits_from_scores
from ragray.retrieval import bm25, dense, given, hybrid  # noqa: F401  (register the retrievers)

__all__ = ["RETRIEVERS", "Retriever", "SearchIndex", "hits_from_scores", "build_retriever"]


def build_retriever(config: "RetrievalConfig") -> Retriever:  # noqa: F821
    """The retriever named by ``config.retriever``, built from its own config section."""
    return RETRIEVERS.get(config.retriever).from_config(config)
