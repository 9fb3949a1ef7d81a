"""Typed summaries: one frozen dataclass per ``summary.json`` (and per block that a reader uses).

A summary class is the single description of its JSON file: ``as_dict()`` gives the file's
content in its key order, ``from_dict()`` reads a file back (any ragray version: a key the file
lacks is ``None``, a key the class lacks is ignored), and pydantic reads the classes for the HTTP
response models. Blocks whose shape depends on the config or the data (the validity panel, per-K
statistics, method-pair agreement, the decision rule) stay JSON mappings, documented where made.

A field made with :func:`omitted_when_none` is left out of the file while it is ``None`` (the run
footer of a summary that was not made by a run, ``simulated`` of a run on a real model). Blocks
written flat into a summary (the run footer, the answer means of ``ragray score``) are base classes
listed *first* among the bases: a dataclass lists the fields of its last base first, so the
measures come before the footer in the file, as they always have.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ragray.rows.base import without_none

__all__ = [
    "AlignmentSummary",
    "AnswerMeans",
    "AnswerScores",
    "AuditSummary",
    "ControlsSummary",
    "DeletionCurveSummary",
    "FaithfulnessCost",
    "FaithfulnessMeasures",
    "FaithfulnessSummary",
    "MeanCI",
    "PositionSummary",
    "RunFooter",
    "SUMMARY_TYPES",
    "RunMeasures",
    "RunQuality",
    "RunSummary",
    "ScoreFacts",
    "ScoreSummary",
    "SkippedRow",
    "Summary",
    "omitted_when_none",
    "read_summary",
]

S = TypeVar("S", bound="Summary")
JSON = Mapping[str, Any]

_OMIT_NONE = "ragray_omit_none"


def omitted_when_none(**kwargs: Any) -> Any:
    """A field left out of the JSON form while it is ``None``."""
    return dataclasses.field(metadata={_OMIT_NONE: True}, **kwargs)


def _plain(value: Any) -> Any:
    if isinstance(value, Summary):
        return value.as_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _summary_class(hint: Any) -> type[Summary] | None:
    """The summary class a field holds (``X`` or ``X | None``), else None."""
    hint = without_none(hint)
    return hint if isinstance(hint, type) and issubclass(hint, Summary) else None


def _read(hint: Any, raw: Any) -> Any:
    """``raw`` (JSON) as the field type ``hint`` wants it: nested summaries built, lists as tuples."""
    sub = _summary_class(hint)
    if sub is not None:
        return sub.from_dict(raw) if isinstance(raw, Mapping) else raw
    if isinstance(raw, list):
        seq = without_none(hint)
        item = typing.get_args(seq)[0] if typing.get_origin(seq) is tuple else None
        return tuple(_read(item, v) for v in raw) if item is not None else tuple(raw)
    return raw


class Summary:
    """Base of the summary dataclasses (subclasses are ``@dataclass(frozen=True)``)."""

    @classmethod
    @functools.cache
    def _hints(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, in field order (an omitted field's ``None`` left out)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if not (value is None and f.metadata.get(_OMIT_NONE)):
                out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls: type[S], data: JSON) -> S:
        """The summary of a JSON form written by any ragray version (missing keys are ``None``)."""
        hints = cls._hints()
        return cls(**{f.name: _read(hints[f.name], data.get(f.name))
                      for f in dataclasses.fields(cls)})  # type: ignore[arg-type]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The JSON keys of this summary, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


Opt = float | None


@dataclass(frozen=True)
class MeanCI(Summary):
    """A mean over questions with its Student-t 95% interval (all ``None`` without values)."""

    mean: Opt
    low: Opt
    high: Opt


@dataclass(frozen=True)
class RunFooter(Summary):
    """What every resumable command appends to its summary, after the measures (a base class of
    :class:`RunSummary` and :class:`FaithfulnessSummary`; absent from a summary no run made)."""

    #: dataset rows skipped as bad (``data.on_bad_row: skip``)
    skipped_rows: int | None = omitted_when_none(default=None)
    #: questions a ``--resume`` kept
    resumed_questions: int | None = omitted_when_none(default=None)
    #: the run's cache hits and misses: retrieval stages, and model calls (on Ray, the actors' too)
    cache: Mapping[str, int] | None = omitted_when_none(default=None)
    #: the simulated design (scenario, seed, k, width, questions_per_scenario); absent for a real model
    simulated: Mapping[str, Any] | bool | None = omitted_when_none(default=None)
    wall_seconds: Opt = omitted_when_none(default=None)
    #: what the backend's ``auto`` settings became in this process (device, dtype, vLLM engine
    #: options, an endpoint's settled concurrency); on Ray each actor's are in ``placement``
    backend_settings: Mapping[str, Any] | None = omitted_when_none(default=None)
    #: on Ray: what each actor asked for (``auto`` resolved: count, cpus, gpus)
    resources: Mapping[str, Any] | None = omitted_when_none(default=None)
    #: on Ray: one entry per actor that made records (node, pid, GPU ids, CUDA_VISIBLE_DEVICES, device, questions)
    placement: tuple[Mapping[str, Any], ...] | None = omitted_when_none(default=None)
    #: where each question's passages came from, in words (:func:`ragray.retrieval.stage.describe_sources`)
    passages_from: str | None = omitted_when_none(default=None)
    #: questions that got fewer passages than ``retrieval.top_k``: ``{passages: questions}``
    short_of_top_k: Mapping[str, int] | None = omitted_when_none(default=None)
    #: the run stopped before its last question: ``{questions_done, questions, why}`` (why:
    #: ``interrupted`` — Ctrl-C or SIGTERM —, or ``stopped``: written later from its progress log);
    #: every figure is over the finished questions; ``--resume`` continues it
    partial: Mapping[str, Any] | None = omitted_when_none(default=None)


# --- ragray run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignmentSummary(Summary):
    """The tie-robust verdict over questions with some influence, and how many questions the
    original Spearman rule calls divergent that it clears."""

    n_scored: int
    misaligned_rate: Opt
    misalignment_threshold: float
    usage_ndcg: MeanCI
    rbo_alignment: MeanCI
    rbo_p: float
    top1_used_rate: Opt
    relies_on_lower_rank_rate: Opt
    mean_rho_ceiling: Opt
    divergent_not_misaligned: int
    divergent_not_misaligned_mean_rho_ceiling: Opt
    #: Wilson 95% interval of ``misaligned_rate``
    misaligned_ci95: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class PositionSummary(Summary):
    """Position control: how often influence followed the slot, and what the second order cost."""

    control: str
    n_scored: int
    position_driven_rate: Opt
    position_sensitivity: MeanCI
    control_calls: int
    control_call_share: Opt


@dataclass(frozen=True)
class AnswerScores(Summary):
    """Means of the answer-quality columns over the rows where each is defined (``n`` rows,
    ``n_with_gold`` of them with a gold answer)."""

    n: int
    n_with_gold: int
    em: Opt
    f1: Opt
    recall_at_k_cosine: Opt
    sim_answer_gold: Opt
    grounding: Opt
    relevance: Opt
    hallucination_rate: Opt


@dataclass(frozen=True)
class RunQuality(AnswerScores):
    """Answer quality of an influence run: the answer scores, cost, and label and causal noise."""

    cost_usd_total: Opt
    label_noise_ratio: Opt
    label_coverage: Opt
    causal_noise_ratio: Opt


@dataclass(frozen=True)
class RunMeasures(Summary):
    """``summary.json`` of ``ragray run`` (:func:`ragray.metrics.summary.summarize_run`).

    ``validity`` is the validity panel (:func:`ragray.metrics.validity.validity_panel`: its subsets
    and measures follow the data); ``error_questions`` lists ``{question_id, error}``."""

    n_questions: int
    n_measured: int
    states: Mapping[str, int]
    mean_spearman: Opt
    mean_spearman_ci95: tuple[Opt, Opt]
    median_spearman: Opt
    divergent_rate: Opt
    alignment: AlignmentSummary | None
    position: PositionSummary | None
    validity: Mapping[str, Any] | None
    mean_dominance: Opt
    flag_counts: Mapping[str, int]
    flag_rates: Mapping[str, Opt]
    baseline_exact_match: Opt
    quality: RunQuality
    n_calls: int
    n_failed_calls: int
    errors: int
    error_questions: tuple[Mapping[str, str], ...]
    calls_per_second: Opt
    mean_prompt_tokens: Opt
    mean_completion_tokens: Opt
    model: str | None
    backend: str | None
    template: str | None
    influence_mode: str | None
    influence_mode_requested: str | None
    influence_mode_note: str | None
    influence_mode_counts: Mapping[str, int] | None
    precision: str | None
    similarity: str | None
    retriever: str | None
    top_k: int | None
    divergence_threshold: Opt


@dataclass(frozen=True)
class RunSummary(RunFooter, RunMeasures):
    """``summary.json`` of ``ragray run``: the measures, then the run footer."""

    #: a run made from an uploaded file in the dashboard: ``{file, rows}``
    uploaded: Mapping[str, Any] | None = omitted_when_none(default=None)
    #: the statistics behind ``panel`` (:func:`ragray.metrics.evidence.evidence_panel`): gold
    #: metrics, and with checks top-k drop and LDS, per measure against every control
    evidence: Mapping[str, Any] | None = omitted_when_none(default=None)
    #: the one validity panel in plain words with its verdict (:func:`ragray.metrics.panel.validity_summary`)
    panel: Mapping[str, Any] | None = omitted_when_none(default=None)
    #: what the in-process engine did (:func:`ragray.generation.engine_counts.engine_summary`):
    #: forward passes, host waits, tokens computed against the exact-reuse minimum, padding
    engine: Mapping[str, Any] | None = omitted_when_none(default=None)


# --- ragray interpret ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ControlsSummary(Summary):
    """The faithfulness controls: parametric knowledge, the question's own weight, position."""

    parametric_rate: Opt
    closed_book_sim_mean: Opt
    del_q_sim_mean: Opt
    position_sensitive_rate: Opt
    move_start_sim_mean: Opt
    move_middle_sim_mean: Opt
    move_end_sim_mean: Opt


