"""``ragray interpret``: faithfulness experiments over a dataset, resumable, in a run directory.

Writes ``questions`` (controls, agreement, cost), ``units`` (importances and buckets), ``arms``
(every call with its similarities), ``cases`` (case per question and K with its statistics) and
``curves`` (cumulative deletion curves) as Parquet + CSV, and ``summary.json`` (case shares,
paired tests, agreement, cost). See :mod:`ragray.faithfulness.experiment`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragray.commands.questions import RunResult, open_question_run, run_questions
from ragray.config import ExperimentConfig
from ragray.faithfulness.experiment import FaithfulnessExperiment
from ragray.faithfulness.schemas import (
    CASES_SCHEMA,
    CURVES_SCHEMA,
    QUESTIONS_SCHEMA,
    UNITS_SCHEMA,
    arms_schema,
)
from ragray.faithfulness.summary import summarize_faithfulness
from ragray.generation import Generator, build_generator
from ragray.generation.prompts import get_template
from ragray.metrics.similarity import all_measures
from ragray.report.report import write_report
from ragray.retrieval.stage import QuestionHits
from ragray.store.recording import recorded_run

__all__ = ["run_interpret"]

TABLES = ("questions", "units", "arms", "cases", "curves")


def faithfulness_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], dict[str, Any]]:
    """The per-question work of ``ragray interpret`` (built once per process or Ray actor)."""
    fc = config.faithfulness
    gen = generator or build_generator(config.generation)
    experiment = FaithfulnessExperiment(
        gen,
        get_template(config.generation.template),
        all_measures(tuple(dict.fromkeys((fc.similarity, *fc.measures)))),
        fc,
        seed=config.seed,
        system_prompt=config.generation.system_prompt,
    )
    return lambda qh: {**experiment.run(qh).as_record(), "model": gen.model_id}


def run_interpret(
    config: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    generator: Generator | None = None,
) -> RunResult:
    """Retrieve → explain → delete → diagnose for every question (``generator`` overrides the backend)."""
    start = time.perf_counter()
    fc = config.faithfulness
    with recorded_run(config, "interpret", out) as recording:
        qr = open_question_run(config, out, resume=resume)

        def cost(record: dict[str, Any]) -> dict[str, str]:
            q = record["question"]
            return {"calls": f"{q['calls_generated']}/{q['calls_requested']}",
                    "cases": ",".join(q.get("cases") or []) or "-"}

        model_id = run_questions(qr, config, faithfulness_processor, "interpret", progress, cost, generator)
        records = qr.records()
        schemas = {"questions": QUESTIONS_SCHEMA, "units": UNITS_SCHEMA, "arms": arms_schema(fc.measures),
                   "cases": CASES_SCHEMA, "curves": CURVES_SCHEMA}
        for name in TABLES:
            rows = [r["question"] for r in records] if name == "questions" else [x for r in records for x in r[name]]
            qr.run.write_table(name, rows, schemas[name])
        summary = summarize_faithfulness(records, config, model_id=model_id)
        summary["skipped_rows"] = len(qr.dataset.skipped)
        summary["resumed_questions"] = qr.n_resumed
        summary["wall_seconds"] = time.perf_counter() - start
        qr.run.write_json("summary", summary)
        write_report(qr.run.path)
        recording.summary = summary
    return RunResult(qr.run.path, summary, qr.n_resumed)
