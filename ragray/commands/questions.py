"""The resumable per-question loop shared by ``ragray run`` and ``ragray interpret``.

Run directory: ``config.yaml`` (resolved) and ``progress.jsonl`` (one finished question per line,
fsync'ed as it finishes). ``--resume`` reuses the finished questions (the config must be the same)
so the final tables equal those of an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ragray.config import ExperimentConfig, load_config
from ragray.data import load_dataset
from ragray.errors import InputError
from ragray.retrieval.stage import QuestionHits, RetrievalStage
from ragray.store.progress import ProgressLog
from ragray.store.rundir import RunDir
from ragray.types import Dataset

__all__ = ["QuestionRun", "RunResult", "open_question_run", "run_questions"]


def _check_resume(run: RunDir, config: ExperimentConfig, resume: bool) -> ProgressLog:
    log = ProgressLog(run.path / "progress.jsonl")
    saved = run.path / "config.yaml"
    if log.path.exists() and not resume:
        raise InputError(
            f"{run.path} already holds a run; pass --resume to continue it or choose a new --out"
        )
    if resume and saved.is_file() and (before := load_config(saved)) != config:
        raise InputError(
            f"--resume: the config differs from the one {run.path} was started with "
            f"({saved}: {_differences(before, config)}); resume with that config "
            f"(--config {saved}) or choose a new --out"
        )
    return log


def _differences(before: ExperimentConfig, now: ExperimentConfig, limit: int = 5) -> str:
    """``key: old there, new now`` for the first ``limit`` dotted keys whose values differ."""
    def flat(d: dict, prefix: str = "") -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
        return out

    a, b = flat(before.model_dump(mode="json")), flat(now.model_dump(mode="json"))
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    shown = [f"{k} {a.get(k)!r} there, {b.get(k)!r} now" for k in keys[:limit]]
    return "; ".join(shown) + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


@dataclass(frozen=True)
class RunResult:
    """What a per-question command returns: its run directory and ``summary.json`` content."""

    out: Path
    summary: dict[str, Any]
    n_resumed: int


@dataclass
class QuestionRun:
    """An opened run directory with its dataset, retrieval stage and finished questions."""

    run: RunDir
    dataset: Dataset
    stage: RetrievalStage
    log: ProgressLog
    done: dict[str, dict[str, Any]]
    n_resumed: int

    def pending(self) -> Iterator[QuestionHits]:
        """Retrieved hits of every question not finished yet, in dataset order."""
        for qh in self.stage.run(self.dataset, progress=False):
            if qh.question.id not in self.done:
                yield qh

    def finish(self, record: dict[str, Any]) -> None:
        """Log one finished question durably before the next starts."""
        self.log.append(record)
        self.done[record["question"]["question_id"]] = record

    def records(self) -> list[dict[str, Any]]:
        """Finished records in dataset order."""
        return [self.done[q.id] for q in self.dataset.questions if q.id in self.done]

    def loop(
        self, process: Callable[[QuestionHits], dict[str, Any]], *, desc: str, progress: bool,
        postfix: Callable[[dict[str, Any]], dict[str, str]] | None = None,
    ) -> None:
        """``process`` every pending question here, logging each record (the local executor)."""
        self.drain((process(qh) for qh in self.pending()), desc=desc, progress=progress, postfix=postfix)

    def drain(
        self, records: Iterator[dict[str, Any]], *, desc: str, progress: bool,
        postfix: Callable[[dict[str, Any]], dict[str, str]] | None = None,
    ) -> None:
        """Log records as they arrive (in any order) with a progress bar."""
        bar = tqdm(total=len(self.dataset.questions), initial=self.n_resumed, desc=desc, unit="q",
                   disable=not progress)
        try:
            for record in records:
                self.finish(record)
                bar.update(1)
                if postfix is not None:
                    bar.set_postfix(postfix(record))
        finally:
            bar.close()


def open_question_run(config: ExperimentConfig, out: str | Path, *, resume: bool) -> QuestionRun:
    run = RunDir(out)
    log = _check_resume(run, config, resume)
    run.save_config(config)
    done = log.load(repair=True)
    dataset = load_dataset(config.data)
    n_resumed = sum(1 for q in dataset.questions if q.id in done)
    return QuestionRun(run, dataset, RetrievalStage(config), log, done, n_resumed)


def run_questions(
    qr: QuestionRun,
    config: ExperimentConfig,
    builder: Callable[..., Callable[[QuestionHits], dict[str, Any]]],
    desc: str,
    progress: bool,
    postfix: Callable[[dict[str, Any]], dict[str, str]] | None,
    generator: Any = None,
) -> str:
    """Process the pending questions with the configured executor; returns the model id.

    ``builder(config[, generator])`` makes the per-question function; records carry ``model``.
    A given ``generator`` (tests, Serve replicas) always runs here, in this process.
    """
    if config.execution.executor == "ray" and generator is None:
        from ragray.execution.ray_data import ray_records

        qr.drain(ray_records(config, list(qr.pending()), builder), desc=desc, progress=progress, postfix=postfix)
    else:
        from ragray.generation import build_generator

        gen = generator or build_generator(config.generation)
        try:
            qr.loop(builder(config, gen), desc=desc, progress=progress, postfix=postfix)
        finally:
            if generator is None:
                gen.close()
    models = [r["model"] for r in qr.records() if r.get("model")]
    return models[0] if models else config.generation.model