@dataclass(frozen=True)
class DeletionCurveSummary(Summary):
    """Mean areas under the deletion curves, and the paired test of least- against most-first."""

    auc_most_mean: Opt
    auc_least_mean: Opt
    least_vs_most: Mapping[str, Any] | None


@dataclass(frozen=True)
class FaithfulnessCost(Summary):
    """Per-question cost of the experiment (means over questions)."""

    calls_requested_per_question: Opt
    calls_generated_per_question: Opt
    score_passes_per_question: Opt
    explainer_calls_per_question: Opt
    explainer_calls_flat_per_question: Opt
    hierarchical_saving: Opt
    seconds_per_question: Opt


@dataclass(frozen=True)
class FaithfulnessMeasures(Summary):
    """``summary.json`` of ``ragray interpret`` (:func:`ragray.faithfulness.summary.summarize_faithfulness`).

    ``per_k`` maps each K label to its case shares and paired tests, ``agreement`` each pair of
    attribution methods to its mean Spearman and top-1 agreement, ``decision`` is the config's
    decision rule."""

    model: str | None
    backend: str | None
    level: str | None
    hierarchical: bool | None
    explainer: str | None
    mode: str | None
    similarity: str | None
    threshold_t: Opt
    random_repeats: int | None
    decision: Mapping[str, Any] | None
    n_questions: int
    n_failed: int
    per_k: Mapping[str, Any]
    controls: ControlsSummary | None
    deletion_curve: DeletionCurveSummary | None
    agreement: Mapping[str, Mapping[str, Opt]]
    cost: FaithfulnessCost | None


