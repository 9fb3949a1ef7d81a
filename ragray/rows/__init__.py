"""Typed table rows (:mod:`ragray.rows.base`): the influence run, the faithfulness experiment,
the audit and retrieval; their Arrow schemas, HTTP models and JSON lines all come from these classes."""

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
from ragray.rows.influence import CallRow, InfluenceRecord, PassageRow, QuestionRow
from ragray.rows.retrieval import HitRow, RetrievalQuestionRow

__all__ = [
    "ArmRow",
    "AuditEntry",
    "CallRow",
    "CaseRow",
    "CurveRow",
    "FaithfulnessQuestionRow",
    "FaithfulnessRecord",
    "HitRow",
    "InfluenceRecord",
    "PassageRow",
    "QuestionRecord",
    "QuestionRow",
    "RetrievalQuestionRow",
    "Row",
    "UnitRow",
]
