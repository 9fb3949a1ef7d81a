"""ragray in a notebook: one question or many, DataFrames in and out, the user's own retriever.

    import ragray
    r = ragray.attribute("When was the lighthouse first lit?", passages, answers=["1871"])
    r.passages                      # table: text, title, rank, influence, used, log-prob drop
    r.passages.to_pandas()          # ... as a DataFrame
    run = ragray.run(df, limit=20)  # .questions / .passages / .calls tables, .summary, .report()
    run.save("runs/mine")           # nothing is written (and no history recorded) until asked

Every function builds an :class:`~ragray.config.ExperimentConfig` from ``config`` (a YAML path or a
config object), the flag-like keywords of the CLI (``model``, ``backend``, ``top_k``, ``mode``,
``dtype``, ``retriever``, ``limit``, ``position_control`` ...) and ``settings`` (dotted keys), and
calls the same pipeline as the CLI (:mod:`ragray.pipeline`). Rows given in memory reach the pipeline
as a data set object (:mod:`ragray.data.given`); without ``out`` the run is kept in memory too (its
tables as the Arrow tables the pipeline built, :mod:`ragray.api_tables`; its summary and report as
the files a run directory would hold, written only by ``Run.save``), and the history database is
left alone. DataFrames are built only when asked for (``run.passages.to_pandas()``), so ``run`` and
``attribute`` need no pandas. A model object already loaded (a transformers model with its tokenizer,
or a ragray generator) is used as it is: nothing loads twice; the call cache is off for it (its
weights may change in the notebook without a file to fingerprint).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragray.api_inputs import passage_dicts, question_records, retrieve_with
from ragray.errors import InputError

__all__ = ["Attribution", "Run", "attribute", "audit_retrieval", "clear_models", "interpret", "load_run", "run", "run_retriever", "score"]

#: the CLI flags a keyword may name (``mode`` is the influence mode, as ``ragray run --mode``)
_KEYWORD_FLAGS = ("model", "backend", "dtype", "top_k", "retriever", "scope", "position_control", "limit",
                  "executor", "address", "corpus", "columns")


def _keyword_settings() -> dict[str, str]:
    """keyword -> setting, from the CLI's own flag map (one list of what each name means)."""
    from ragray.shortcuts import FLAG_SETTINGS

    return {**{k: FLAG_SETTINGS[k] for k in _KEYWORD_FLAGS}, "mode": FLAG_SETTINGS["influence_mode"]}


class _Html:
    """Shown as HTML by Jupyter; ``str()`` is the HTML."""

    def __init__(self, html: str) -> None:
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"<HTML, {len(self.html) // 1024} KiB: shown as a page in a notebook; str() is the HTML>"


def _table(name: str, doc: str) -> property:
    """A declared table of :class:`Run` (``run.questions`` ...), read through :meth:`Run.table`."""
    return property(lambda self: self.table(name), doc=doc)


