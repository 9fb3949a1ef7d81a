"""Retrievers: BM25, dense (sentence-transformers + FAISS), hybrid fusion, and the given order.

Each retriever's module is imported when it is first built (``RETRIEVERS`` names them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex, hits_from_scores

if TYPE_CHECKING:
    from ragray.config import RetrievalConfig

__all__ = ["RETRIEVERS", "Retriever", "SearchIndex", "hits_from_scores", "build_retriever"]


def build_retriever(config: RetrievalConfig) -> Retriever:
    """The retriever named by ``config.retriever``, built from its own config section."""
    return RETRIEVERS.get(config.retriever).from_config(config)
