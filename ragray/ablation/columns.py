"""The columns of one question's rows in ``ragray run``'s tables: its answer's marks, the
measurements beyond drop-one's influence, which passages were used, one ``calls`` row per arm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragray.ablation.plan import Arm
from ragray.attribution.base import Fitted
from ragray.attribution.interactions import Interactions
from ragray.config import InfluenceConfig
from ragray.data.answerable import is_unanswerable
from ragray.generation import Generation
from ragray.metrics.answers import contains_gold
from ragray.metrics.declines import is_decline
from ragray.metrics.similarity import normalize_answer
from ragray.metrics.used import used_marks
from ragray.rows.influence import CallRow, CheckRow, SubsetRow
from ragray.types import Question

__all__ = ["QuestionEvidence", "answer_columns", "call_row", "drop_influence", "exact_match_or_none", "finite",
           "used_passages"]


def exact_match_or_none(answer: str, gold: tuple[str, ...]) -> float | None:
    if not gold:
        return None
    return float(any(normalize_answer(answer) == normalize_answer(g) for g in gold))


def call_row(question_id: str, arm: Arm, g: Generation | None, similarity: float) -> CallRow:
    """One ``calls`` row; ``g`` is None for an arm that was scored (log-prob mode), not generated."""
    return CallRow(
        question_id=question_id,
        arm=arm.name,
        removed_passage_ids=tuple(arm.removed),
        answer=g.text if g else None,
        similarity=similarity,
        latency_s=g.latency_s if g else None,
        prompt_tokens=g.prompt_tokens if g else None,
        completion_tokens=g.completion_tokens if g else None,
        tokens=g.prompt_tokens + g.completion_tokens if g else None,
        error=g.error if g else None,
    )


def answer_columns(q: Question, answer: str | None) -> dict[str, Any]:
    """Whether the question can be answered from its set, whether the model declined, and whether
    the answer is right: a gold answer contained, or on an unanswerable question a decline. (An
    unanswerable question has no alignment verdict: ``analyze_influence(judged=False)``.)"""
    unanswerable = is_unanswerable(q)
    declined = is_decline(answer) if answer is not None else None
    correct = declined if unanswerable else (contains_gold(answer, q.answers) if answer is not None else None)
    return {"answer_correct": correct, "answerable": False if unanswerable else (True if q.answers else None),
            "declined": declined}


@dataclass
class QuestionEvidence:
    """One question's measurements beyond drop-one's influence (:meth:`InfluenceLoop._evidence`)."""

    answer: str | None = None
    tokens: int | None = None
    logprob_all: float | None = None
    drops: list[float] | None = None
    jsd: list[float] | None = None
    logprob_none: float | None = None
    context_dependent: bool | None = None
    random: list[float] | None = None
    check_passes: int | None = None
    seconds_checks: float | None = None
    subsets: list[SubsetRow] = field(default_factory=list)
    checks: list[CheckRow] = field(default_factory=list)
    #: the run's measure's result, and its fitted model where it fits one (used marks, groups)
    result: Fitted | None = None
    fit: Interactions | None = None
    #: passages-table columns the measures that ran filled (``surrogate_weight``), by column
    columns: dict[str, list[float]] = field(default_factory=dict)
    #: the contexts each measure of its own contexts scored, and the seconds its fit took, by measure
    passes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    decline_margin: float | None = None

    def question_columns(self, span: str, ranks: Sequence[int] | None = None) -> dict[str, Any]:
        """The question's columns; ``ranks``: the passages' retrieval ranks (``carried_by`` names them)."""
        if self.answer is None:
            return {}
        return {"answer_span": span, "scored_answer": self.answer, "scored_tokens": self.tokens,
                "logprob_all": finite(self.logprob_all), "logprob_none": finite(self.logprob_none),
                "context_dependent": self.context_dependent, "surrogate_passes": self.passes.get("surrogate"),
                "check_passes": self.check_passes, "seconds_surrogate": self.seconds.get("surrogate"),
                "seconds_checks": self.seconds_checks, "decline_margin": finite(self.decline_margin)} | (
                {} if self.fit is None else {
                "noise_scale": self.fit.noise, "used_bar": self.fit.bar,
                "carried_by": [ranks[i] if ranks is not None else i + 1 for i in self.fit.carried_by] or None})

    def fit_columns(self, i: int) -> dict[str, Any]:
        f = self.fit
        if f is None:
            return {}
        return {"keep_alone_gain": finite(f.keep_alone[i]), "credit": f.credit[i], "group": f.group[i],
                "relation": f.relation[i]}

    def passage_columns(self, i: int) -> dict[str, float | None]:
        if self.drops is None:
            return {}
        drop = self.drops[i]
        per_token = drop / self.tokens if self.tokens and not math.isnan(drop) else None
        return {"logprob_drop": drop, "logprob_drop_per_token": per_token,
                "jsd": self.jsd[i] if self.jsd is not None else None,
                "surrogate_weight": self.columns["surrogate_weight"][i] if "surrogate_weight" in self.columns else None,
                "random_control": self.random[i] if self.random is not None else None}


def used_passages(influence: Sequence[float | None], state: str, context_dependent: bool | None,
          config: InfluenceConfig) -> list[bool | None]:
    """Which passages the answer used: ``influence.used_rule`` over the question's influences
    (:func:`ragray.metrics.used.used_marks`); none where the answer does not depend on the passages
    (log-prob mode: not context dependent); None where nothing was measured."""
    if state == "error":
        return [None] * len(influence)
    marks = used_marks([math.nan if v is None else v for v in influence], rule=config.used_rule,
                       threshold=config.used_threshold, epsilon=config.epsilon)
    return [m if m is None or context_dependent is not False else False for m in marks]


def finite(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else v


def drop_influence(sims: list[float]) -> list[float]:
    """1 − similarity of each drop arm (the order's arms after its baseline); NaN stays NaN."""
    return [1.0 - s if not math.isnan(s) else float("nan") for s in sims[1:]]