@dataclass
class Run:
    """A finished run: its tables (``run.questions``, ``run.passages``, ``run.calls``; ``run.tables``
    has them all; each a :class:`~ragray.api_tables.Table`, ``.to_pandas()`` for a DataFrame),
    ``summary`` (``summary.json``), ``report()`` and ``save(out)``. ``path`` is its run directory,
    None while it lives only in memory."""

    kind: str
    summary: dict[str, Any]
    tables: Mapping[str, Any]
    files: dict[str, bytes] = field(repr=False)
    path: Path | None = None
    #: the pipeline's own typed result (summary record and question records): what the CLI and the
    #: HTTP API print and serve from, so they take this same path
    result: Any = field(default=None, repr=False)

    def table(self, name: str) -> Any:
        """The table ``name`` (:class:`AttributeError` naming the tables this run has)."""
        if name in self.tables:
            return self.tables[name]
        raise AttributeError(f"this {self.kind} run has no table {name!r} (tables: {', '.join(sorted(self.tables))})")

    # every table a run can have, declared (an editor completes them; absent ones say which exist)
    questions = _table("questions", "one row per question (every kind)")
    passages = _table("passages", "ragray.run: one row per (question, passage)")
    calls = _table("calls", "ragray.run: one row per model call")
    subsets = _table("subsets", "ragray.run: every scored context beyond drop-one")
    checks = _table("checks", "ragray.run with influence.check_*: top-k drop and LDS")
    units = _table("units", "ragray.interpret: each unit's importance")
    arms = _table("arms", "ragray.interpret: each deletion and its answer")
    cases = _table("cases", "ragray.interpret: Case A/B/C per question and k")
    curves = _table("curves", "ragray.interpret: the deletion curves")
    audit = _table("audit", "ragray.audit_retrieval: one row per query")
    scores = _table("scores", "ragray.score: one row per answer")
    hits = _table("hits", "retrieval: one row per hit")

    def report(self) -> _Html:
        """The run's report (what ``report.html`` holds), shown inline in a notebook."""
        html = self.files.get("report.html")
        if html is None:
            raise InputError("this run has no report.html")
        return _Html(html.decode("utf-8"))

    def save(self, out: str | Path) -> Path:
        """Write the run directory to ``out`` (tables as Parquet and CSV, summary, config, report,
        the progress log that ``--resume`` reads); returns its path."""
        target = Path(out)
        if target.exists() and any(target.iterdir()) and target.resolve() != (self.path or Path()).resolve():
            raise InputError(f"out: {target} exists and is not empty")
        target.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (target / name).write_bytes(data)
        self.path = target
        return target

    def __repr__(self) -> str:
        n = self.summary.get("n_questions", self.summary.get("n", "?"))
        return (f"Run(kind={self.kind!r}, questions={n}, tables=[{', '.join(sorted(self.tables))}], "
                f"path={str(self.path) if self.path else None!r})")

    def _answer(self) -> str | None:
        """What an interpret, audit or score run answers first, as its console prints it."""
        s = self.summary
        if self.kind == "interpret" and s.get("per_k"):
            from ragray.report.interpret_console import headline

            return headline(s["per_k"])
        if self.kind == "audit" and s.get("summary"):
            from ragray.report.audit_console import causes_line
            from ragray.rows.summaries import AuditSummary

            a = AuditSummary.from_dict(s["summary"])
            return (f"{a.n_pass}/{a.n_scored} PASS; " + (causes_line(a) if a.n_fail else "no FAIL")
                    + f"; {len(a.cannot_pass)} queries cannot PASS at top-{a.k} whatever is retrieved")
        if self.kind == "score" and s.get("n_with_gold"):
            from ragray.report.run_console import score_headline
            from ragray.rows.summaries import ScoreSummary

            return score_headline(ScoreSummary.from_dict(s))
        return None

    def _repr_html_(self) -> str:
        from ragray.report.page import esc

        s = self.summary
        a = s.get("alignment") or {}
        panel = s.get("panel") or {}
        lines = [f"<b>ragray {esc(self.kind)}</b>: {s.get('n_questions', s.get('n', '?'))} questions"
                 + (f", {esc(s.get('model'))}" if s.get("model") else "")]
        if a.get("n_scored"):
            lines.append(f"misaligned {a['misaligned_rate']:.0%} of {a['n_scored']} questions (usage nDCG &lt; "
                         f"{a['misalignment_threshold']:g})")
        if panel:
            # the console and the report print the panel's numbers below its sentence; this card does not
            sentence = esc(panel["sentence"]).replace("the numbers below are", "the numbers (in <code>.report()</code>) are")
            lines.append(f"validity against gold passages: <b>{esc(panel['verdict'])}</b> — {sentence}")
        if answer := self._answer():
            lines.append(esc(answer))
        lines.append(f"tables: {', '.join(sorted(self.tables))}; <code>.report()</code> shows the report")
        return "<div>" + "<br>".join(lines) + "</div>"