@dataclass(frozen=True)
class FaithfulnessSummary(RunFooter, FaithfulnessMeasures):
    """``summary.json`` of ``ragray interpret``: the measures, then the run footer."""


# --- ragray audit, ragray score ------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSummary(Summary):
    """``audit_report.json``'s summary: PASS/FAIL counts and the means over scored queries
    (``mean_coverage`` and ``mean_noise_ratio`` in percent)."""

    n_queries: int
    n_scored: int
    n_pass: int
    n_fail: int
    n_unscored: int
    pass_rate: Opt
    mean_score: Opt
    mean_coverage: Opt
    mean_precision: Opt
    mean_recall: Opt
    mean_noise_ratio: Opt
    hit_at_k: Opt
    mrr: Opt
    ndcg_at_10: Opt
    failing: tuple[str, ...]
    unscored: tuple[str, ...]
    #: the FAILs that missed a gold document, and those that retrieved every one and fail on the
    #: noise the formula charges for the other slots
    n_fail_missed: int
    n_fail_noise_only: int
    #: scored queries that cannot PASS at this k whatever is retrieved (fewer gold documents than
    #: k: the formula's best is below pass_score); while any is listed, the exit status is 1
    cannot_pass: tuple[str, ...]
    k: int | None
    pass_score: int | None
    retriever: str | None
    scope: str | None
    dataset: str | None
    skipped_rows: int | None = None
    wall_seconds: Opt = None
    #: with ``audit.llm``: the LLM steps' call-cache hits and misses
    cache: Mapping[str, int] | None = omitted_when_none(default=None)

    @property
    def exit_code(self) -> int:
        """0 when every scored query passes (and one was scored), 1 otherwise."""
        return 0 if self.n_scored > 0 and self.n_fail == 0 else 1


