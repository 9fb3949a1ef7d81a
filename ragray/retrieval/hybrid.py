"""Hybrid retrieval: dense top ``dense_k`` + BM25 top ``sparse_k``, merged and fused.

Fusion (``retrieval.hybrid.fusion``):
- ``rrf``: Reciprocal Rank Fusion (Cormack et al., 2009), score(d) = Σ_lists 1 / (rrf_k + rank(d)),
  with rrf_k = 60 by default; a passage missing from a list contributes nothing for it.
- ``alpha``: each list's scores min-max normalized to [0, 1] (a missing passage counts 0), then
  score = alpha · dense + (1 − alpha) · sparse.
Both are composed from the registered ``dense`` and ``bm25`` retrievers, not re-implemented;
so is caching: a saved hybrid index is the two components' saved indexes in ``dense/`` and
``sparse/``, and the fusion parameters (search-time only) are in result keys, not index keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragray.config import HybridConfig, RetrievalConfig
from ragray.retrieval.base import RETRIEVERS, Retriever, SearchIndex
from ragray.types import Hit, Passage

__all__ = ["HybridRetriever", "HybridIndex", "fuse_rrf", "fuse_alpha"]


def fuse_rrf(lists: Sequence[Sequence[Hit]], rrf_k: int = 60) -> dict[str, float]:
    """RRF score per passage id over several ranked lists."""
    fused: dict[str, float] = {}
    for hits in lists:
        for h in hits:
            fused[h.passage.id] = fused.get(h.passage.id, 0.0) + 1.0 / (rrf_k + h.rank)
    return fused


def _minmax(hits: Sequence[Hit]) -> dict[str, float]:
    if not hits:
        return {}
    scores = np.array([h.score for h in hits], dtype=np.float64)
    lo, span = scores.min(), scores.max() - scores.min()
    # a list whose scores are all equal carries no ordering: every member gets 1
    norm = (scores - lo) / span if span > 0 else np.ones_like(scores)
    return {h.passage.id: float(s) for h, s in zip(hits, norm)}


def fuse_alpha(dense: Sequence[Hit], sparse: Sequence[Hit], alpha: float) -> dict[str, float]:
    """``alpha``-weighted sum of min-max normalized dense and sparse scores."""
    d, s = _minmax(dense), _minmax(sparse)
    return {pid: alpha * d.get(pid, 0.0) + (1 - alpha) * s.get(pid, 0.0) for pid in {**d, **s}}


class HybridIndex(SearchIndex):
    def __init__(
        self, passages: Sequence[Passage], dense: SearchIndex, sparse: SearchIndex, config: HybridConfig
    ) -> None:
        super().__init__(passages)
        self.dense, self.sparse, self.config = dense, sparse, config
        self._order = {p.id: i for i, p in enumerate(self.passages)}

    def save(self, directory: Path) -> None:
        for name, part in (("dense", self.dense), ("sparse", self.sparse)):
            (directory / name).mkdir()
            part.save(directory / name)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        cfg = self.config
        dense_hits = self.dense.search(queries, cfg.dense_k)
        sparse_hits = self.sparse.search(queries, cfg.sparse_k)
        out = []
        for d, s in zip(dense_hits, sparse_hits):
            fused = fuse_rrf([d, s], cfg.rrf_k) if cfg.fusion == "rrf" else fuse_alpha(d, s, cfg.alpha)
            by_id = {h.passage.id: h.passage for h in (*d, *s)}
            # ties broken by corpus order so results are reproducible
            ranked = sorted(fused, key=lambda pid: (-fused[pid], self._order[pid]))[:k]
            out.append([Hit(by_id[pid], r, fused[pid]) for r, pid in enumerate(ranked, start=1)])
        return out


def _part(retriever: Retriever, identity: dict[str, Any]) -> dict[str, Any]:
    cls = type(retriever)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "identity": identity}


@RETRIEVERS.register("hybrid")
class HybridRetriever(Retriever):
    """Dense + BM25 fused by RRF or alpha weighting (``retrieval.hybrid``)."""

    holds_model = True

    name = "hybrid"

    def __init__(self, dense: Retriever, sparse: Retriever, config: HybridConfig) -> None:
        self.dense, self.sparse, self.config = dense, sparse, config

    @classmethod
    def from_config(cls, config: RetrievalConfig) -> HybridRetriever:
        return cls(
            RETRIEVERS.get("dense").from_config(config),
            RETRIEVERS.get("bm25").from_config(config),
            config.hybrid,
        )

    def index(self, passages: Sequence[Passage]) -> HybridIndex:
        return HybridIndex(passages, self.dense.index(passages), self.sparse.index(passages), self.config)

    def index_identity(self) -> dict[str, Any] | None:
        """Both components' index identities (``None`` if either cannot be cached)."""
        dense, sparse = self.dense.index_identity(), self.sparse.index_identity()
        if dense is None or sparse is None:
            return None
        return {"dense": _part(self.dense, dense), "sparse": _part(self.sparse, sparse)}

    def search_identity(self) -> dict[str, Any] | None:
        """Both components' search identities plus the whole ``retrieval.hybrid`` section."""
        dense, sparse = self.dense.search_identity(), self.sparse.search_identity()
        if dense is None or sparse is None:
            return None
        return {"dense": _part(self.dense, dense), "sparse": _part(self.sparse, sparse),
                "hybrid": self.config.model_dump(mode="json")}

    def load_index(self, directory: Path, passages: Sequence[Passage]) -> HybridIndex:
        passages = tuple(passages)
        return HybridIndex(
            passages,
            self.dense.load_index(directory / "dense", passages),
            self.sparse.load_index(directory / "sparse", passages),
            self.config,
        )
