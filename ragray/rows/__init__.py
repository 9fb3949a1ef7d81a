"""Typed table rows (:mod:`ragray.rows.base`): the influence run, the faithfulness experiment,
the audit, retrieval and scoring; their Arrow schemas, HTTP models and JSON lines all come from
these classes. The summaries (``summary.json``) are typed the same way (:mod:`ragray.rows.summaries`)."""

from ragray.rows.audit import AuditEntry
from ragray.rows.base import QuestionRecord, Row
from ragray.rows.faithfulness import (
    ArmRow,
    CaseRow,
    CurveRow,
    FaithfulnessQuestionRow,
    FaithfulnessRecord,
    UnitRow,
)
from ragray.rows.influence import CallRow, CheckRow, InfluenceRecord, PassageRow, QuestionRow, SubsetRow
from ragray.rows.quality import ScoreRow
from ragray.rows.retrieval import HitRow, RetrievalQuestionRow
from ragray.rows.summaries import AuditSummary, FaithfulnessSummary, RunSummary, ScoreSummary, Summary

__all__ = [
    "ArmRow",
    "AuditEntry",
    "AuditSummary",
    "CallRow",
    "CaseRow",
    "CheckRow",
    "CurveRow",
    "FaithfulnessQuestionRow",
    "FaithfulnessRecord",
    "FaithfulnessSummary",
    "HitRow",
    "InfluenceRecord",
    "PassageRow",
    "QuestionRecord",
    "QuestionRow",
    "RetrievalQuestionRow",
    "Row",
    "RunSummary",
    "ScoreRow",
    "ScoreSummary",
    "SubsetRow",
    "Summary",
    "UnitRow",
]
