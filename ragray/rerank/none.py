"""``none``: keep the first-stage order (and scores); only cut to ``top_k``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragray.rerank.base import RERANKERS, Reranker
from ragray.types import Hit, Passage

__all__ = ["NoReranker"]


@RERANKERS.register("none")
class NoReranker(Reranker):
    """The identity reranker: first-stage ranking and scores are kept as they are."""

    name = "none"
    passthrough = True

    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """``n, n-1, ..., 1``: the first-stage order, as scores (higher = earlier)."""
        return np.arange(len(passages), 0, -1, dtype=np.float64)

    def rerank(self, query: str, hits: Sequence[Hit], top_k: int) -> list[Hit]:
        """The first ``top_k`` hits with ranks renumbered 1..top_k and their original scores."""
        return [Hit(h.passage, rank, h.score) for rank, h in enumerate(hits[:top_k], start=1)]
