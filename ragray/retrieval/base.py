"""The retriever interface: a :class:`Retriever` builds a :class:`SearchIndex` over passages."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ragray.config import RetrievalConfig
from ragray.registry import Registry
from ragray.types import Hit, Passage

__all__ = ["Retriever", "SearchIndex", "RETRIEVERS", "hits_from_scores"]


class SearchIndex(ABC):
    """An index over a fixed tuple of passages."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages: tuple[Passage, ...] = tuple(passages)

    @abstractmethod
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top ``k`` hits per query, best first, ranks 1..k."""

    def __len__(self) -> int:
        return len(self.passages)


class Retriever(ABC):
    """A retrieval method; receives only its own section of the retrieval config."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def from_config(cls, config: RetrievalConfig) -> Retriever:
        """Build the retriever from the ``retrieval`` section (reading its own sub-section)."""

    @abstractmethod
    def index(self, passages: Sequence[Passage]) -> SearchIndex:
        """Index ``passages`` (may be empty: every search then returns no hits)."""


RETRIEVERS: Registry[Retriever] = Registry("retriever")


def hits_from_scores(
    passages: Sequence[Passage], scores: np.ndarray, k: int, higher_is_better: bool = True
) -> list[Hit]:
    """Top ``k`` of ``scores`` as hits; ties keep corpus order (a stable, reproducible order)."""
    k = min(k, len(passages))
    if k <= 0:
        return []
    key = -scores if higher_is_better else scores
    if k < len(passages):
        part = np.argpartition(key, k - 1)[:k]
        # include every element tied with the k-th so the stable sort below picks by corpus order
        kth = key[part].max()
        part = np.flatnonzero(key <= kth)
    else:
        part = np.arange(len(passages))
    order = part[np.lexsort((part, key[part]))][:k]
    return [Hit(passages[i], rank, float(scores[i])) for rank, i in enumerate(order, start=1)]
