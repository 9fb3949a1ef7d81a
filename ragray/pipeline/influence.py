"""``ragray run``: the influence loop over a dataset, resumable, written to a run directory.

Run directory: ``config.yaml`` (resolved), ``progress.jsonl`` (finished questions, appended as
they finish), and at the end ``questions``/``passages``/``calls`` as Parquet (+ CSV) and
``summary.json``. ``--resume`` reuses the finished questions of ``progress.jsonl`` (the config
must be the same) and gives the same final tables as an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable

from ragray.metrics.summary import summarize_run
from ragray.pipeline.executors import QuestionCommand
from ragray.pipeline.processors import edit_test_inputs, influence_processor
from ragray.rows.influence import InfluenceRecord

__all__ = ["run_influence"]


def _calls_per_second() -> Callable[[InfluenceRecord], dict[str, str]]:
    """The progress bar's running model calls per second."""
    totals = {"calls": 0, "seconds": 0.0}

    def postfix(record: InfluenceRecord) -> dict[str, str]:
        totals["calls"] += record.question.n_calls or 0
        totals["seconds"] += record.question.seconds or 0.0
        return {"calls_per_s": f"{totals['calls'] / totals['seconds']:.2f}" if totals["seconds"] else "-"}

    return postfix


run_influence = QuestionCommand(
    "run", InfluenceRecord, influence_processor, summarize_run, postfix=_calls_per_second, prepare=edit_test_inputs,
    doc="Retrieve → baseline → drop-one → influence for every question (see :mod:`ragray.pipeline.influence`), "
        "then the edit test where ``influence.edit_test`` is on (:mod:`ragray.pipeline.edit_test`); "
        "``generator`` overrides the configured backend (tests, Serve replicas that hold a model).",
)
