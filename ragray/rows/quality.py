"""The row of ``ragray score`` (``scores.parquet``): one scored record of a user's pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ragray.rows.base import INT64, Row, doc

__all__ = ["ScoreRow"]


@dataclass(frozen=True)
class ScoreRow(Row):
    """One record's answer quality (:mod:`ragray.metrics.quality`); ``None`` where undefined."""

    table = "scores"

    id: str
    question: str | None = None
    answer: str | None = None
    n_contexts: Annotated[int | None, doc("passages the record's answer was given")] = None
    golds: Annotated[tuple[str, ...] | None, doc("gold answers")] = None
    model: str | None = None
    em: Annotated[float | None, doc("SQuAD exact match (None without a gold answer)")] = None
    f1: Annotated[float | None, doc("SQuAD token F1 (None without a gold answer)")] = None
    recall_at_k_cosine: Annotated[float | None, doc("1 when a context has cosine >= tau_recall to a gold")] = None
    sim_answer_gold: float | None = None
    grounding: Annotated[float | None, doc("cosine of the answer and the joined contexts")] = None
    hallucination: Annotated[float | None, doc("1 when the answer is near neither gold nor contexts (tau_h)")] = None
    relevance: Annotated[float | None, doc("cosine of the answer and the question")] = None
    label_noise_ratio: Annotated[float | None, doc("percent of the record's documents not gold (gold ids)")] = None
    label_coverage: Annotated[float | None, doc("percent of the gold documents among the record's")] = None
    latency_s: float | None = None
    prompt_tokens: Annotated[int | None, INT64] = None
    completion_tokens: Annotated[int | None, INT64] = None
    cost_usd: float | None = None
    answer_correct: Annotated[bool | None, doc(
        "the answer contains a gold answer as whole words (ragray run's rule; None without one)")] = None
    context_has_gold: Annotated[bool | None, doc(
        "a context contains a gold answer as whole words: the answer was there to be found")] = None
