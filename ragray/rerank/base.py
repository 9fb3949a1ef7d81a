"""The reranker interface: score (query, passage) pairs and reorder first-stage hits."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ragray.config import RerankConfig
from ragray.registry import Registry
from ragray.types import Hit, Passage

__all__ = ["Reranker", "RERANKERS"]


class Reranker(ABC):
    """Scores passages for a query; :meth:`rerank` turns scores into a new ranking."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, config: RerankConfig) -> Reranker:
        """Build the reranker from the ``rerank`` config section."""

    @abstractmethod
    def score(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """One relevance score per passage (higher = more relevant)."""

    def rerank(self, query: str, hits: Sequence[Hit], top_k: int) -> list[Hit]:
        """The best ``top_k`` of ``hits`` by :meth:`score`; ties keep first-stage order."""
        if not hits:
            return []
        scores = np.asarray(self.score(query, [h.passage for h in hits]), dtype=np.float64)
        order = np.lexsort((np.arange(len(hits)), -scores))[:top_k]
        return [Hit(hits[i].passage, r, float(scores[i])) for r, i in enumerate(order, start=1)]


RERANKERS: Registry[Reranker] = Registry("reranker")
