"""``bi_encoder``: offline fallback reranker, cosine(query, passage) with a sentence encoder.

Weaker than a cross-encoder (query and passage never attend to each other) but needs only the
packaged MiniLM (``model: minilm``, the default) or any sentence-transformers model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragray.config import RerankConfig
from ragray.encoders import SentenceEncoder, passage_text
from ragray.rerank.base import RERANKERS, Reranker
from ragray.types import Passage

__all__ = ["BiEncoderReranker"]


@RERANKERS.register("bi_encoder")
class BiEncoderReranker(Reranker):
    """Cosine similarity of normalized embeddings (nothing is written to the embedding cache)."""

    name = "bi_encoder"

    def __init__(self, encoder: SentenceEncoder, batch_size: int = 32) -> None:
        self.encoder = encoder
        self.batch_size = batch_size

    @classmethod
    def from_config(cls, config: RerankConfig) -> BiEncoderReranker:
        encoder = SentenceEncoder(config.model or "minilm", config.device, cache=False)
        encoder.model  # load now, so a bad model fails when the pipeline is built  # noqa: B018
        return cls(encoder, config.batch_size)

    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """Cosine similarity between the query and each ``title + "\\n" + text``."""
        if not passages:
            return np.zeros(0, dtype=np.float64)
        texts = [query] + [passage_text(p) for p in passages]
        emb = self.encoder.encode(texts, self.batch_size, normalize=True, cache=False)
        return (emb[1:] @ emb[0]).astype(np.float64)
