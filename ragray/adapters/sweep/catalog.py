"""The metrics a sweep can score, each in [0, 1] with higher better, and the objectives.

Per-question metrics come from a trial's run tables; corpus-level ones (chunking) are the same
for every question of a trial. A metric a question could not be measured on (no gold ids, a
degenerate influence state, no gold answer) is missing for it, never counted as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Metric", "METRICS", "OBJECTIVES"]


@dataclass(frozen=True)
class Metric:
    step: str  # chunking | retrieval | generation | influence
    doc: str


METRICS: dict[str, Metric] = {
    "chunk_coverage": Metric("chunking", "share of gold answers found verbatim in some chunk (metrics.chunking)"),
    "chunk_cohesion": Metric("chunking", "(cohesion - separation + 1) / 2 of the chunk embeddings (metrics.chunking)"),
    "hit_at_k": Metric("retrieval", "a gold document among the top-k hits"),
    "recall_at_k": Metric("retrieval", "share of the gold documents among the top-k hits"),
    "mrr": Metric("retrieval", "1 / rank of the first gold document"),
    "ndcg_at_10": Metric("retrieval", "nDCG@10 of the document ranking"),
    "em": Metric("generation", "baseline answer equals a gold answer (normalized)"),
    "f1": Metric("generation", "token F1 of the baseline answer against the best gold answer"),
    "answer_similarity": Metric("generation", "MiniLM cosine of answer and gold answer (metrics.embedding)"),
    "grounding": Metric("generation", "MiniLM cosine of answer and retrieved context (metrics.embedding)"),
    "faithful": Metric("generation", "1 - hallucination (answer far from both gold and context)"),
    "rank_agreement": Metric("influence", "(Spearman rho of retrieval rank vs influence rank + 1) / 2"),
    "not_divergent": Metric("influence", "1 - divergent (rho below influence.divergence_threshold)"),
    "usage_ndcg": Metric("influence", "nDCG of the retriever's order with each passage's influence as gain (tie-robust)"),
    "aligned": Metric("influence", "1 - misaligned (usage_ndcg below influence.misalignment_threshold)"),
    "used_context": Metric("influence", "1 - wasted context: share of passages whose removal changed the answer"),
}

OBJECTIVES: dict[str, list[str]] = {
    # answers first, retrieval second; every metric weight 1 unless `weights` says otherwise
    "quality": ["f1", "em", "answer_similarity", "mrr", "recall_at_k"],
    # usage-calibrated: does the model use what the retriever ranks high, and no more?
    # tie-robust alignment (SPEC §11): rho and Divergent are decided by ties among unused passages
    "usage": ["usage_ndcg", "aligned", "used_context"],
}
