"""The overall score of a trial and the leaderboard order.

For each question, the weighted mean of the scored metrics measured on it (weights from the spec;
a metric missing for a question is left out of that question's mean, not counted as 0). Then:

- ``overall``: the mean of those per-question values, with a Student-t 95% CI;
- ``confidence``: Σ w·coverage / Σ w, where a metric's coverage is the share of questions it was
  measured on; unmeasurable metrics lower the confidence, not the mean;
- ``score = overall × confidence``: what the leaderboard sorts by (descending).

Ties (equal score to 1e-9) are broken by cost — ``cost_usd_per_question`` when every trial has
a price (``metrics.prices``), else ``tokens_per_question`` — then by ``latency_s``, both ascending. Failed trials
come last, in trial order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragray.metrics.summary import mean_ci

__all__ = ["composite", "score_trial", "rank_trials"]


def composite(q: Mapping[str, Any], weights: Mapping[str, float]) -> float | None:
    """One question's weighted mean of the scored metrics measured on it (None: none was)."""
    measured = {m: w for m, w in weights.items() if w > 0 and q.get(m) is not None}
    wsum = sum(measured.values())
    return sum(w * float(q[m]) for m, w in measured.items()) / wsum if wsum > 0 else None


def score_trial(per_question: Sequence[Mapping[str, Any]], weights: Mapping[str, float]) -> dict[str, Any]:
    """``overall`` (with CI), ``confidence``, ``score`` and per-metric coverage of one trial."""
    total = sum(weights.values())
    composites = [c for q in per_question if (c := composite(q, weights)) is not None]
    n = len(per_question)
    coverage = {m: (sum(1 for q in per_question if q.get(m) is not None) / n if n else 0.0) for m in weights}
    confidence = sum(weights[m] * coverage[m] for m in weights) / total if total > 0 else 0.0
    overall, lo, hi = mean_ci(composites)
    return {
        "overall": overall, "overall_low": lo, "overall_high": hi, "confidence": confidence,
        "score": None if overall is None else overall * confidence,
        "coverage": coverage, "n_scored_questions": len(composites),
    }


def _cost(row: Mapping[str, Any], key: str) -> float:
    cost = row.get(key)
    return float("inf") if cost is None else float(cost)


def rank_trials(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted best first (see the module docstring); each gets ``rank`` (failed: None)."""
    ok = [r for r in rows if r.get("status") == "done" and r.get("score") is not None]
    rest = [r for r in rows if r not in ok]
    # dollars only when every trial has a price (one unit for all), else tokens per question
    key = "cost_usd_per_question" if ok and all(r.get("cost_usd_per_question") is not None for r in ok) \
        else "tokens_per_question"
    ok.sort(key=lambda r: (-round(float(r["score"]), 9), _cost(r, key),
                           float("inf") if r.get("latency_s") is None else float(r["latency_s"])))
    for i, r in enumerate(ok, start=1):
        r["rank"] = i
    for r in rest:
        r["rank"] = None
    return ok + rest
