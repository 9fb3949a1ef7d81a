"""The resumable question run shared by ``ragray run`` and ``ragray interpret`` (and so by
``ragray simulate``, Tune trials and ``POST /runs``).

Run directory: ``config.yaml`` (resolved) and ``progress.jsonl`` (one finished question per line,
fsync'ed as it finishes). ``--resume`` reuses the finished questions (the config must be the same)
so the final tables equal those of an uninterrupted run. A run resumed by a ragray that has
settings the saved config lacks (added since the run started) warns, naming them and the values the
new questions take, and keeps them in ``settings_added_on_resume.json``: its finished questions ran
before those settings existed, so a setting whose default changed the behaviour mixes two
behaviours in one table (start a new ``--out`` then).
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from ragray.console import progress_bar
from ragray.progress import calls_bar

from ragray.config import ExperimentConfig, read_config_file, validate_config
from ragray.data import load_dataset
from ragray.errors import InputError
from ragray.retrieval.stage import QuestionHits, RetrievalStage
from ragray.rows.base import QuestionRecord
from ragray.rows.summaries import FaithfulnessSummary, RunSummary, ScoreSummary
from ragray.store.progress import ProgressLog
from ragray.store.rundir import RunDir
from ragray.types import Dataset

__all__ = ["QuestionRun", "RunResult", "check_run_dir", "open_checked_run", "open_question_run", "read_saved_config",
           "write_record_tables"]

logger = logging.getLogger(__name__)


def _check_resume(run: RunDir, config: ExperimentConfig, resume: bool, command: str) -> ProgressLog:
    log = run.progress_log()
    if run.path is None:  # in memory: a fresh run, nothing to resume
        if resume:
            raise InputError("resume: needs out, the run directory to continue")
        return log
    saved = run.path / "config.yaml"
    if log.path.exists() and not resume:
        raise InputError(
            f"{run.path} already holds a run; pass --resume to continue it or choose a new --out"
        )
    # its relative paths (a saved in-memory run's input_rows.jsonl) name files beside it, as loading it does
    raw = read_config_file(saved) if resume and saved.is_file() else None
    before = validate_config(raw, where=str(saved)) if raw is not None else None
    if before is not None and before != config and _same_but_limit(before, config):
        _check_limit_change(run.path, before, config, log)
    elif before is not None and before != config:
        raise InputError(
            f"--resume: the config differs from the one {run.path} was started with "
            f"({saved}: {_differences(before, config)}); choose a new --out, or resume with that config:\n"
            f"  {shlex.join(['ragray', command, str(saved), '--out', str(run.path), '--resume'])}"
        )
    if raw is not None and log.path.exists() and (added := added_settings(raw, config)):
        shown = ", ".join(f"{k}={v!r}" for k, v in added.items())
        kept = run.path / "settings_added_on_resume.json"
        kept.write_text(json.dumps(added, indent=1) + "\n", encoding="utf-8")
        logger.warning("--resume: %s was started before these settings existed: %s; its finished questions "
                       "ran without them, the new ones take these values (kept in %s). If one of them changes "
                       "what was measured, start a new --out instead", run.path, shown, kept.name)
    return log


def _same_but_limit(before: ExperimentConfig, now: ExperimentConfig) -> bool:
    """The two configs differ in ``data.limit`` alone."""
    return before.model_copy(update={"data": before.data.model_copy(update={"limit": now.data.limit})}) == now


def _check_limit_change(path: Path, before: ExperimentConfig, now: ExperimentConfig, log: ProgressLog) -> None:
    """``--resume`` with another ``--limit``: the finished questions keep their results (``--limit``
    keeps the first questions and never cuts the corpus), so more or fewer questions continue the
    run. Refused where the loader reads only ``limit`` rows and builds the corpus from them (NQ):
    there a finished question would have searched another corpus."""
    from ragray.data.loading import detect_format

    fmt = now.data.format if now.data.format != "auto" else detect_format(now.data.path)
    if fmt == "nq":
        raise InputError(f"--resume: data.limit {before.data.limit} there, {now.data.limit} now, on Natural "
                         f"Questions, whose corpus is built from the first limit rows: the finished questions "
                         f"searched another corpus; resume {path} with --limit {before.data.limit}, or choose a "
                         "new --out")
    done = len(log.load(repair=True)) if log.path.exists() else 0
    logger.warning("--resume: data.limit %s there, %s now: the finished questions are kept (%d), the run "
                   "continues with the first %s questions", before.data.limit, now.data.limit, done,
                   now.data.limit if now.data.limit is not None else "all")


def read_saved_config(path: Path) -> ExperimentConfig:
    """The config a run directory was started with (its ``config.yaml``)."""
    saved = path / "config.yaml"
    if not saved.is_file():
        raise InputError(f"{path}: not a ragray run directory (no config.yaml)")
    return validate_config(read_config_file(saved), where=str(saved))


def added_settings(saved: Mapping[str, object], config: ExperimentConfig) -> dict[str, object]:
    """Dotted settings of ``config`` that the saved raw config does not name (added to ragray
    after the run started) -> the value ``config`` gives them. Only called on equal configs, so a
    mapping-valued setting (``retrieval.filters``) is the same on both sides."""
    out: dict[str, object] = {}

    def walk(old: Mapping[str, object], now: Mapping[str, object], prefix: str) -> None:
        for key, value in now.items():
            if key not in old:
                out[f"{prefix}{key}"] = value
            elif isinstance(value, dict) and isinstance(old[key], dict):
                walk(old[key], value, f"{prefix}{key}.")

    walk(saved, config.model_dump(mode="json"), "")
    return out


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
    """What a command returns: its run directory, ``summary.json`` content, how many questions a
    resume kept, and (per-question commands) every finished record in dataset order."""

    out: Path | None  # None: the run is in memory (the Python API without out)
    summary: RunSummary | FaithfulnessSummary | ScoreSummary
    n_resumed: int
    records: tuple[QuestionRecord, ...] = ()
    #: an in-memory run's files by name (empty for a run on disk: they are in ``out``)
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    #: an in-memory run's tables as built (``<name>.parquet`` among ``files`` holds the same)
    tables: Mapping[str, pa.Table] = field(default_factory=dict, repr=False)


@dataclass
class QuestionRun:
    """An opened run directory with its dataset, retrieval stage and finished questions."""

    run: RunDir
    dataset: Dataset
    stage: RetrievalStage
    log: ProgressLog
    done: dict[str, QuestionRecord]
    n_resumed: int

    def pending(self) -> Iterator[QuestionHits]:
        """Retrieved hits of every question not finished yet, in dataset order."""
        for qh in self.stage.run(self.dataset, progress=False):
            if qh.question.id not in self.done:
                yield qh

    def finish(self, record: QuestionRecord) -> None:
        """Log one finished question durably before the next starts."""
        self.log.append(record.as_dict())
        self.done[record.question_id] = record

    def records(self) -> list[QuestionRecord]:
        """Finished records in dataset order."""
        return [self.done[q.id] for q in self.dataset.questions if q.id in self.done]

    def drain(
        self, records: Iterator[QuestionRecord], *, desc: str, progress: bool,
        postfix: Callable[[QuestionRecord], dict[str, str]] | None = None,
        on_record: Callable[[QuestionRecord], None] | None = None, calls: bool = True,
    ) -> None:
        """Log records as they arrive (in any order) with a progress bar (and with ``calls``, a bar
        of the model calls made in this process); ``on_record`` sees every record of the run once
        it is logged: the resumed ones first, then each new one."""
        bar = progress_bar(total=len(self.dataset.questions), initial=self.n_resumed, desc=desc, unit="q",
                           disable=not progress, smoothing=0)  # the average question so far: an estimate that settles
        try:
            with calls_bar(progress and calls):  # the model calls inside the questions: it moves while one runs
                if on_record is not None:
                    for q in self.dataset.questions:
                        if q.id in self.done:
                            on_record(self.done[q.id])
                for record in records:
                    self.finish(record)
                    bar.update(1)
                    if postfix is not None:
                        bar.set_postfix(postfix(record))
                    if on_record is not None:
                        on_record(record)
        finally:
            bar.close()


def check_run_dir(config: ExperimentConfig, out: str | Path | None, *, resume: bool,
                  command: str = "run") -> tuple[RunDir, ProgressLog]:
    """The run directory ``out`` created for ``config``, or (``resume``) reopened with its progress
    log; :class:`InputError` when it cannot be (not a writable folder, already holding a run, a
    different config: the message then prints the ``ragray COMMAND`` line that resumes it). Called
    before the run is recorded: a refused start records nothing."""
    run = RunDir(out)
    return run, _check_resume(run, config, resume, command)


def open_checked_run(checked: tuple[RunDir, ProgressLog], config: ExperimentConfig, *,
                     record_type: type[QuestionRecord], dataset: Dataset | None = None) -> QuestionRun:
    """The run directory :func:`check_run_dir` returned, opened for ``config``: the config saved,
    the finished questions read back as ``record_type``, the dataset loaded (``dataset``: one
    given in memory in place of ``config.data.path``) and the retrieval stage ready."""
    run, log = checked
    run.save_config(config)
    done = {qid: record_type.from_dict(raw) for qid, raw in log.load(repair=True).items()}
    dataset = load_dataset(config.data, given=dataset)
    n_resumed = sum(1 for q in dataset.questions if q.id in done)
    return QuestionRun(run, dataset, RetrievalStage(config), log, done, n_resumed)


def open_question_run(config: ExperimentConfig, out: str | Path | None, *, resume: bool,
                      record_type: type[QuestionRecord], dataset: Dataset | None = None) -> QuestionRun:
    """The run directory ``out`` opened for ``config`` (``resume``: keep its finished questions,
    read back as ``record_type``), its dataset loaded (or ``dataset``, given) and its retrieval
    stage ready."""
    return open_checked_run(check_run_dir(config, out, resume=resume), config, record_type=record_type,
                            dataset=dataset)


def write_record_tables(run: RunDir, record_type: type[QuestionRecord], records: Sequence[QuestionRecord],
                        schemas: Mapping[str, pa.Schema] | None = None) -> None:
    """The record type's tables (``questions`` and one per part) from ``records``, in order;
    ``schemas`` overrides a part's schema (``arms``: one column per configured measure). An optional
    part without rows (its feature was off) gets no file."""
    schemas = schemas or {}
    run.write_rows(record_type.question_type, [r.question for r in records])  # type: ignore[attr-defined]
    for name, row in record_type.parts.items():
        rows = [x for r in records for x in getattr(r, name)]
        if not rows and name in record_type.optional_parts:
            for suffix in (".parquet", ".csv"):  # a resumed run's earlier, now stale, file
                run.remove(f"{row.table}{suffix}")
            continue
        if name in schemas:
            run.write_table(row.table, [x.as_dict() for x in rows], schemas[name])
        else:
            run.write_rows(row, rows)
