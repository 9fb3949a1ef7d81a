"""``ragray run``: the influence loop over a dataset, resumable, written to a run directory.

Run directory: ``config.yaml`` (resolved), ``progress.jsonl`` (finished questions, appended as
they finish), and at the end ``questions``/``passages``/``calls`` as Parquet (+ CSV) and
``summary.json``. ``--resume`` reuses the finished questions of ``progress.jsonl`` (the config
must be the same) and gives the same final tables as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragray.ablation.loop import InfluenceLoop
from ragray.commands.questions import RunResult, open_question_run, run_questions
from ragray.config import ExperimentConfig
from ragray.generation import Generator, build_generator
from ragray.generation.prompts import get_template
from ragray.metrics.quality import QualityScorer
from ragray.metrics.similarity import get_similarity
from ragray.metrics.summary import summarize_run
from ragray.report.report import write_report
from ragray.retrieval.stage import QuestionHits
from ragray.store.recording import recorded_run
from ragray.store.schemas import CALLS_SCHEMA, PASSAGES_SCHEMA, QUESTIONS_SCHEMA

__all__ = ["RunResult", "run_influence"]


def influence_processor(
    config: ExperimentConfig, generator: Generator | None = None
) -> Callable[[QuestionHits], dict[str, Any]]:
    """The per-question work of ``ragray run`` (built once per process or Ray actor)."""
    gen = generator or build_generator(config.generation)
    loop = InfluenceLoop(
        gen,
        get_template(config.generation.template),
        get_similarity(config.influence.similarity),
        config.influence,
        config.generation.system_prompt,
        quality=QualityScorer(config.metrics),
        model=config.generation.model,
    )
    return lambda qh: {**loop.run(qh).as_record(), "model": gen.model_id}


def run_influence(
    config: ExperimentConfig,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    generator: Generator | None = None,
    on_question: Callable[[dict[str, Any]], None] | None = None,
) -> RunResult:
    """Retrieve → baseline → drop-one → influence for every question; see the module docstring.

    ``generator`` overrides the configured backend (tests, Serve replicas that hold a model).
    """
    start = time.perf_counter()
    with recorded_run(config, "run", out) as recording:
        qr = open_question_run(config, out, resume=resume)
        totals = {"calls": 0, "seconds": 0.0}

        def seen(record: dict[str, Any]) -> dict[str, str]:
            totals["calls"] += record["question"]["n_calls"]
            totals["seconds"] += record["question"]["seconds"]
            if on_question is not None:
                on_question(record["question"])
            return {"calls_per_s": f"{totals['calls'] / totals['seconds']:.2f}" if totals["seconds"] else "-"}

        model_id = run_questions(qr, config, influence_processor, "run", progress, seen, generator)
        run, dataset, n_resumed = qr.run, qr.dataset, qr.n_resumed
        records = qr.records()
        run.write_table("questions", [r["question"] for r in records], QUESTIONS_SCHEMA)
        run.write_table("passages", [p for r in records for p in r["passages"]], PASSAGES_SCHEMA)
        run.write_table("calls", [c for r in records for c in r["calls"]], CALLS_SCHEMA)
        summary = summarize_run(records, config, model_id=model_id)
        summary["skipped_rows"] = len(dataset.skipped)
        summary["resumed_questions"] = n_resumed
        summary["cache"] = qr.stage.cache_stats.as_dict()  # this process's hits and misses
        if config.generation.backend == "simulated":
            from ragray.simulate import simulation_marker

            summary["simulated"] = simulation_marker(config.generation.model)
        summary["wall_seconds"] = time.perf_counter() - start
        run.write_json("summary", summary)
        write_report(run.path)
        recording.summary = summary
    return RunResult(run.path, summary, n_resumed)
