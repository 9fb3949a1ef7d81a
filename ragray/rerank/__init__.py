"""Rerankers: keep first-stage order, BGE / sentence-transformers cross-encoders, bi-encoder.

Each reranker's module is imported when it is first built (``RERANKERS`` names them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragray.rerank.base import RERANKERS, Reranker

if TYPE_CHECKING:
    from ragray.config import RerankConfig

__all__ = ["RERANKERS", "Reranker", "build_reranker", "reranks"]


def build_reranker(config: RerankConfig) -> Reranker:
    """The reranker named by ``config.strategy``, built from the ``rerank`` section."""
    return RERANKERS.get(config.strategy).from_config(config)


def reranks(strategy: str) -> bool:
    """False for a strategy that keeps the first-stage order (``none``), which the pipeline skips."""
    return not RERANKERS.get(strategy).passthrough