@dataclass
class Attribution:
    """One question's answer and which passages it used (:func:`attribute`)."""

    question: str
    answer: str
    correct: bool | None
    verdict: str
    misaligned: bool | None
    usage_ndcg: float | None
    passages: Any  # a Table, in retrieval order (.to_pandas() for a DataFrame)
    run: Run

    def _repr_html_(self) -> str:
        from ragray.report.questions import question_card
        from ragray.report.rundata import clean

        run = self.run  # as the report reads a run: NaN as missing
        return question_card(clean(run.questions[0]), clean(run.passages.to_pylist()), clean(run.calls.to_pylist()))

    def __repr__(self) -> str:
        from ragray.report.run_console import group_words, used_groups

        names = "; ".join(group_words(e, 40) for e in used_groups(self.passages.to_pylist()))
        mark = {True: "correct", False: "wrong", None: "no gold"}[self.correct]
        return f"Attribution(answer={self.answer!r} [{mark}], used: {names or 'none'}; {self.verdict})"


def _config(config: Any, settings: Mapping[str, Any] | None, keywords: Mapping[str, Any]) -> Any:
    from ragray.config import ExperimentConfig, load_config

    known = _keyword_settings()
    unknown = sorted(set(keywords) - set(known))
    if unknown:
        raise InputError(f"unknown keyword(s) {', '.join(unknown)}: use {', '.join(sorted(known))}, or "
                         "settings={'section.key': value} for any other setting")
    values = {known[k]: v for k, v in keywords.items() if v is not None}
    values.update(settings or {})
    if isinstance(config, ExperimentConfig):
        if not values:
            return config  # as given (the CLI's and the HTTP API's validated config)
        base = config.model_dump(mode="json")
        from ragray.config import apply_overrides, validate_config

        return validate_config(apply_overrides(base, [], values), where="config")
    return load_config(config, [], values)


def _generator(model: Any, tokenizer: Any, config: Any) -> Any:
    """A loaded model as ragray's generator (None for a name or path: the config loads it)."""
    if model is None or isinstance(model, (str, Path)):
        return None
    from ragray.generation.base import Generator

    if isinstance(model, Generator):
        return model
    if hasattr(model, "generate") and hasattr(model, "config"):  # a transformers model
        if tokenizer is None:
            raise InputError("model: a transformers model needs its tokenizer: attribute(..., model=m, tokenizer=tok)")
        from ragray.generation.transformers.backend import TransformersGenerator

        device = str(next(model.parameters()).device)
        name = getattr(model.config, "_name_or_path", "") or type(model).__name__
        gen = TransformersGenerator(model.eval(), tokenizer, config.generation, path=name, device=device)
        gen.model_path = None  # no files to fingerprint: its answers are not cached
        return gen
    raise InputError(f"model: expected a model name or path, a transformers model (with tokenizer=) or a ragray "
                     f"Generator, got {type(model).__name__}")


def _kept(cfg: Any) -> Any:
    """What gives the configured model, loaded once per process and kept
    (:mod:`ragray.generation.kept`), behind the call cache as a command would open it, when the
    first question needs it (a bad dataset or run folder fails before any load); None where the
    backend loads per call."""
    from ragray.generation.kept import can_keep, kept_generator
    from ragray.pipeline.generators import open_generator

    if not can_keep(cfg.generation):
        return None
    return lambda: open_generator(cfg, kept_generator(cfg.generation))


def clear_models() -> int:
    """Free the models ``ragray.run`` / ``attribute`` / ``interpret`` kept loaded in this process
    (they load once and are reused by later calls; at most two stay loaded, a third lets go of
    the one used longest ago); returns how many were freed."""
    from ragray.generation.kept import clear_models as clear

    return clear()


def _run(files: Mapping[str, bytes], kind: str, built: Mapping[str, Any] | None = None) -> Run:
    """A run from its files (a folder's, or an in-memory run's, with the tables it ``built``)."""
    from ragray.api_tables import Tables

    files = dict(sorted(files.items()))
    summary_name = "audit_report.json" if "audit_report.json" in files else "summary.json"
    summary = json.loads(files[summary_name]) if summary_name in files else {}
    return Run(kind, summary, Tables(built or {}, files), files)


