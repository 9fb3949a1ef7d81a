"""The retriever interface: a :class:`Retriever` builds a :class:`SearchIndex` over passages.

Caching (:mod:`ragray.cache`) is opt-in per retriever: one whose :meth:`Retriever.index_identity`
returns a description of everything (besides the passages) that decides its index, and whose
indexes implement :meth:`SearchIndex.save` / :meth:`Retriever.load_index`, gets its indexes and
results cached; the default ``None`` means "never cached", which is always correct.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragray.registry import Component, Registry
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

    def save(self, directory: Path) -> None:
        """Write the index into the (existing, empty) ``directory`` as plain files, never pickles;
        the passages themselves are not written (:meth:`Retriever.load_index` is given them)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")


class Retriever(Component):
    """A retrieval method, built from the ``retrieval`` section (reading its own sub-section)."""

    #: False for a retriever that ranks nothing itself (``given``: each question's own passage
    #: order), so it cannot search a served corpus
    ranks_corpus: ClassVar[bool] = True
    #: True for a retriever that loads a model (a dense encoder): on a GPU cluster its Serve replica
    #: asks for a share of a GPU (:mod:`ragray.adapters.execution.placement`)
    holds_model: ClassVar[bool] = False

    @abstractmethod
    def index(self, passages: Sequence[Passage]) -> SearchIndex:
        """Index ``passages`` (may be empty: every search then returns no hits)."""

    def index_identity(self) -> dict[str, Any] | None:
        """Everything besides the passages that decides the index :meth:`index` builds (config
        values, model identity, library versions), hashed into index cache keys. ``None``: this
        retriever's indexes and results are never cached."""
        return None

    def search_identity(self) -> dict[str, Any] | None:
        """Everything besides the index and the query that decides search results (adds
        search-time parameters to :meth:`index_identity`); hashed into result cache keys."""
        return self.index_identity()

    def load_index(self, directory: Path, passages: Sequence[Passage]) -> SearchIndex:
        """The index :meth:`SearchIndex.save` wrote to ``directory``, over ``passages``; raises
        ``OSError``/``ValueError`` on a damaged or mismatched folder (the cache then rebuilds)."""
        raise NotImplementedError(f"{type(self).__name__} cannot load saved indexes")


RETRIEVERS: Registry[Retriever] = Registry("retriever")  # built-ins: ragray.catalog


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
