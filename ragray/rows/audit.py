"""The row of ``ragray audit`` (``audit.parquet``, ``audit_report.json`` and ``POST /audit``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ragray.rows.base import NOT_STORED, Row, doc

__all__ = ["AuditEntry"]


@dataclass(frozen=True)
class AuditEntry(Row):
    """One query's retrieval integrity: its top-k documents scored against the gold ids."""

    table = "audit"

    query_id: str
    query: str | None = None
    status: Annotated[str | None, doc("PASS | FAIL | UNSCORED (no ground truth)")] = None
    score: Annotated[int | None, doc("0-100: coverage, precision and noise combined")] = None
    coverage: Annotated[float | None, doc("percent of the relevant documents retrieved")] = None
    precision: float | None = None
    recall: float | None = None
    noise_ratio: Annotated[float | None, doc("percent of the retrieved documents not relevant")] = None
    retrieved: Annotated[tuple[str, ...] | None, doc("the top-k document ids, in rank order")] = None
    relevant: tuple[str, ...] | None = None
    missing: tuple[str, ...] | None = None
    noise: tuple[str, ...] | None = None
    hit_at_k: float | None = None
    mrr: float | None = None
    ndcg_at_10: float | None = None
    aspects: Annotated[tuple[str, ...] | None, doc("aspects of the query (audit.llm)")] = None
    explanation: Annotated[str | None, doc("plain-language explanation (audit.llm)")] = None
    llm_error: str | None = None
    pass_score: Annotated[int | None, NOT_STORED, doc("the score a query needs to PASS")] = None
