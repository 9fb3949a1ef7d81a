"""Where the per-question work runs: here, or over Ray Data actors (``execution.executor``).

An :class:`Executor` turns the pending questions of a :class:`~ragray.pipeline.questions.QuestionRun`
into records, each made by the per-question processor that ``builder(config[, generator])`` builds
(:mod:`ragray.pipeline.processors`); the run logs each record the moment it arrives, so both
executors resume the same way and give the same tables.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from ragray.config import ExperimentConfig
from ragray.errors import InputError
from ragray.data.answerable import resolve_decline
from ragray.generation import GENERATORS
from ragray.rows.placement import summarize_placements
from ragray.pipeline.generators import ModelSource, call_cache_counts, open_generator, source_generator
from ragray.pipeline.in_flight import InFlight, questions_in_flight
from ragray.pipeline.questions import (
    QuestionRun,
    RunResult,
    check_run_dir,
    open_checked_run,
    read_saved_config,
    write_record_tables,
)
from ragray.report.report import write_report
from ragray.registry import Registry
from ragray.retrieval.stage import QuestionHits, describe_sources
from ragray.rows.base import QuestionRecord
from ragray.rows.summaries import FaithfulnessSummary, RunSummary
from ragray.store.recording import recorded_run
from ragray.types import Dataset

__all__ = ["EXECUTORS", "Builder", "Executor", "LocalExecutor", "QuestionCommand", "RunStart", "run_questions"]

#: ``builder(config[, generator])`` -> the per-question function (records carry ``model``)
Builder = Callable[..., Callable[[QuestionHits], QuestionRecord]]


class Executor(ABC):
    """Processes questions somewhere and yields their records (in any order)."""

    name: ClassVar[str]

    def __init__(self, record_type: type[QuestionRecord]) -> None:
        """``record_type``: what the processors return (and the run log holds)."""
        self.record_type = record_type
        #: the call cache's hits and misses once the records are drained (where this process saw them)
        self.call_counts: dict[str, int] = {}
        #: the generator's resolved settings, where it ran in this process (``Generator.resolved_settings``)
        self.backend_settings: dict[str, Any] = {}
        #: what each Ray actor asked for (``auto`` resolved); empty for the local executor
        self.resources: dict[str, Any] = {}

    @abstractmethod
    def records(self, config: ExperimentConfig, pending: Iterable[QuestionHits],
                builder: Builder) -> Iterator[QuestionRecord]:
        """One record per pending question, each at most once."""


#: ``ray`` lives with its adapter (:mod:`ragray.adapters.execution.ray_data`), imported when first asked for
EXECUTORS: Registry[Executor] = Registry("executor", {"local": __name__, "ray": "ragray.adapters.execution.ray_data"})


@EXECUTORS.register("local")
class LocalExecutor(Executor):
    """In this process, retrieving each question as it comes; up to
    ``execution.max_questions_in_flight`` questions (else the backend's default) wait on the backend
    at once (:mod:`ragray.pipeline.in_flight`). A given ``generator`` (tests, Serve replicas, the
    Python API's kept model, :data:`~ragray.pipeline.generators.ModelSource`) is used and left open;
    else one is opened (behind the call cache) and closed. Either way, only once a question is
    pending and retrieved."""

    name = "local"

    def __init__(self, record_type: type[QuestionRecord], generator: ModelSource | None = None) -> None:
        super().__init__(record_type)
        self.generator = generator

    def records(self, config: ExperimentConfig, pending: Iterable[QuestionHits],
                builder: Builder) -> Iterator[QuestionRecord]:
        pending = iter(pending)
        first = next(pending, None)
        if first is None:  # nothing left (a finished run resumed): no model to load
            return
        gen = source_generator(self.generator) if self.generator is not None else open_generator(config)
        try:
            questions = itertools.chain([first], pending)
            n = questions_in_flight(config, gen)
            if n > 1:
                flight = InFlight(gen, n)
                yield from flight.run(questions, builder(config, flight.backend))
            else:
                process = builder(config, gen)
                yield from map(process, questions)
        finally:
            self.call_counts = call_cache_counts(gen)
            self.backend_settings = gen.resolved_settings()
            if self.generator is None:
                gen.close()


def run_questions(
    qr: QuestionRun,
    config: ExperimentConfig,
    builder: Builder,
    desc: str,
    progress: bool,
    postfix: Callable[[QuestionRecord], dict[str, str]] | None,
    record_type: type[QuestionRecord],
    generator: ModelSource | None = None,
    on_record: Callable[[QuestionRecord], None] | None = None,
) -> Executor:
    """Process the pending questions with the configured executor; returns it, drained (its
    ``call_counts`` filled). A given ``generator`` (tests, Serve replicas) always runs here;
    ``on_record`` sees every record of the run (:meth:`QuestionRun.drain`)."""
    executor = (LocalExecutor(record_type, generator) if generator is not None
                else EXECUTORS.get(config.execution.executor)(record_type))
    qr.drain(executor.records(config, qr.pending(), builder), desc=desc, progress=progress, postfix=postfix,
             on_record=on_record, calls=isinstance(executor, LocalExecutor))  # Ray actors: Ray Data's own bars
    return executor


def short_of_top_k(records: Sequence[QuestionRecord], top_k: int) -> dict[str, int] | None:
    """``{passages: questions}`` over the questions that got fewer than ``top_k`` passages (None: none did)."""
    counts: dict[int, int] = {}
    for r in records:
        n = r.question.n_passages  # type: ignore[attr-defined]
        if n is not None and n < top_k:
            counts[n] = counts.get(n, 0) + 1
    return {str(n): counts[n] for n in sorted(counts)} or None


def _model_id(records: Sequence[QuestionRecord], config: ExperimentConfig) -> str:
    models = [r.model for r in records if r.model]
    return models[0] if models else config.generation.model


@dataclass(frozen=True)
class RunStart:
    """What a run is, known before its model loads: the run line a console prints first."""

    command: str
    n_questions: int
    n_resumed: int
    passages_from: str  # :func:`~ragray.retrieval.stage.describe_sources`
    model: str
    backend: str
    out: Path | None
    question_ids: tuple[str, ...] = ()  # the data set's, in its order


@dataclass(frozen=True)
class QuestionCommand:
    """A resumable per-question command (``ragray run``, ``ragray interpret``) as data: what runs
    per question and what the run writes. Calling it runs the command from start to end: open (or
    resume) the run directory, process the pending questions with the configured executor, write
    the record type's tables, ``summary.json`` (``summarize(records, config, model_id=...)`` plus
    the run's own counts) and the report, and record the run in the history database."""

    command: str
    record_type: type[QuestionRecord]
    builder: Builder
    #: ``summarize(records, config, model_id=...)``: the summary; the command fills its run footer
    summarize: Callable[..., RunSummary | FaithfulnessSummary]
    #: a fresh progress-bar postfix per call (it may keep running totals)
    postfix: Callable[[], Callable[[Any], dict[str, str]]] | None = None
    #: part -> schema where a table's columns depend on the config (``arms``: the measures)
    schemas: Callable[[ExperimentConfig], Mapping[str, pa.Schema]] | None = None
    #: ``prepare(config, dataset, given)``: keyword arguments the builder takes from the run's data
    #: set (``given``: the whole set, where it was given in memory; ``run``: the edit test's
    #: substitute pool); they travel with the builder, to Ray actors too
    prepare: Callable[[ExperimentConfig, Dataset, Dataset | None], Mapping[str, Any]] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "__doc__", self.doc)

    def __call__(
        self,
        config: ExperimentConfig,
        out: str | Path | None,
        *,
        resume: bool = False,
        progress: bool = True,
        generator: ModelSource | None = None,
        on_record: Callable[[QuestionRecord], None] | None = None,
        on_start: Callable[[RunStart], None] | None = None,
        dataset: Dataset | None = None,
    ) -> RunResult:
        """``dataset``: a data set given in memory (the Python API's rows) in place of
        ``config.data.path``. ``on_start`` hears what the run is before the model loads; ``on_record``
        sees every finished record (the resumed ones first). Interrupted (Ctrl-C, SIGTERM), the finished
        questions' tables, a summary marked ``partial`` and the report are written before the
        interrupt goes on."""
        start = time.perf_counter()
        checked = check_run_dir(config, out, resume=resume, command=self.command)  # a refused --out is not recorded
        with recorded_run(config, self.command, out) as recording:
            qr = open_checked_run(checked, config, record_type=self.record_type, dataset=dataset)
            config = resolve_decline(config, qr.dataset)  # the prompt says how to decline where the set needs it
            if on_start is not None:
                on_start(RunStart(self.command, len(qr.dataset.questions), qr.n_resumed,
                                  describe_sources(config.retrieval, qr.dataset), config.generation.model,
                                  config.generation.backend, qr.run.path,
                                  tuple(q.id for q in qr.dataset.questions)))
            postfix = self.postfix() if self.postfix else None
            inputs = self.prepare(config, qr.dataset, dataset) if self.prepare else {}
            builder = functools.partial(self.builder, **inputs) if inputs else self.builder
            began = time.perf_counter()
            try:
                executor = run_questions(qr, config, builder, self.command, progress, postfix, self.record_type,
                                         generator, on_record)
            except KeyboardInterrupt:
                # what finished stays readable: tables, a partial summary, the report — from the log on
                # disk, which holds a question the interrupt caught between its log line and the next
                qr.done.update({qid: self.record_type.from_dict(raw) for qid, raw in qr.log.load(repair=True).items()})
                if qr.done:
                    self.write(qr, config, None, start=start, loop_s=None, partial="interrupted")
                raise
            summary = self.write(qr, config, executor, start=start, loop_s=time.perf_counter() - began)
            recording.summary = summary.as_dict()
        return RunResult(qr.run.path, summary, qr.n_resumed, tuple(qr.records()),
                         qr.run.all_files() if qr.run.path is None else {}, qr.run.tables)

    def write(self, qr: QuestionRun, config: ExperimentConfig, executor: Executor | None, *, start: float,
              loop_s: float | None, partial: str | None = None) -> RunSummary | FaithfulnessSummary:
        """The finished questions' tables, ``summary.json`` and the report; ``partial`` (why the run
        stopped early) marks a summary over fewer questions than the run has."""
        records = qr.records()
        model_id = _model_id(records, config)
        schemas = self.schemas(config) if self.schemas else None
        write_record_tables(qr.run, self.record_type, records, schemas)  # type: ignore[arg-type]
        backend = GENERATORS.get(config.generation.backend)
        summary = replace(
            self.summarize(records, config, model_id=model_id),
            skipped_rows=len(qr.dataset.skipped), resumed_questions=qr.n_resumed,
            passages_from=describe_sources(config.retrieval, qr.dataset),
            short_of_top_k=short_of_top_k(records, config.retrieval.top_k),
            # this process's retrieval-cache and call-cache hits and misses
            cache={**qr.stage.cache_stats.as_dict(), **(executor.call_counts if executor else {})},
            backend_settings=(executor.backend_settings if executor else None) or None,
            resources=(executor.resources if executor else None) or None,
            placement=tuple(summarize_placements(r.worker for r in records if r.worker)) or None,
            simulated=backend.simulation_marker(config.generation.model) if backend.simulated else None,
            wall_seconds=time.perf_counter() - start,
            partial=None if partial is None else {"questions_done": len(records),
                                                  "questions": len(qr.dataset.questions), "why": partial},
        )
        if loop_s is not None:
            summary = _overlap_aware_rate(summary, loop_s, qr.n_resumed)
        qr.run.write_json("summary", summary.as_dict())
        write_report(qr.run)
        return summary

    def write_partial(self, out: str | Path) -> RunSummary | FaithfulnessSummary:
        """An interrupted run directory that holds finished questions but no summary (the process
        was killed before it could write one) made readable: its tables, a summary marked
        ``partial`` ("stopped") and the report, from ``config.yaml`` and ``progress.jsonl``."""
        config = read_saved_config(Path(out))
        qr = open_checked_run(check_run_dir(config, out, resume=True, command=self.command), config,
                              record_type=self.record_type)
        if not qr.done:
            raise InputError(f"{out}: the run finished no question yet (progress.jsonl is empty): nothing to show")
        return self.write(qr, resolve_decline(config, qr.dataset), None, start=time.perf_counter(), loop_s=None,
                          partial="stopped")


def _overlap_aware_rate(summary: Any, loop_s: float, resumed: int) -> Any:
    """``calls_per_second`` is calls over the questions' summed seconds: one question at a time
    that is the model's steady rate, but questions in flight overlap, and their summed seconds
    count the same wall time many times. Where the question loop's wall time gives the higher
    rate (overlap), that rate is the one recorded (not on a resumed run: its earlier calls were
    not made in this loop)."""
    rate = getattr(summary, "calls_per_second", None)
    calls = getattr(summary, "n_calls", 0)
    if rate is None or resumed or not calls or loop_s <= 0 or calls / loop_s <= rate:
        return summary
    return replace(summary, calls_per_second=calls / loop_s)
