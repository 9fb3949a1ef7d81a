"""Ranking metrics against gold document ids (binary relevance).

Hits are first collapsed to their documents (a chunked document counts once, at the rank of its
best chunk), so chunking does not inflate or deflate the numbers. Definitions, for a ranking r of
documents and gold set G (|G| > 0):

- hit@k        = 1 if any of r[:k] ∈ G
- recall@k     = |r[:k] ∩ G| / |G|
- precision@k  = |r[:k] ∩ G| / k
- MRR          = 1 / (rank of the first gold document), 0 if none is retrieved
- nDCG@k       = Σ_{i ≤ k, r_i ∈ G} 1/log2(i+1)  /  Σ_{i ≤ min(k,|G|)} 1/log2(i+1)   (BEIR / trec_eval)

Questions without gold ids are not scored (``None``) and are counted apart, never averaged as 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from ragray.types import Hit

__all__ = ["RankingScores", "doc_ranking", "score_ranking", "mean_scores"]


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


def _ndcg(ranking: Sequence[str], gold: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking[:k]) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


def score_ranking(hits: Sequence[Hit], gold_ids: Iterable[str], k: int) -> RankingScores | None:
    """Metrics of one question's hits, or ``None`` when it has no gold ids."""
    gold = set(gold_ids)
    if not gold:
        return None
    ranking = doc_ranking(hits)
    first = next((i for i, d in enumerate(ranking, start=1) if d in gold), None)
    found_k = sum(1 for d in ranking[:k] if d in gold)
    return RankingScores(
        k=k,
        hit_at_1=float(bool(ranking[:1]) and ranking[0] in gold),
        hit_at_5=float(any(d in gold for d in ranking[:5])),
        hit_at_k=float(found_k > 0),
        recall_at_k=found_k / len(gold),
        precision_at_k=found_k / k,
        mrr=1.0 / first if first else 0.0,
        ndcg_at_10=_ndcg(ranking, gold, 10),
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
