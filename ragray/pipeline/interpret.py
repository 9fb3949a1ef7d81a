"""``ragray interpret``: faithfulness experiments over a dataset, resumable, in a run directory.

Writes ``questions`` (controls, agreement, cost), ``units`` (importances and buckets), ``arms``
(every call with its similarities), ``cases`` (case per question and K with its statistics) and
``curves`` (cumulative deletion curves) as Parquet + CSV, and ``summary.json`` (case shares,
paired tests, agreement, cost). See :mod:`ragray.faithfulness.experiment`.
"""

from __future__ import annotations

from collections.abc import Callable

from ragray.faithfulness.summary import summarize_faithfulness
from ragray.pipeline.executors import QuestionCommand
from ragray.pipeline.processors import faithfulness_processor
from ragray.rows.faithfulness import ArmRow, FaithfulnessRecord

__all__ = ["run_interpret"]


def _cost() -> Callable[[FaithfulnessRecord], dict[str, str]]:
    """The progress bar's calls made / requested and the cases of the last question."""

    def postfix(record: FaithfulnessRecord) -> dict[str, str]:
        q = record.question
        return {"calls": f"{q.calls_generated}/{q.calls_requested}", "cases": ",".join(q.cases or []) or "-"}

    return postfix


run_interpret = QuestionCommand(
    "interpret", FaithfulnessRecord, faithfulness_processor, summarize_faithfulness, postfix=_cost,
    schemas=lambda config: {"arms": ArmRow.arrow_schema_for(config.faithfulness.measures)},
    doc="Retrieve → explain → delete → diagnose for every question (``generator`` overrides the backend).",
)
