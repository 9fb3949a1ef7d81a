"""Rerankers: keep first-stage order, BGE / sentence-transformers cross-encoders, bi-encoder."""

from ragray.config import RerankConfig
from ragray.rerank import bi_encoder, cross_encoder, flag, none  # noqa: F401  (register them)
from ragray.rerank.base import RERANKERS, Reranker

__all__ = ["RERANKERS", "Reranker", "build_reranker"]


def build_reranker(config: RerankConfig) -> Reranker:
    """The reranker named by ``config.strategy``, built from the ``rerank`` section."""
    return RERANKERS.get(config.strategy).from_config(config)