def load_run(path: str | Path) -> Run:
    """A run directory (``ragray run``/``interpret``/``audit``/``score`` output) as a :class:`Run`."""
    folder = Path(path)
    if not (folder / "summary.json").is_file() and not (folder / "audit_report.json").is_file():
        from ragray.pipeline import open_stopped_run

        if not open_stopped_run(folder):
            raise InputError(f"path: {folder} is not a ragray run directory (no summary.json)")
    kinds = {"arms.parquet": "interpret", "audit_report.json": "audit", "scores.parquet": "score",
             "passages.parquet": "run"}
    kind = next((k for name, k in kinds.items() if (folder / name).is_file()), "run")
    from ragray.store.rundir import read_files

    out = _run(read_files(folder), kind)
    out.path = folder
    return out


@dataclass(frozen=True)
class Watch:
    """A caller's hooks on a per-question run: each finished question's rows, and the run's start."""

    on_question: Callable[[dict[str, Any]], None] | None = None
    on_start: Callable[[Any], None] | None = None

    def hooks(self) -> dict[str, Any]:
        """The pipeline's ``on_record`` / ``on_start`` for these hooks (records as table rows)."""
        out: dict[str, Any] = {}
        if self.on_question is not None:
            hear = self.on_question
            out["on_record"] = lambda record: hear(question_rows(record))
        if self.on_start is not None:
            out["on_start"] = self.on_start
        return out


def _notebook_watch(kind: str, watch: Watch | None) -> Watch | None:
    """In a notebook, a ``run`` the caller does not watch shows its table growing as questions finish."""
    if kind != "run" or (watch is not None and (watch.on_question or watch.on_start)):
        return watch
    from ragray.report.notebook_live import NotebookLive, in_notebook

    if not in_notebook():
        return watch
    live = NotebookLive()
    return Watch(live.question, live.start)


def question_rows(record: Any) -> dict[str, Any]:
    """One finished question's rows, as the run's tables hold them: ``question`` and one list per part."""
    return {"question": record.question.as_dict(),
            **{name: [row.as_dict() for row in getattr(record, name)] for name in record.parts}}


def _execute(kind: str, data: Any, config: Any, out: str | Path | None, history: bool | None, progress: bool,
             model: Any, tokenizer: Any, settings: Mapping[str, Any] | None, keywords: dict[str, Any],
             resume: bool = False, watch: Watch | None = None) -> Run:
    """Build the config, hand ``data``'s rows to the pipeline as a data set object, run the
    pipeline's ``kind`` in ``out`` or, without ``out``, in memory (``resume``: continue the run
    ``out`` holds), and return the result with its files and tables."""
    from ragray.data.given import ROWS_FILE, keep_rows, rows_jsonl
    from ragray.store.rundir import read_files

    if resume and out is None:
        raise InputError("resume: needs out, the run directory to continue")
    if history and out is None:
        raise InputError("history=True records a run with its folder: give out (a run in memory is not recorded)")
    if progress:
        from ragray.console import show_loads

        show_loads()
        watch = _notebook_watch(kind, watch)
    extra: dict[str, Any] = dict(settings or {})
    if isinstance(model, (str, Path)):
        keywords["model"] = str(model)
    rows = None
    if data is not None and not isinstance(data, (str, Path)):
        rows = question_records(data, keep_answer=kind == "score", columns=keywords.pop("columns", None))
    given = rows is not None and kind != "score"  # score takes its rows as they are (the outputs to score)
    if given:
        # the config names the file the run keeps the rows in: with out, written there first (a
        # resume, here or from the command line, reads the same); without, among the run's files
        extra.setdefault("data.path", str(keep_rows(Path(out).resolve(), rows, resume=resume))
                         if out is not None else ROWS_FILE)
        if any("passages" in r for r in rows) and "retriever" not in keywords:
            # the passages the user's retriever returned, in its order: measure those
            extra.setdefault("retrieval.retriever", "given")
            extra.setdefault("retrieval.scope", "per_question")
    elif data is not None and kind != "score":
        extra.setdefault("data.path", str(data))
    if out is None or history is False:
        extra["history.record"] = False
    cfg = _config(config, extra, keywords)
    generator = _generator(model, tokenizer, cfg)
    needs_model = kind in ("run", "interpret") or (kind == "audit" and cfg.audit.llm)
    if generator is None and needs_model and cfg.execution.executor == "local":
        generator = _kept(cfg)
    if kind == "score":
        inputs: Any = rows if rows is not None else (Path(data) if data is not None else None)
    else:
        from ragray.data.records import rows_dataset

        inputs = rows_dataset(rows, on_bad_row=cfg.data.on_bad_row) if given else None
    done = _dispatch(kind, cfg, Path(out) if out is not None else None, inputs, progress, generator, resume, watch)
    if out is not None:
        result = _run(read_files(Path(out)), kind)
    else:  # in memory: the tables as built; given rows kept beside the run (a saved run re-runs and resumes)
        result = _run({**done.files, **({ROWS_FILE: rows_jsonl(rows)} if given else {})}, kind, done.tables)
    result.result = done
    result.path = Path(out) if out is not None else None
    return result


