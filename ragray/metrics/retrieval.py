"""Ranking metrics against gold document ids (binary relevance).

Hits are first collapsed to their documents (a chunked document counts once, at the rank of its
best chunk), so chunking does not inflate or deflate the numbers. Definitions, for a ranking r of
documents and gold set G (|G| > 0):

- hit@k        = 1 if any of r[:k] ∈ G
- recall@k     = |r[:k] ∩ G| / |G|
- precision@k  = |r[:k] ∩ G| / k
- MRR          = 1 / (rank of the first gold document), 0 if none is retrieved
- nDCG@k       = Σ_{i ≤ k, r_i ∈ G} 1/log2(i+1)  /  Σ_{i ≤ min(k,|G|)} 1/log2(i+1)   (BEIR / trec_eval)

These equal trec_eval's ``P_k``, ``recall_k``, ``ndcg_cut_k`` and ``recip_rank`` with binary qrels
(checked per query against pytrec_eval on SciFact). Diversity of a set of retrieved embeddings
e_1..e_n (n ≥ 2):

- diversity    = 1 − (2 / (n(n−1))) Σ_{i<j} cos(e_i, e_j)   (in [0, 2]; a zero row has cosine 0)

Questions without gold ids are not scored (``None``) and are counted apart, never averaged as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ragray.errors import InputError
from ragray.types import Hit

__all__ = [
    "RankingScores",
    "doc_ranking",
    "score_ranking",
    "mean_scores",
    "hit_at_k",
    "precision_at_k",
    "recall_at_k",
    "ndcg_at_k",
    "reciprocal_rank",
    "ranking_metrics",
    "diversity",
]


@dataclass(frozen=True)
class RankingScores:
    """Per-question ranking metrics; ``k`` is the retrieval depth they were computed at."""

    k: int
    hit_at_1: float
    hit_at_5: float
    hit_at_k: float
    recall_at_k: float
    precision_at_k: float
    mrr: float
    ndcg_at_10: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def doc_ranking(hits: Sequence[Hit]) -> list[str]:
    """Document ids in rank order, each once (at the rank of its best chunk)."""
    seen: dict[str, None] = {}
    for h in sorted(hits, key=lambda h: h.rank):
        seen.setdefault(h.passage.doc_id, None)
    return list(seen)


def _check_k(k: int) -> None:
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")


def _found(ranking: Sequence[str], gold: set[str], k: int) -> int:
    _check_k(k)
    return sum(1 for d in ranking[:k] if d in gold)


def hit_at_k(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """1.0 if a gold id is among the first ``k`` of ``ranking`` (distinct ids, best first)."""
    return float(_found(ranking, gold, k) > 0)


def precision_at_k(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """|r[:k] ∩ G| / k (divided by k even when fewer than k were retrieved, as trec_eval)."""
    return _found(ranking, gold, k) / k


def recall_at_k(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """|r[:k] ∩ G| / |G|; ``gold`` must not be empty."""
    return _found(ranking, gold, k) / len(gold)


def ndcg_at_k(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """Binary-relevance nDCG@k (formula in the module docstring); ``gold`` must not be empty."""
    _check_k(k)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking[:k]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


def reciprocal_rank(ranking: Sequence[str], gold: set[str]) -> float:
    """1 / (1-based rank of the first gold id), 0.0 when none is retrieved."""
    first = next((i for i, d in enumerate(ranking, start=1) if d in gold), None)
    return 1.0 / first if first else 0.0


def ranking_metrics(
    ranking: Sequence[str], gold: Iterable[str], ks: Sequence[int] = (1, 3, 5, 10)
) -> dict[str, float] | None:
    """``hit_at_{k}``, ``precision_at_{k}``, ``recall_at_{k}``, ``ndcg_at_{k}`` for each k in
    ``ks``, and ``mrr``, of a ranking of document ids; ``None`` when ``gold`` is empty.

    A repeated id counts once, at its first (best) rank.
    """
    gold = set(gold)
    if not gold:
        return None
    docs = list(dict.fromkeys(ranking))
    out: dict[str, float] = {}
    for k in ks:
        out[f"hit_at_{k}"] = hit_at_k(docs, gold, k)
        out[f"precision_at_{k}"] = precision_at_k(docs, gold, k)
        out[f"recall_at_{k}"] = recall_at_k(docs, gold, k)
        out[f"ndcg_at_{k}"] = ndcg_at_k(docs, gold, k)
    out["mrr"] = reciprocal_rank(docs, gold)
    return out


def diversity(embeddings: np.ndarray) -> float | None:
    """1 − mean pairwise cosine of the rows of ``embeddings``; ``None`` for fewer than 2 rows."""
    x = np.asarray(embeddings, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"embeddings must be a 2-d matrix, got shape {x.shape}")
    n = x.shape[0]
    if n < 2:
        return None
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    cos = np.clip(unit @ unit.T, -1.0, 1.0)
    mean = (cos.sum() - np.trace(cos)) / (n * (n - 1))
    return float(1.0 - mean)


def score_ranking(hits: Sequence[Hit], gold_ids: Iterable[str], k: int) -> RankingScores | None:
    """Metrics of one question's hits, or ``None`` when it has no gold ids."""
    gold = set(gold_ids)
    if not gold:
        return None
    ranking = doc_ranking(hits)
    return RankingScores(
        k=k,
        hit_at_1=hit_at_k(ranking, gold, 1),
        hit_at_5=hit_at_k(ranking, gold, 5),
        hit_at_k=hit_at_k(ranking, gold, k),
        recall_at_k=recall_at_k(ranking, gold, k),
        precision_at_k=precision_at_k(ranking, gold, k),
        mrr=reciprocal_rank(ranking, gold),
        ndcg_at_10=ndcg_at_k(ranking, gold, 10),
    )


def mean_scores(scores: Sequence[RankingScores | None]) -> dict[str, float | int]:
    """Means over scored questions, plus ``n_scored`` and ``n_unscored`` (no gold ids)."""
    scored = [s for s in scores if s is not None]
    out: dict[str, float | int] = {}
    if scored:
        out["k"] = scored[0].k
        for key in scored[0].as_dict():
            if key != "k":
                out[key] = sum(getattr(s, key) for s in scored) / len(scored)
    out["n_scored"] = len(scored)
    out["n_unscored"] = len(scores) - len(scored)
    return out
