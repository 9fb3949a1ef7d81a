"""Dataset-level statistics of an influence run (``summary.json``).

Means over *measured* questions only; questions in a degenerate state are counted by state and
never averaged in as numbers. The 95% confidence interval of the mean ρ is Student-t based.
``alignment`` (the tie-robust verdict), ``position`` (position control) and ``validity`` (the
validity panel against gold passages) are the SPEC §11 blocks; reports lead with them.
``influence_mode`` is the mode the questions ran in (``influence.mode: auto`` resolves per process),
``influence_mode_requested`` what the config asked for.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from ragray.config import ExperimentConfig
from ragray.config.renamed import current
from ragray.generation.engine_counts import engine_summary
from ragray.metrics.answers import summarize_answers
from ragray.metrics.influence import FLAGS
from ragray.metrics.evidence import evidence_panel
from ragray.metrics.edit_panel import edit_test_block
from ragray.metrics.panel import validity_summary
from ragray.metrics.rates import wilson_interval
from ragray.metrics.validity import validity_panel
from ragray.rows.influence import InfluenceRecord
from ragray.rows.summaries import AlignmentSummary, MeanCI, PositionSummary, RunQuality, RunSummary

__all__ = ["describe_mode", "influence_label", "mean_ci", "summarize_run"]


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """Mean and its Student-t confidence interval (``None`` where undefined)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return None, None, None
    mean = float(x.mean())
    if len(x) < 2:
        return mean, None, None
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return mean, mean - half, mean + half


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _quality(questions: Sequence[dict[str, Any]]) -> RunQuality:
    """Means of the answer-quality columns over the questions where each is defined."""
    rows = [{**q, "em": q["baseline_em"]} for q in questions if q["error"] is None]
    out = summarize_answers(rows)
    for key in ("latency_s", "prompt_tokens", "completion_tokens"):  # per call: see calls_per_second, mean_*_tokens
        out.pop(key, None)
    for key in ("label_noise_ratio", "label_coverage", "causal_noise_ratio"):
        vals = [q[key] for q in rows if q.get(key) is not None]
        out[key] = float(np.mean(vals)) if vals else None
    return RunQuality(**out)