def _dispatch(kind: str, cfg: Any, target: Path | None, inputs: Any, progress: bool, generator: Any,
              resume: bool, watch: Watch | None = None) -> Any:
    """The pipeline's ``kind`` into ``target`` (None: in memory, the files on the result); ``inputs``:
    the data set given in memory (None: the config's), or, for ``score``, the outputs to score."""
    from ragray import pipeline

    hooks = watch.hooks() if watch is not None else {}
    if kind == "run":
        return pipeline.run_influence(cfg, target, resume=resume, progress=progress, generator=generator,
                                      dataset=inputs, **hooks)
    if kind == "interpret":
        return pipeline.run_interpret(cfg, target, resume=resume, progress=progress, generator=generator,
                                      dataset=inputs, **hooks)
    if kind == "audit":
        return pipeline.run_audit(cfg, target, progress=progress, generator=generator, dataset=inputs)
    if inputs is None:
        raise InputError("data: score needs the pipeline's outputs (rows with question and answer, or a file)")
    return pipeline.run_score(cfg, inputs, target)


def run(data: Any = None, *, config: Any = None, out: str | Path | None = None, history: bool | None = None,
        progress: bool = True, model: Any = None, tokenizer: Any = None, settings: Mapping[str, Any] | None = None,
        resume: bool = False, on_question: Callable[[dict[str, Any]], None] | None = None,
        on_start: Callable[[Any], None] | None = None, **keywords: Any) -> Run:
    """Which passages each answer used (``ragray run``). ``data``: a DataFrame or list of dicts
    (``question``; optional ``id``, ``answers``, ``passages`` — then those passages, in that order,
    are what is measured — and ``gold_passage_ids``), a dataset path or name, or None for the demo.
    ``resume=True`` continues the run in ``out`` (its finished questions are kept, not rerun).
    ``on_question(rows)`` is called as each question finishes (the resumed ones first) with its
    rows: ``{"question": {...}, "passages": [...], ...}``, the columns of the run's tables;
    ``on_start(info)`` before the model loads, with what the run is (questions, passages, model)."""
    return _execute("run", data, config, out, history, progress, model, tokenizer, settings, keywords, resume,
                    Watch(on_question, on_start))


def interpret(data: Any = None, *, config: Any = None, out: str | Path | None = None, history: bool | None = None,
              progress: bool = True, model: Any = None, tokenizer: Any = None,
              settings: Mapping[str, Any] | None = None, resume: bool = False,
              on_question: Callable[[dict[str, Any]], None] | None = None,
              on_start: Callable[[Any], None] | None = None, **keywords: Any) -> Run:
    """Are the explanations faithful (``ragray interpret``); arguments as :func:`run`."""
    return _execute("interpret", data, config, out, history, progress, model, tokenizer, settings, keywords,
                    resume, Watch(on_question, on_start))


