"""Is the leaderboard's winner really ahead? Each finished trial against the winner, paired by
question.

The leaderboard sorts by ``score`` (:mod:`ragray.adapters.sweep.score`); on a few questions its
order is mostly noise. Here every other finished trial is compared with the winner on the
questions both scored: the per-question composite (the weighted mean of the scored metrics, the
quantity behind ``overall``), its mean difference ``vs_best`` (this trial − the winner, negative
when behind) with a 95% CI, and the two-sided Wilcoxon signed-rank test (``p_vs_best``),
Holm-corrected over *every pair* of finished trials: the winner is chosen by these same scores,
and comparing only it with the others after the fact inflates the false alarms (measured on five
configurations drawn from one distribution, 30 questions, 1,000 sweeps: 9.2% called a trial
behind with Holm over the winner's 4 comparisons, 27.9% uncorrected; Holm over all 10 pairs holds
the family-wise error at α whichever pair is picked). A trial is ``beaten`` when that p is below
α and it is behind.

States of the whole decision (``summary.json`` ``decision``):

- ``decided``: the winner is ahead of every other finished trial beyond noise;
- ``partly``: ahead of some, within noise of the rest (listed, with ``questions_to_decide`` for
  the closest: the questions a paired test with 80% power would need to tell that difference
  from zero at the Bonferroni level of all pairs, (z₁₋α/2m + z₀.₈)² sd² / d², an estimate from
  the observed difference);
- ``undecided``: fewer common questions than the exact signed-rank test needs to reach p < α at
  all (6 at α = 0.05): the order is the measured one, not a significant one;
- ``single`` (one finished trial) or ``none`` (no finished trial): nothing to compare.

The confidence factor of ``score`` (metrics that could not be measured) is not part of the test:
a winner by score whose composite is lower than a runner-up's shows a positive ``vs_best`` there
and is not ahead of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scipy.stats import norm

from ragray.metrics.stats import PairedTests, holm, min_questions, paired_tests

__all__ = ["ALPHA", "behind_words", "compare_to_best", "decision_line"]

ALPHA = 0.05
_Z_POWER = 0.8416212335729143  # 80% power


def _z(alpha: float) -> float:
    """z for a two-sided test at ``alpha`` plus z for 80% power."""
    return float(norm.ppf(1 - alpha / 2)) + _Z_POWER


def _paired(x: Mapping[str, float], y: Mapping[str, float]) -> tuple[PairedTests | None, int]:
    """The paired tests of x − y on the questions both scored, and how many there were."""
    common = sorted(set(x) & set(y))
    return (paired_tests([x[q] for q in common], [y[q] for q in common]) if common else None), len(common)


def _p(t: PairedTests | None) -> float:
    return 1.0 if t is None or t["wilcoxon"]["p_value"] is None else t["wilcoxon"]["p_value"]


def _to_decide(mean: float | None, sd: float | None, need: int, z: float) -> int | None:
    if mean is None or mean == 0:
        return None  # the same on average: no number of questions tells them apart
    if not sd:
        return need  # the same difference on every question: the test's minimum decides it
    return max(need, math.ceil(z**2 * sd**2 / mean**2))


def compare_to_best(rows: Sequence[dict[str, Any]], composites: Mapping[str, Mapping[str, float]],
                    alpha: float = ALPHA) -> dict[str, Any]:
    """Add ``vs_best``, ``vs_best_low``, ``vs_best_high``, ``p_vs_best``, ``beaten`` and
    ``questions_to_decide`` to each ranked row after the first (``composites``: trial id ->
    question id -> composite); returns the decision (module docstring)."""
    ranked = [r for r in rows if r.get("rank")]
    need = min_questions(alpha)
    if len(ranked) < 2:
        return {"state": "single" if ranked else "none", "alpha": alpha, "min_questions": need}
    best, others = ranked[0], ranked[1:]
    # every pair, not only the winner's: the winner was picked by these same scores, and Holm over
    # all pairs holds the family-wise error whichever pair is picked afterwards
    ids = [r["trial_id"] for r in ranked]
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
    tests = {pair: _paired(composites.get(pair[1], {}), composites.get(pair[0], {})) for pair in pairs}
    adjusted = dict(zip(pairs, holm([_p(tests[pair][0]) for pair in pairs])))
    z = _z(alpha / len(pairs))
    n_common = []
    for r in others:
        t, n = tests[(best["trial_id"], r["trial_id"])]
        p = adjusted[(best["trial_id"], r["trial_id"])]
        md = t["mean_difference"] if t else {"mean": None, "low": None, "high": None, "sd": None}
        r.update(vs_best=md["mean"], vs_best_low=md["low"], vs_best_high=md["high"], p_vs_best=p,
                 beaten=None if n < need else bool(p < alpha and (md["mean"] or 0) < 0),
                 questions_to_decide=_to_decide(md["mean"], md["sd"], need, z))
        n_common.append(n)
    n = min(n_common)
    beaten = [r for r in others if r["beaten"]]
    # better per question beyond noise: the winner leads on score only through the confidence factor
    higher = [r for r in others if r["beaten"] is False and r["p_vs_best"] < alpha and (r["vs_best"] or 0) > 0]
    close = [r for r in others if r["beaten"] is False and r not in higher]
    state = "undecided" if n < need else "decided" if not close and not higher else "partly"
    closest = max(close, key=lambda r: (r["vs_best"] if r["vs_best"] is not None else -math.inf), default=None)
    return {"state": state, "winner": best["label"], "n_questions": n, "alpha": alpha, "min_questions": need,
            "test": "paired Wilcoxon signed-rank on the per-question composite, Holm over every pair of trials",
            "ahead_of": [r["label"] for r in beaten], "within_noise": [r["label"] for r in close],
            "higher_per_question": [r["label"] for r in higher],
            "closest": None if closest is None else {k: closest[k] for k in (
                "label", "vs_best", "vs_best_low", "vs_best_high", "p_vs_best", "questions_to_decide")}}


def behind_words(row: Mapping[str, Any], alpha: float = ALPHA) -> str | None:
    """A row's standing against the winner, in words (None for the winner or an unranked row)."""
    if row.get("beaten") is None:
        return "undecided" if "vs_best" in row and row.get("rank") else None
    if row["beaten"]:
        return "yes"
    higher = row["p_vs_best"] < alpha and (row["vs_best"] or 0) > 0
    return "no: higher per question" if higher else "within noise"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def decision_line(d: Mapping[str, Any]) -> str | None:
    """The decision in one sentence (None when there was nothing to compare)."""
    if d.get("state") not in ("decided", "partly", "undecided"):
        return None
    n_others = len(d["ahead_of"]) + len(d["within_noise"]) + len(d.get("higher_per_question") or ())
    if d["state"] == "undecided":
        return (f"best: {d['winner']} — not decided: {d['n_questions']} question{'s' if d['n_questions'] != 1 else ''} "
                f"in common, and a paired test needs at least {d['min_questions']} to decide at p < {d['alpha']:g}; "
                "the order above is the measured one, not a significant one")
    if d["state"] == "decided":
        return (f"best: {d['winner']} — ahead of all {n_others} other configurations beyond noise "
                f"({d['n_questions']} questions, paired Wilcoxon, Holm, p < {d['alpha']:g})")
    line = (f"best: {d['winner']} — ahead of {len(d['ahead_of'])} of {n_others} configurations beyond noise, "
            f"within noise of {len(d['within_noise'])} ({d['n_questions']} questions, paired Wilcoxon, Holm)")
    if c := d["closest"]:
        more = (f"; telling them apart would need about {c['questions_to_decide']} questions"
                if c["questions_to_decide"] else "; they score the same on average")
        line += (f"; closest: {c['label']} ({_signed(c['vs_best'])}, 95% CI {_signed(c['vs_best_low'])}.."
                 f"{_signed(c['vs_best_high'])}, p {c['p_vs_best']:.3g}){more}")
    if higher := d.get("higher_per_question"):
        line += (f"; {', '.join(higher)} score{'s' if len(higher) == 1 else ''} higher per question beyond noise "
                 "(the winner leads only through the confidence factor: metrics it measured on more questions)")
    return line
