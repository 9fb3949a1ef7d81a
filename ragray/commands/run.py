"""``ragray run``: the influence loop over a dataset, resumable, written to a run directory.

Run directory: ``config.yaml`` (resolved), ``progress.jsonl`` (finished questions, appended as
they finish), and at the end ``questions``/``passages``/``calls`` as Parquet (+ CSV) and
``summary.json``. ``--resume`` reuses the finished questions of ``progress.jsonl`` (the config
must be the same) and gives the same final tables as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ragray.ablation.loop import InfluenceLoop
from ragray.config import ExperimentConfig, load_config
from ragray.data import load_dataset
from ragray.errors import InputError
from ragray.generation import Generator, build_generator
from ragray.generation.prompts import get_template
from ragray.metrics.similarity import get_similarity
from ragray.metrics.summary import summarize_run
from ragray.retrieval.stage import RetrievalStage
from ragray.store.progress import ProgressLog
from ragray.store.rundir import RunDir
from ragray.store.schemas import CALLS_SCHEMA, PASSAGES_SCHEMA, QUESTIONS_SCHEMA

__all__ = ["RunResult", "run_influence"]


@dataclass(frozen=True)
class RunResult:
    out: Path
    summary: dict[str, Any]
    n_resumed: int


def _check_resume(run: RunDir, config: ExperimentConfig, resume: bool) -> ProgressLog:
    log = ProgressLog(run.path / "progress.jsonl")
    saved = run.path / "config.yaml"
    if log.path.exists() and not resume:
        raise InputError(
            f"{run.path} already holds a run; pass --resume to continue it or choose a new --out"
        )
    if resume and saved.is_file() and load_config(saved) != config:
        raise InputError(
            f"--resume: the config differs from the one {run.path} was started with "
            f"({saved}); resume with that config or choose a new --out"
        )
    return log


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
    run = RunDir(out)
    log = _check_resume(run, config, resume)
    run.save_config(config)
    done = log.load(repair=True)
    dataset = load_dataset(config.data)
    stage = RetrievalStage(config)
    gen = generator or build_generator(config.generation)
    loop = InfluenceLoop(
        gen,
        get_template(config.generation.template),
        get_similarity(config.influence.similarity),
        config.influence,
        config.generation.system_prompt,
    )
    n_resumed = sum(1 for q in dataset.questions if q.id in done)
    bar = tqdm(total=len(dataset.questions), initial=n_resumed, desc="run", unit="q", disable=not progress)
    n_calls, t_calls = 0, 0.0
    try:
        for qh in stage.run(dataset, progress=False):
            if qh.question.id in done:
                continue
            outcome = loop.run(qh)
            record = outcome.as_record()
            log.append(record)
            done[qh.question.id] = record
            n_calls += outcome.question["n_calls"]
            t_calls += outcome.question["seconds"]
            bar.update(1)
            bar.set_postfix(calls_per_s=f"{n_calls / t_calls:.2f}" if t_calls else "-")
            if on_question is not None:
                on_question(outcome.question)
    finally:
        bar.close()
        if generator is None:
            gen.close()
    records = [done[q.id] for q in dataset.questions if q.id in done]
    run.write_table("questions", [r["question"] for r in records], QUESTIONS_SCHEMA)
    run.write_table("passages", [p for r in records for p in r["passages"]], PASSAGES_SCHEMA)
    run.write_table("calls", [c for r in records for c in r["calls"]], CALLS_SCHEMA)
    summary = summarize_run(records, config, model_id=gen.model_id)
    summary["skipped_rows"] = len(dataset.skipped)
    summary["resumed_questions"] = n_resumed
    summary["wall_seconds"] = time.perf_counter() - start
    run.write_json("summary", summary)
    return RunResult(run.path, summary, n_resumed)
