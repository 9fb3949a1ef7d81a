"""The end of every retrieval, batch or served: rerank → top-k → ``min_score``.

:class:`~ragray.retrieval.stage.RetrievalStage` (the batch pipeline) and the Serve service
(``/retrieve``, ``/influence``, ``/interpretation``, ``/audit``) both fetch
:func:`first_stage_k` first-stage hits and cut them with :func:`finish_hits`, so a served question
gets the hits the CLI would give it. Context expansion (``retrieval.expand``) runs on the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ragray.types import Hit

__all__ = ["Reranks", "finish_hits", "first_stage_k"]


class Reranks(Protocol):
    """What the tail needs of a reranker: a local :class:`~ragray.rerank.Reranker`, or a Serve proxy."""

    def rerank(self, query: str, hits: Sequence[Hit], top_k: int) -> Sequence[Hit]: ...


def first_stage_k(top_k: int, reranking: bool, candidates: int) -> int:
    """First-stage hits to fetch: ``top_k``, or ``rerank.candidates`` when more and reranking."""
    return max(top_k, candidates) if reranking else top_k


def finish_hits(
    query: str, hits: Sequence[Hit], reranker: Reranks | None, top_k: int, min_score: float | None
) -> tuple[Hit, ...]:
    """``hits`` reranked (when a reranker is given), cut to ``top_k``, then those scoring below
    ``min_score`` dropped (after reranking: the score is the reranker's)."""
    if reranker is not None:
        hits = reranker.rerank(query, hits, top_k)
    out = list(hits)[:top_k]
    if min_score is not None:
        out = [h for h in out if h.score >= min_score]
    return tuple(out)
