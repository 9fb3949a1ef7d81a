"""The row of ``ragray audit`` (``audit.parquet``, ``audit_report.json`` and ``POST /audit``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ragray.rows.base import NOT_STORED, Row, doc

__all__ = ["AuditEntry", "REPORT_ORDER"]

#: the field order of a query in ``audit_report.json`` (the seed auditor's report: the verdict
#: after the scores, ``pass_score`` after the document lists), kept for readers of that file
REPORT_ORDER = ("query_id", "query", "score", "coverage", "precision", "recall", "noise_ratio", "status",
                "retrieved", "relevant", "missing", "noise", "pass_score", "best_score", "hit_at_k", "mrr", "ndcg_at_10",
                "aspects", "explanation", "llm_error")


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
    best_score: Annotated[int | None, doc(
        "the formula's highest score for this many gold documents among this many retrieved: below "
        "pass_score, the query cannot PASS at this k whatever is retrieved")] = None
    pass_score: Annotated[int | None, NOT_STORED, doc("the score a query needs to PASS")] = None

    @property
    def found_all(self) -> bool:
        """Every gold document was retrieved (a scored query only)."""
        return self.status in ("PASS", "FAIL") and not self.missing

    def cannot_pass(self, pass_score: int) -> bool:
        """The formula's ceiling at this k is below ``pass_score``."""
        return self.best_score is not None and self.best_score < pass_score

    def report_entry(self) -> dict[str, object]:
        """This query as ``audit_report.json`` lists it (:data:`REPORT_ORDER`)."""
        row = self.as_dict()
        return {name: row[name] for name in REPORT_ORDER}
