"""The reranker interface: score (query, passage) pairs and reorder first-stage hits."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ragray.registry import Component, Registry
from ragray.types import Hit, Passage


__all__ = ["Reranker", "RERANKERS"]


class Reranker(Component):
    """Scores passages for a query; :meth:`rerank` turns scores into a new ranking. Built from
    the ``rerank`` config section."""

    #: True for a reranker that keeps the first-stage order (``none``): the pipeline skips it
    passthrough: ClassVar[bool] = False

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


RERANKERS: Registry[Reranker] = Registry("reranker")  # built-ins: ragray.catalog