@dataclass(frozen=True)
class AnswerMeans(AnswerScores):
    """Means of the answer-quality columns (:func:`ragray.metrics.answers.summarize_answers`)."""

    latency_s: Opt
    prompt_tokens: Opt
    completion_tokens: Opt
    cost_usd_total: Opt


@dataclass(frozen=True)
class SkippedRow(Summary):
    """A record ``ragray score`` skipped: its line and why."""

    line: int | None
    reason: str | None


@dataclass(frozen=True)
class ScoreFacts(Summary):
    """What ``ragray score`` adds to the answer means: label noise, what was read, the thresholds."""

    label_noise_ratio: Opt = None
    n_with_gold_ids: int | None = None
    #: records whose answer contains a gold answer (of ``n_with_gold``), and the wrong ones split by
    #: whether a context held a gold answer (the generator missed it) or none did (retrieval did)
    n_correct: int | None = None
    #: records whose contexts contain a gold answer (the string rule beside recall_at_k_cosine)
    n_gold_in_context: int | None = None
    n_wrong_gold_in_context: int | None = None
    n_wrong_gold_not_in_context: int | None = None
    records: str | None = None
    skipped_rows: int | None = None
    skipped: tuple[SkippedRow, ...] = ()
    encoder: str | None = None
    tau_recall: Opt = None
    tau_h: Opt = None
    wall_seconds: Opt = None


@dataclass(frozen=True)
class ScoreSummary(ScoreFacts, AnswerMeans):
    """``summary.json`` of ``ragray score``: the answer means, then the run's facts."""


#: the summary class of each history kind whose summary is typed (sweeps and trials hold
#: leaderboard columns, which follow the search space)
SUMMARY_TYPES: dict[str, type[Summary]] = {
    "run": RunSummary, "interpret": FaithfulnessSummary, "audit": AuditSummary, "score": ScoreSummary,
}


def read_summary(kind: str, data: JSON) -> Summary | dict[str, Any]:
    """The typed summary of a run of ``kind`` from its JSON form (a sweep's or trial's: as is)."""
    summary_type = SUMMARY_TYPES.get(kind)
    return summary_type.from_dict(data) if summary_type else dict(data)
