"""Request and response bodies of the HTTP API (they are its OpenAPI schema).

Requests forbid unknown fields, so a misspelt option is a 422 naming it rather than silently
ignored. Field bounds that depend on the served config (``top_k_docs`` against
``serve.max_top_k``, ``random_repeats`` and ``k_values`` against ``serve.limits``, a retriever the
deployment does not know) are checked by the service and answered with 400.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragray.config.renamed import reading_old_names
from ragray.rows.audit import AuditEntry
from ragray.rows.faithfulness import ArmRow, CaseRow, CurveRow, FaithfulnessQuestionRow, UnitRow
from ragray.rows.influence import CallRow, PassageRow, QuestionRow
from ragray.rows.summaries import AuditSummary, FaithfulnessSummary, RunSummary, ScoreSummary

__all__ = [
    "RetrieveRequest", "GenerateRequest", "InfluenceRequest", "InterpretationRequest", "AuditRequest",
    "RunRequest", "HitOut", "RetrieveResponse", "GenerateResponse", "InfluenceResponse",
    "InterpretationResponse", "AuditResponse", "RunStatus", "Preset", "PresetRequest", "CleanupResponse",
    "Health", "ErrorBody", "RunKind", "RecordedStatus",
]

RunKind = Literal["run", "interpret", "audit", "score", "sweep", "trial"]  # ragray.store.history.RUN_KINDS
RecordedStatus = Literal["running", "done", "failed", "interrupted"]  # ragray.store.history.RUN_STATUSES
Question = Field(min_length=1, max_length=4000, description="the user question")
#: a run's summary: typed for run, interpret, audit and score; a sweep's or trial's leaderboard columns
RunSummaryBody = RunSummary | FaithfulnessSummary | AuditSummary | ScoreSummary | dict[str, Any]


def _bad_value(value: Any, where: str) -> str | None:
    """The first value in ``value`` (keys included) a request may not hold, as ``path: why``: a
    string with a lone UTF-16 surrogate (JSON's ``"\\ud800"``: no character, and no UTF-8
    encoding), or a number that is not finite (JSON's ``Infinity``/``NaN``, which Python reads)."""
    if isinstance(value, str):
        if any("\ud800" <= c <= "\udfff" for c in value):
            return f"{where}: invalid Unicode (a lone surrogate such as \\ud800 is no character)"
    elif isinstance(value, float):
        if not math.isfinite(value):
            return f"{where}: {value} is not a finite number"
    elif isinstance(value, dict):
        for k, v in value.items():
            found = _bad_value(k, f"{where} (a key)") or _bad_value(v, f"{where}.{k}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _bad_value(v, f"{where}[{i}]")
            if found:
                return found
    return None


class _Request(BaseModel):
    # JSON's Infinity/NaN (which Python's parser accepts) is no number a request may hold: 422
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _valid_values(self) -> _Request:
        for name in type(self).model_fields:
            problem = _bad_value(getattr(self, name), name)
            if problem:
                raise ValueError(problem)
        return self


class RetrieveRequest(_Request):
    question: str = Question
    retriever: str | None = Field(None, description="bm25 | dense | hybrid; default: the served config's")
    top_k_docs: int | None = Field(None, ge=1, description="passages to retrieve; default retrieval.top_k")
    rerank: bool | None = Field(None, description="rerank the first stage; default: on iff a reranker is configured")


class GenerateRequest(RetrieveRequest):
    passages: list[str] | None = Field(
        None, max_length=100, description="answer from these passages; omitted: retrieve them"
    )


class InfluenceRequest(RetrieveRequest):
    answers: list[str] = Field(default_factory=list, max_length=50, description="gold answers (optional)")
    answerable: bool | None = Field(
        None, description="false: the passages cannot answer the question, and the right response is to decline "
        "(the answer is judged by whether the model declined; its verdict reads 'unanswerable'); omitted: answerable")
    mode: Annotated[Literal["auto", "interactions", "loo", "logprob_share"] | None, reading_old_names("influence.mode")] = Field(
        None, description="influence.mode (the old names generate and logprob are read as loo and logprob_share until "
        "ragray 0.3.0)")
    position_control: Literal["none", "reversed", "shuffled"] | None = Field(
        None, description="influence.position_control: also run drop-one with the passages in this order"
    )
    debug: bool = Field(False, description="include every call's answer")

    @model_validator(mode="after")
    def _gold_or_unanswerable(self) -> InfluenceRequest:
        if self.answerable is False and self.answers:
            raise ValueError("answerable: false with gold answers: an unanswerable question has none")
        return self


class InterpretationRequest(RetrieveRequest):
    """The minimal request is ``{question, retriever, top_k_docs}``; every other field is optional and extends it."""

    answers: list[str] = Field(default_factory=list, max_length=50)
    explanation_level: Literal["passage", "sentence", "token"] | None = None
    hierarchical: bool | None = None
    explainer: Annotated[Literal["loo", "logprob_drop", "surrogate"] | None, reading_old_names("faithfulness.explainer")] = Field(
        None, description="faithfulness.explainer (the old name logprob is read as logprob_drop until ragray 0.3.0)")
    mode: Literal["generate", "logprob"] | None = None
    k_values: list[str] | None = Field(
        None, min_length=1, description="top-1, top-3, top-20%, cumulative, ... (at most the server's cap, "
        "serve.limits: 10 by default)"
    )
    random_repeats: int | None = Field(None, ge=2, description="faithfulness.random_repeats (at most the server's "
                                       "cap, serve.limits: 200 by default)")
    semantic_threshold_t: float | None = Field(None, ge=0, le=1)
    debug: bool = Field(False, description="include the answers and the removed units of every arm")


class AuditRequest(RetrieveRequest):
    relevant_ids: list[str] = Field(
        default_factory=list, max_length=1000, description="gold document ids; empty: UNSCORED"
    )
    k: int | None = Field(None, ge=1, description="documents audited; default audit.k")
    explain: bool = Field(False, description="aspects and an explanation from the generator")


class RunRequest(_Request):
    command: Literal["run", "interpret", "audit"]
    preset: str | None = Field(None, max_length=200, description="a name from GET /presets; default: the served config")
    overrides: list[str] = Field(default_factory=list, max_length=100, description="'a.b=value' config overrides")
    limit: int | None = Field(None, ge=1, description="first N questions only")


class HitOut(BaseModel):
    rank: int
    score: float
    passage_id: str
    doc_id: str
    title: str
    text: str


class RetrieveResponse(BaseModel):
    question: str
    retriever: str
    reranked: bool
    hits: list[HitOut]


class GenerateResponse(BaseModel):
    question: str
    answer: str
    model: str
    passages: list[str]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None = None


class InfluenceResponse(BaseModel):
    question: QuestionRow = Field(description="the run's questions-table row: answer, verdicts, quality")
    passages: list[PassageRow] = Field(description="the passages-table rows: rank, score, influence per passage")
    calls: list[CallRow] | None = Field(None, description="every call (debug)")
    model: str


class InterpretationResponse(BaseModel):
    question: FaithfulnessQuestionRow = Field(description="baseline answer, controls, agreement, cost")
    importances: list[UnitRow] = Field(description="units with importance, rank and bucket")
    cases: list[CaseRow] = Field(description="case A/B/C/inconclusive per K with its statistics")
    deletions: list[ArmRow] = Field(description="every arm: K, similarity, changed (answer and removed units: "
                                    "with debug, else null)")
    curves: list[CurveRow]
    model: str


class AuditResponse(BaseModel):
    audit: AuditEntry
    hits: list[HitOut]


class RunStatus(BaseModel):
    """A run from the history database: started over HTTP, from the CLI, or a sweep's trial."""

    run_id: str
    command: str = Field(description="the run's kind: run | interpret | audit | score | sweep | trial")
    status: Literal["running", "done", "failed", "interrupted", "incomplete"] = Field(
        description="interrupted: stopped by Ctrl-C or SIGTERM (resumable), or recorded as running but its "
                    "process is gone (killed, its machine lost)")
    out: str = Field(description="the run directory's name (under serve.runs_dir for runs started over HTTP); "
                     "the server's paths are not shown")
    questions_done: int = Field(description="finished questions in the run directory's progress.jsonl")
    summary: RunSummaryBody | None = Field(None, description="summary.json of the run (by its command)")
    error: str | None = None
    name: str | None = Field(None, description="the config's name")
    parent_id: str | None = Field(None, description="the sweep a trial belongs to")
    started_at: datetime | None = None
    finished_at: datetime | None = None
    seconds: float | None = Field(None, description="wall time from start to finish")


class FinishedQuestion(BaseModel):
    """One finished question of a run, as its tables will hold it: the question's row and its
    parts' rows (``passages`` for ``run``; ``units``, ``arms``, ``cases``, ``curves`` for
    ``interpret``). Model calls are left out (``calls.parquet`` once the run ends)."""

    question: dict[str, Any]
    parts: dict[str, list[dict[str, Any]]]


class Preset(BaseModel):
    name: str
    source: Literal["db", "file"] = Field(
        "file", description="saved in the history database (PUT /presets/{name}) or a YAML file of serve.presets_dir"
    )
    description: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    retriever: str | None = None
    rerank: str | None = None
    generator: str | None = None
    error: str | None = None


class PresetRequest(_Request):
    config: dict[str, Any] = Field(description="a ragray config mapping (as in a YAML file); unset keys take their defaults")
    description: str | None = Field(None, max_length=2000, description="omitted: keep the saved description")


class CleanupResponse(BaseModel):
    expired_count: int = Field(description="ephemeral indexes past their TTL")
    deleted_count: int = Field(description="of those, deleted now")
    errors: list[str] = Field(description="'path: reason' for each that could not be deleted (retried next time)")


class Health(BaseModel):
    status: Literal["ok"]
    model: str
    corpus_passages: int
    retrievers: list[str]
    reranker: str


class ErrorBody(BaseModel):
    error: str
    request_id: str
