"""Rows of ``ragray retrieve``: ``hits`` and ``questions`` (the ranking metrics per question)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ragray.rows.base import Row, doc

__all__ = ["HitRow", "RetrievalQuestionRow"]


@dataclass(frozen=True)
class HitRow(Row):
    """One retrieved passage of a question, with its text."""

    table = "hits"

    question_id: str
    passage_id: str | None = None
    doc_id: str | None = None
    position: Annotated[int | None, doc("the chunk's position in its document")] = None
    retrieval_rank: int | None = None
    retrieval_score: float | None = None
    title: str | None = None
    text: str | None = None
    is_gold: bool | None = None


@dataclass(frozen=True)
class RetrievalQuestionRow(Row):
    """One question's ranking metrics at ``retrieval.top_k`` (null without gold ids)."""

    table = "questions"

    question_id: str
    question: str | None = None
    n_hits: int | None = None
    n_gold: int | None = None
    hit_at_1: float | None = None
    hit_at_5: float | None = None
    hit_at_k: float | None = None
    recall_at_k: float | None = None
    mrr: float | None = None
    ndcg_at_10: float | None = None