def audit_retrieval(data: Any = None, *, config: Any = None, out: str | Path | None = None, history: bool | None = None,
          progress: bool = True, model: Any = None, settings: Mapping[str, Any] | None = None,
          **keywords: Any) -> Run:
    """Is retrieval trustworthy (``ragray audit``; not ``ragray.audit``, the package of the audit
    itself): coverage, noise and PASS/FAIL per query;
    ``data`` as :func:`run` (rows with ``question`` and ``gold_passage_ids``, or a dataset)."""
    return _execute("audit", data, config, out, history, progress, model, None, settings, keywords)


def score(data: Any, *, config: Any = None, out: str | Path | None = None, history: bool | None = None,
          settings: Mapping[str, Any] | None = None, **keywords: Any) -> Run:
    """Answer quality of a pipeline's own outputs (``ragray score``): rows with ``question`` and
    ``answer`` (optional ``answers`` gold, ``passages``), or a records file."""
    return _execute("score", data, config, out, history, False, None, None, settings, keywords)


def attribute(question: str, passages: Iterable[Any], *, answers: Iterable[str] | str | None = None,
              gold_passage_ids: Iterable[str] | None = None, config: Any = None, model: Any = None,
              tokenizer: Any = None, settings: Mapping[str, Any] | None = None, progress: bool = True,
              **keywords: Any) -> Attribution:
    """Which of ``passages`` (in retrieval order; strings, dicts, LangChain Documents, LlamaIndex
    nodes) the model's answer to ``question`` used: the answer, whether it contains a gold answer,
    a DataFrame of the passages with their influence, and the verdict (shown as a card).
    ``progress``: a bar of the question's model calls (a widget in a notebook)."""
    from ragray.report.run_console import verdict_words

    if not isinstance(question, str) or not question.strip():
        raise InputError("question must be a non-empty string")
    rows = passage_dicts(passages)
    record = {"id": "q1", "question": question, "passages": rows,
              "answers": [answers] if isinstance(answers, str) else list(answers or [])}
    if gold_passage_ids is not None:
        record["gold_passage_ids"] = list(gold_passage_ids)
    keywords.setdefault("top_k", len(rows))
    result = run([record], config=config, model=model, tokenizer=tokenizer, settings=settings, progress=progress,
                 **keywords)
    from ragray.api_tables import Table
    from ragray.report.rundata import clean

    q = clean(result.questions[0])  # NaN as missing (None), as the card and the console read it
    cols = ["retrieval_rank", "passage_id", "title", "text", "influence", "used", "group", "relation", "credit",
            "keep_alone_gain", "logprob_drop", "retrieval_score", "is_gold"]
    arrow = result.passages.to_arrow().sort_by("retrieval_rank")
    table = Table("passages", arrow.select([c for c in cols if c in arrow.column_names]))
    return Attribution(question, q.get("baseline_answer") or "", q.get("answer_correct"), verdict_words(q),
                       q.get("misaligned"), q.get("usage_ndcg"), table, result)


def run_retriever(retriever: Any, questions: Any, *, k: int | None = None, **kwargs: Any) -> Run:
    """:func:`run` on what the user's own retriever returns: a LangChain retriever, a LlamaIndex
    retriever or query engine, or a callable. ``questions``: strings, or rows with ``question``
    (and ``answers``). Each question is retrieved once; those passages, in that order, are measured.
    ``limit``: the first N questions only (the others are not retrieved either)."""
    rows = [{"question": q} if isinstance(q, str) else dict(q) for q in
            (questions.to_dict("records") if hasattr(questions, "to_dict") else questions)]
    if kwargs.get("limit"):
        rows = rows[: kwargs["limit"]]
    for row, got in zip(rows, retrieve_with(retriever, [r.get("question") for r in rows], k)):
        row["passages"] = got
    kwargs.setdefault("top_k", max((len(r["passages"]) for r in rows), default=1) or 1)
    return run(rows, **kwargs)
