"""Rows of ``ragray interpret``: ``questions``, ``units``, ``arms``, ``cases`` and ``curves``, and
the record of one question that the run log holds."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import pyarrow as pa

from ragray.config.renamed import REMOVED_IN
from ragray.rows.base import INT64, NOT_STORED, QuestionRecord, Row, doc

__all__ = ["ArmRow", "CaseRow", "CurveRow", "FaithfulnessQuestionRow", "FaithfulnessRecord", "UnitRow"]

_F = float | None
#: the doc of a column kept under an old measure name (ragray.config.renamed)
_OLD = f"the same as {{}} (the old name, kept until ragray {REMOVED_IN})"


@dataclass(frozen=True)
class FaithfulnessQuestionRow(Row):
    """One question of a faithfulness experiment: controls, agreement of the explainers, cost."""

    table = "questions"

    question_id: str
    question: str | None = None
    gold_answers: tuple[str, ...] | None = None
    baseline_answer: str | None = None
    level: Annotated[str | None, doc("explanation units: passage | sentence | token")] = None
    hierarchical: bool | None = None
    explainer: Annotated[str | None, doc("the attribution that ranks units: loo | logprob_drop | surrogate")] = None
    mode: Annotated[str | None, doc("generate | logprob")] = None
    n_passages: int | None = None
    n_units: int | None = None
    n_units_flat: int | None = None
    cases: Annotated[tuple[str, ...] | None, doc('"<k_label>:<case>" per K')] = None
    closed_book_answer: str | None = None
    closed_book_sim: _F = None
    parametric: Annotated[bool | None, doc("closed-book answer ≈ baseline (sim >= T)")] = None
    del_q_sim: _F = None
    top_passage_id: str | None = None
    move_start_sim: _F = None
    move_middle_sim: _F = None
    move_end_sim: _F = None
    position_sensitive: Annotated[bool | None, doc("moving the top passage changed the answer")] = None
    auc_most: Annotated[_F, doc("deletion-curve area (similarity vs fraction removed), most first")] = None
    auc_least: Annotated[_F, doc("deletion-curve area, least first")] = None
    rho_loo_logprob: Annotated[_F, doc(_OLD.format("rho_loo_logprob_drop"))] = None
    rho_loo_surrogate: Annotated[_F, doc("Spearman rho between two explainers' importances")] = None
    rho_logprob_surrogate: Annotated[_F, doc(_OLD.format("rho_logprob_drop_surrogate"))] = None
    top1_loo_logprob: Annotated[_F, doc(_OLD.format("top1_loo_logprob_drop"))] = None
    top1_loo_surrogate: Annotated[_F, doc("1 when two explainers agree on the top unit")] = None
    top1_logprob_surrogate: Annotated[_F, doc(_OLD.format("top1_logprob_drop_surrogate"))] = None
    explainer_calls: int | None = None
    calls_requested: int | None = None
    calls_generated: int | None = None
    score_passes: int | None = None
    error: str | None = None
    seconds: float | None = None
    rho_loo_logprob_drop: Annotated[_F, doc("Spearman rho between two explainers' importances")] = None
    rho_logprob_drop_surrogate: _F = None
    top1_loo_logprob_drop: Annotated[_F, doc("1 when two explainers agree on the top unit")] = None
    top1_logprob_drop_surrogate: _F = None


@dataclass(frozen=True)
class UnitRow(Row):
    """One explanation unit (passage, sentence or token) with its importance."""

    table = "units"

    question_id: str
    stage: int | None = None
    level: str | None = None
    unit_id: str | None = None
    unit_index: int | None = None
    passage_id: str | None = None
    retrieval_rank: int | None = None
    start: int | None = None
    end: int | None = None
    text: str | None = None
    importance: Annotated[_F, doc("by the configured explainer, normalized")] = None
    rank: int | None = None
    bucket: Annotated[str | None, doc("most | important | least")] = None
    importance_loo: _F = None
    importance_logprob: Annotated[_F, doc(_OLD.format("importance_logprob_drop"))] = None
    importance_surrogate: _F = None
    loo_change: Annotated[_F, doc("1 − sim of the leave-one-out answer")] = None
    logprob_drop: Annotated[_F, doc("nats lost by the baseline answer without this unit")] = None
    importance_logprob_drop: _F = None


@dataclass(frozen=True)
class ArmRow(Row):
    """One deletion arm or control: what was removed, the answer and how similar it stayed.

    ``similarities`` holds the configured answer comparisons (``faithfulness.measures``); the
    table stores each as a ``sim_<measure>`` column after ``logprob``.
    """

    table = "arms"

    question_id: str
    arm: str | None = None
    k_label: str | None = None
    k: int | None = None
    draw: int | None = None
    removed_unit_ids: tuple[str, ...] | None = None
    answer: Annotated[str | None, doc("null: scored, not generated")] = None
    similarity: _F = None
    changed: bool | None = None
    logprob: Annotated[_F, doc("log p(baseline answer | this context), when scored")] = None
    similarities: Annotated[dict[str, float | None], NOT_STORED, doc("answer similarity per configured "
                                                                      "measure (the sim_<measure> columns)")] = \
        dataclasses.field(default_factory=dict)
    latency_s: _F = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None

    @classmethod
    @functools.cache
    def arrow_schema_for(cls, measures: tuple[str, ...]) -> pa.Schema:
        """The ``arms`` schema with one ``sim_<measure>`` column per configured measure, where
        ``similarities`` stands."""
        fields: list[pa.Field] = []
        for f in cls.arrow_fields():
            fields += [pa.field(f"sim_{m}", pa.float64()) for m in measures] if f.name == "similarities" else [f]
        return pa.schema(fields)

    @classmethod
    def arrow_schema(cls) -> pa.Schema:
        raise TypeError("ArmRow's columns depend on the measures: use arrow_schema_for(measures)")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArmRow:
        sims = {k.removeprefix("sim_"): v for k, v in data.items() if k.startswith("sim_")}
        rest = {k: v for k, v in data.items() if not k.startswith("sim_")}
        if "similarities" in rest:
            raise ValueError("ArmRow: similarities come as sim_<measure> keys")
        return super().from_dict({**rest, "similarities": sims})

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in super().as_dict().items():
            if key == "similarities":
                out.update({f"sim_{m}": v for m, v in value.items()})
            else:
                out[key] = value
        return out


@dataclass(frozen=True)
class CaseRow(Row):
    """The case (A/B/C/inconclusive) of one question at one K, with its statistics."""

    table = "cases"

    question_id: str
    k_label: str | None = None
    k: int | None = None
    n_units: int | None = None
    population: Annotated[int | None, INT64, doc("subsets of size K: the random arm's population")] = None
    exhaustive: bool | None = None
    case: str | None = None
    reason: str | None = None
    random_mean: _F = None
    random_low: _F = None
    random_high: _F = None
    random_sd: _F = None
    n_random: int | None = None
    rank_p_most: _F = None
    sim_most: _F = None
    effect_most: _F = None
    status_most: str | None = None
    sim_least: _F = None
    effect_least: _F = None
    status_least: str | None = None
    p_most_below: _F = None
    p_most_above: _F = None
    p_least_below: _F = None
    p_least_above: _F = None
    changed_most: bool | None = None
    changed_least: bool | None = None
    changed_random: bool | None = None
    random_changed_share: _F = None
    random_median: Annotated[float | None, doc("median similarity of the random draws (the verdict's test until 2026-11-28)")] = None
    by_construction: Annotated[bool | None, doc("the test re-measures what the explainer ranked by (loo at K = 1; "
                                                "an explainer fitted on this K's own random draws): left out of "
                                                "the verdict")] = None


@dataclass(frozen=True)
class CurveRow(Row):
    """One point of a cumulative deletion curve."""

    table = "curves"

    question_id: str
    order: Annotated[str | None, doc("CUM_MOST | CUM_LEAST")] = None
    k: int | None = None
    fraction: _F = None
    similarity: _F = None


@dataclass(frozen=True)
class FaithfulnessRecord(QuestionRecord):
    """One finished question of a faithfulness experiment: what ``progress.jsonl`` holds per line."""

    parts = {"units": UnitRow, "arms": ArmRow, "cases": CaseRow, "curves": CurveRow}
    question_type = FaithfulnessQuestionRow

    question: FaithfulnessQuestionRow
    units: tuple[UnitRow, ...] = ()
    arms: tuple[ArmRow, ...] = ()
    cases: tuple[CaseRow, ...] = ()
    curves: tuple[CurveRow, ...] = ()
    model: str | None = None
    worker: dict[str, Any] | None = None  # where it ran (Ray executor): node id and pid