def _rate(values: Sequence[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def _mean_ci(values: Sequence[Any], clip: tuple[float, float] | None = None) -> MeanCI:
    """Mean and t-interval; ``clip``: the range the values live in (the mean's interval lies there too)."""
    mean, lo, hi = mean_ci([float(v) for v in values if v is not None])
    if clip is not None and lo is not None and hi is not None:
        lo, hi = max(clip[0], lo), min(clip[1], hi)
    return MeanCI(mean, lo, hi)


def _alignment(questions: Sequence[dict[str, Any]], config: ExperimentConfig) -> AlignmentSummary:
    """The tie-robust verdict over questions that have one (anything above ε), and how many of the
    seed's Divergent questions it clears (their ρ is capped by ties or moved by unused passages)."""
    rows = [q for q in questions if q.get("misaligned") is not None]
    cleared = [q for q in rows if q.get("divergent") and not q["misaligned"]]
    ceilings = [q["rho_ceiling"] for q in cleared if q.get("rho_ceiling") is not None]
    return AlignmentSummary(
        n_scored=len(rows),
        misaligned_rate=_rate([q["misaligned"] for q in rows]),
        misalignment_threshold=config.influence.misalignment_threshold,
        usage_ndcg=_mean_ci([q["usage_ndcg"] for q in rows], clip=(0.0, 1.0)),
        rbo_alignment=_mean_ci([q["rbo_alignment"] for q in rows], clip=(0.0, 1.0)),
        rbo_p=config.influence.rbo_p,
        top1_used_rate=_rate([q["top1_used"] for q in rows]),
        relies_on_lower_rank_rate=_rate([q["relies_on_lower_rank"] for q in rows]),
        mean_rho_ceiling=_rate([q.get("rho_ceiling") for q in rows]),
        divergent_not_misaligned=len(cleared),
        divergent_not_misaligned_mean_rho_ceiling=_rate(ceilings),
        misaligned_ci95=wilson_interval(sum(bool(q["misaligned"]) for q in rows), len(rows)),
    )


def _position(questions: Sequence[dict[str, Any]], config: ExperimentConfig) -> PositionSummary:
    """Position control: how often influence followed the slot, and what the second order cost."""
    mode = config.influence.position_control
    rows = [q for q in questions if q.get("position_sensitivity") is not None]
    n_calls = sum(q.get("n_calls") or 0 for q in questions)
    n_control = sum(q.get("n_control_calls") or 0 for q in questions)
    return PositionSummary(
        control=mode,
        n_scored=len(rows),
        position_driven_rate=_rate([q["position_driven"] for q in rows]),
        position_sensitivity=_mean_ci([q["position_sensitivity"] for q in rows]),
        control_calls=n_control,
        control_call_share=n_control / n_calls if n_calls else None,
    )


def _scored_beyond_arms(questions: Sequence[dict[str, Any]], calls: Sequence[dict[str, Any]]) -> int:
    """Contexts the questions scored beyond their rows of the calls table (the interaction design's
    empty and kept-alone contexts; none in the drop-one modes)."""
    rows: dict[str, int] = {}
    for c in calls:
        rows[c["question_id"]] = rows.get(c["question_id"], 0) + 1
    return sum(max(0, (q.get("n_calls") or 0) - rows.get(q["question_id"], 0)) for q in questions)


def influence_label(mode: str, similarity: str) -> str:
    """How the run measured influence, in words (the validity panel's name for it)."""
    return {"interactions": "keep-alone + drop-one with interactions", "logprob_share": "drop-one log-prob",
            "loo": f"drop-one {similarity}", "surrogate": "surrogate (random subsets)"}.get(mode, f"drop-one ({mode})")


#: dtypes whose log-probabilities are too coarse for the verdicts (benchmarks/bench_dtype.py;
#: the figures: docs/running.md)
LOW_PRECISION = ("bfloat16", "float16")
PRECISION_WARNING = (
    "{precision}: a verdict can come from rounding, not use (against float32 on 20 questions, on two CPUs 5 and "
    "6 got other used passages, 4 and 5 another verdict: docs/running.md); pin generation.dtype=float32 for verdicts"
)


def describe_mode(s: RunSummary) -> tuple[str, str | None]:
    """A run summary's influence measure in words, and how it was chosen (None: as configured),
    with a warning where the log-probabilities were computed in a low precision."""
    mode = s.influence_mode
    label = influence_label(mode, s.similarity or "?") if mode else "not recorded"
    precision = s.precision
    if precision:
        label = f"{label}, {precision}"
    warning = None
    if mode in ("interactions", "logprob_share", "surrogate", "jsd", "mixed") and (
            precision in LOW_PRECISION or precision == "mixed"):
        warning = PRECISION_WARNING.format(precision=precision)
    if mode == "mixed":  # say how many ran each way first, then auto's reason for the fallback
        counts = ", ".join(f"{n} questions {m}" for m, n in (s.influence_mode_counts or {}).items())
        note = "; ".join(filter(None, [counts, s.influence_mode_note]))
    elif s.influence_mode_note:
        note = s.influence_mode_note
    elif s.influence_mode_requested == "auto":
        note = "auto: the backend scores log-probabilities"
    else:
        note = None
    return label, "; ".join(filter(None, [warning, note])) or None


def _mode(questions: Sequence[dict[str, Any]], config: ExperimentConfig) -> dict[str, Any]:
    """The mode the questions ran in (``mixed`` when they differ: a resumed run whose backend
    changed, or Ray workers whose probes disagreed), what was asked for, and auto's reason."""
    # a question finished before a resume may hold a mode's old name (ragray.config.renamed)
    counts = Counter(current("influence.mode", q.get("influence_mode"), warn=False) or config.influence.mode
                     for q in questions)
    notes = list(dict.fromkeys(q["influence_mode_note"] for q in questions if q.get("influence_mode_note")))
    mode = next(iter(counts)) if len(counts) == 1 else ("mixed" if counts else config.influence.mode)
    precisions = Counter(q["dtype"] for q in questions if q.get("dtype"))
    return {
        "influence_mode": mode,
        "influence_mode_requested": config.influence.mode,
        "influence_mode_note": "; ".join(notes) or None,
        "influence_mode_counts": dict(counts),
        # the dtype the model computed in (mixed: Ray actors or a resumed run that differed)
        "precision": next(iter(precisions)) if len(precisions) == 1 else ("mixed" if precisions else None),
    }


def summarize_run(records: Sequence[InfluenceRecord], config: ExperimentConfig, model_id: str) -> RunSummary:
    """``summary.json`` of an influence run over its finished ``records``."""
    questions = [r.question.as_dict() for r in records]
    passages = [p.as_dict() for r in records for p in r.passages]
    measured = [q for q in questions if q["state"] == "measured"]
    rhos = [q["spearman_rho"] for q in measured]
    mean_rho, lo, hi = mean_ci(rhos)
    if lo is not None and hi is not None:  # a mean of values in [-1, 1] lies there: clip the t-interval
        lo, hi = max(-1.0, lo), min(1.0, hi)
    calls = [c.as_dict() for r in records for c in r.calls]
    ok_calls = [c for c in calls if c["error"] is None]
    seconds = sum(q["seconds"] for q in questions)
    ems = [q["baseline_em"] for q in questions if q["baseline_em"] is not None]
    flag_counts = Counter(f for q in questions for f in q["flags"])
    gen = config.generation
    mode = _mode(questions, config)
    return RunSummary(
        n_questions=len(questions),
        n_measured=len(measured),
        states=dict(Counter(q["state"] for q in questions)),
        mean_spearman=mean_rho,
        mean_spearman_ci95=(lo, hi),
        median_spearman=float(np.median(rhos)) if rhos else None,
        divergent_rate=_mean([float(q["divergent"]) for q in measured]),
        alignment=_alignment(questions, config),
        position=_position(questions, config),
        validity=validity_panel(questions, passages, influence_label(mode["influence_mode"], config.influence.similarity),
                                seed=config.seed),
        mean_dominance=_mean([q["dominance"] for q in measured]),
        flag_counts={f: flag_counts.get(f, 0) for f in FLAGS},
        flag_rates={f: flag_counts.get(f, 0) / len(questions) if questions else None for f in FLAGS},
        baseline_exact_match=_mean(ems),
        quality=_quality(questions),
        n_calls=len(calls) + _scored_beyond_arms(questions, calls),
        n_failed_calls=len(calls) - len(ok_calls),
        errors=sum(1 for q in questions if q["error"] is not None),
        error_questions=tuple(
            {"question_id": q["question_id"], "error": q["error"]} for q in questions if q["error"]
        ),
        calls_per_second=len(calls) / seconds if seconds else None,
        # generated calls only (log-prob mode scores its ablations: no completion)
        mean_prompt_tokens=_mean([c["prompt_tokens"] for c in ok_calls if c["prompt_tokens"] is not None]),
        mean_completion_tokens=_mean(
            [c["completion_tokens"] for c in ok_calls if c["completion_tokens"] is not None]
        ),
        model=model_id,
        backend=gen.backend,
        template=gen.template,
        **mode,
        similarity=config.influence.similarity,
        retriever=config.retrieval.retriever,
        top_k=config.retrieval.top_k,
        divergence_threshold=config.influence.divergence_threshold,
        evidence=(evidence := _evidence(questions, passages, records, config)),
        panel=validity_summary(evidence, influence_label(mode["influence_mode"], config.influence.similarity),
                               reason=None if any(p.get("is_gold") for p in passages)
                               else "no retrieved passage is marked gold (the data has no gold passage ids)",
                               edit_test=edit_test_block(questions, passages, config.influence.edit_test)),
        engine=engine_summary(questions),
    )


def _evidence(questions: list[dict], passages: list[dict], records: Sequence[InfluenceRecord],
              config: ExperimentConfig) -> dict | None:
    """The evidence statistics (None without gold passages: nothing to measure against)."""
    if not any(p.get("is_gold") for p in passages):
        return None
    checks = [c.as_dict() for r in records for c in r.checks]
    return evidence_panel(questions, passages, checks, seed=config.seed)
